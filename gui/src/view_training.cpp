// Training view: start, pause, step, reset; the run's settings; the live loss-scale slider; steps/s.
#include <fmt/core.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "app.hpp"
#include "ui_scale.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "choice_combo.hpp"
#include "flow_layout.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "plot_frame.hpp"
#include "wrapped_text.hpp"

namespace fpscope::gui {

namespace {

Rgb state_colour(TrainingStatus::State state) {
  switch (state) {
    case TrainingStatus::State::idle: return palette::state_idle;
    case TrainingStatus::State::running: return palette::state_running;
    case TrainingStatus::State::paused: return palette::state_paused;
    case TrainingStatus::State::finished: return palette::state_finished;
    case TrainingStatus::State::failed: return palette::state_failed;
  }
  return palette::state_idle;
}

void state_swatch(Rgb colour) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + px(18), p.y + px(18)), to_imgui(colour));
  ImGui::Dummy(px(18, 18));
  ImGui::SameLine();
}

// The loss-scale slider, in every state: dragging previews (Histogram draws the ghost at once);
// Apply, or dragging with "apply while dragging", sets a running session's static scale.
void draw_scale_preview(App& app, TrainingSession* session, double run_scale) {
  ImGui::Separator();
  const int current = scale_log2_of(std::max(run_scale, 1e-300)).log2;
  ImGui::Text("Loss scale: the run's is 2^%d", current);
  int value = app.preview.scale_log2.value_or(current);
  value = std::clamp(value, slider_min_scale_log2, slider_max_scale_log2);
  ImGui::SetNextItemWidth(-1);
  const bool dragged = ImGui::SliderInt("##scale", &value, slider_min_scale_log2, slider_max_scale_log2, "preview 2^%d");
  if (dragged) {
    app.preview.scale_log2 = value;
    if (session != nullptr && app.preview.apply_while_dragging) session->set_static_scale(std::ldexp(1.0, value));
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Drag to see the gradients at another loss scale (an outline over the bars in Histogram);\n"
                      "Apply makes it the run's static scale.");
  ImGui::BeginDisabled(session == nullptr || !app.preview.scale_log2);
  if (ImGui::Button("Apply") && session != nullptr && app.preview.scale_log2) session->set_static_scale(std::ldexp(1.0, *app.preview.scale_log2));
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(!app.preview.scale_log2);
  if (ImGui::Button("Back to the run's")) app.preview.scale_log2.reset();
  ImGui::EndDisabled();
  ImGui::BeginDisabled(session == nullptr);
  ImGui::Checkbox("apply while dragging", &app.preview.apply_while_dragging);
  ImGui::EndDisabled();
  if (session == nullptr) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("A preview only: applying a scale needs a run training in this window.");
    ImGui::PopStyleColor();
  }
}

void draw_followed(App& app) {
  ImGui::TextUnformatted("Following a run log");
  ImGui::TextWrapped("%s", app.follower->path().c_str());
  // Growing, or quiet: a log says nothing when its writer ends, so the app says how long it has been.
  const bool quiet = app.now - app.last_growth_at > follow_quiet_seconds;
  state_swatch(!app.follow_error.empty() ? palette::state_failed : quiet ? palette::state_finished : palette::state_running);
  ImGui::Text("%zu snapshots%s", app.snapshots.size(), app.follower->restarts() > 0 ? " (file restarted)" : "");
  if (app.follow_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
    ImGui::TextWrapped(quiet ? "no new lines for %.0f s or more: the writer has finished or paused" : "growing", follow_quiet_seconds);
    ImGui::PopStyleColor();
  }
  if (!app.follow_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, to_imgui(palette::error_text));
    ImGui::TextWrapped("%s", app.follow_error.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::Separator();
  ImGui::Text("source     %s", app.header.source.empty() ? "-" : app.header.source.c_str());
  ImGui::Text("model      %s", app.header.model.empty() ? "-" : app.header.model.c_str());
  const auto or_dash = [](const std::string& text) { return text.empty() ? std::string("-") : text; };
  ImGui::Text("precision  %s%s", or_dash(app.header.precision).c_str(),
              app.header.format.empty() ? ""
                                        : fmt::format(" ({}{}{})", app.header.format, app.header.format_assumed ? " assumed" : "",
                                                      app.header.rounding.empty() ? "" : ", " + app.header.rounding)
                                              .c_str());
  if (app.header.format_assumed)
    text_disabled_wrapped("The log does not say what the run cast to: %s is its writer's default, not the run's cast.", app.header.format.c_str());
  ImGui::TextWrapped("scaling    %s", app.header.scaler.c_str());
  if (!app.header.optimizer.empty()) ImGui::TextWrapped("optimizer  %s", app.header.optimizer.c_str());
  if (!app.header.recipe.empty()) ImGui::TextWrapped("recipe     %s", app.header.recipe.c_str());
  if (!app.header.products.empty()) ImGui::TextWrapped("products   %s", app.header.products.c_str());
  if (const Snapshot* s = app.current_snapshot())
    ImGui::TextWrapped("step %lld  loss %.5f  scale 2^%.0f%s", static_cast<long long>(s->step), s->loss, std::log2(s->loss_scale),
                s->skipped ? "  skipped" : "");
  const Snapshot* latest = app.snapshots.empty() ? nullptr : app.snapshots.back().get();
  draw_scale_preview(app, nullptr, latest != nullptr ? latest->loss_scale : 1.0);
}

// One line on what to do next, from the shown step's window of gradients: the advised scale while they fall
// out of the format's range, and where to look once they are in it.
void draw_next_step_hint(App& app, const TrainingStatus& status) {
  if (app.snapshots.empty() || app.form.precision == Precision::fp32) return;
  const LossScaleAdvice advice = app.steady_advice(app.format_index);  // as the What-if view advises
  if (advice.kind != LossScaleAdvice::Kind::scale) return;
  const int now_log2 = scale_log2_of(status.loss_scale).log2;
  ImGui::PushStyleColor(ImGuiCol_Text, to_imgui(palette::hint_text));
  const bool active = status.state == TrainingStatus::State::running || status.state == TrainingStatus::State::paused;
  // The red bars are the target format's flushes: the run's own only where it trains in that format.
  const bool run_format = run_cast_to(app.header, target_format_names[app.format_index]);
  // Red bars only where there are some: the shown step's own casts flushed a gradient (in the run's
  // format; another format's flushes are the Histogram's prediction, not counted here).
  std::uint64_t flushed = 0;
  if (const Snapshot* shown = app.current_snapshot(); shown != nullptr && run_format)
    for (const TensorRecord& t : shown->tensors)
      if (is_gradient(t.kind) && !is_shadow_tensor(t.name) && t.cast) flushed += t.cast->flushed_to_zero;
  if (run_format && flushed == 0 && now_log2 < advice.scale_log2 - 1)
    ImGui::TextWrapped("At 2^%d no gradient flushes to zero in %s; 2^%d (advised) lifts the smallest further from the edge.", now_log2,
                       target_format_names[app.format_index], advice.scale_log2);
  else if (now_log2 < advice.scale_log2 - 1 && active)
    ImGui::TextWrapped("Red bars are gradients %s %s to zero. Drag the loss scale to 2^%d (advised) and press Apply.",
                       target_format_names[app.format_index], run_format ? "flushes" : "would flush", advice.scale_log2);
  else if (now_log2 < advice.scale_log2 - 1)
    ImGui::TextWrapped("Red bars are gradients %s %s to zero. Drag the loss scale to 2^%d (advised) to see where they would "
                       "go; Start trains again.", target_format_names[app.format_index], run_format ? "flushed" : "would flush",
                       advice.scale_log2);
  else
    ImGui::TextWrapped("At 2^%d the gradients sit in %s's range: watch the loss recover in Curves.", now_log2,
                       target_format_names[app.format_index]);
  ImGui::PopStyleColor();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The advice keeps the largest gradient of the latest step one binade below %s's overflow\n"
                      "(set by %s%s). Histogram shows where the slider's scale puts them before you apply it.",
                      target_format_names[app.format_index], advice.decided_by.c_str(),
                      advice.from_shadow ? ", from fp32 shadows: values nothing flushed" : "");
}

// Start / Pause / Resume / Step / Stop / Reset.
void draw_run_controls(App& app, TrainingSession& session, const TrainingStatus& status, bool active) {
  // Each button on the line where it fits, else on the next (a narrow panel).
  if (ImGui::Button(active ? "Restart" : "Start")) app.start_training(app.form);
  same_line_if_room(button_width(status.state == TrainingStatus::State::running ? "Pause" : "Resume"));
  if (status.state == TrainingStatus::State::running) {
    if (ImGui::Button("Pause")) session.pause();
  } else {
    ImGui::BeginDisabled(status.state != TrainingStatus::State::paused);
    if (ImGui::Button("Resume")) session.resume();
    ImGui::EndDisabled();
  }
  same_line_if_room(button_width("Step"));
  ImGui::BeginDisabled(!active);
  const bool step_pressed = ImGui::Button("Step");
  ImGui::EndDisabled();
  if (step_pressed) {
    if (status.state == TrainingStatus::State::paused) session.single_step();
    else if (status.state == TrainingStatus::State::running) session.pause();
  }
  same_line_if_room(button_width("Stop"));
  ImGui::BeginDisabled(!active);
  if (ImGui::Button("Stop")) session.stop();  // finished: what was recorded stays
  ImGui::EndDisabled();
  same_line_if_room(button_width("Reset"));
  if (ImGui::Button("Reset")) {
    session.reset();  // idle, nothing recorded: the form takes effect at the next Start
    app.training_message.clear();
  }

}

// The state, steps, loss, speed, scale and skips, the hint of what to do next, and any error.
void draw_run_status(App& app, const TrainingStatus& status) {
  if (status.state == TrainingStatus::State::idle)
    ImGui::TextWrapped("Press Start: fp16 without loss scaling. Most activation gradients fall below fp16's range (red in "
                       "Histogram); then drag the loss scale up and watch them move into the green.");
  else if (status.state == TrainingStatus::State::paused && status.step == 0)
    ImGui::TextWrapped("Ready at step 0: press Resume to train in fp16 without loss scaling (or Step, one step at a time). "
                       "Most activation gradients will fall below fp16's range (red in Histogram); then drag the loss scale "
                       "up and watch them move into the green.");
  else
    draw_next_step_hint(app, status);
  state_swatch(state_colour(status.state));
  // Steps done (the views name a recorded step by its number, which starts at 0).
  ImGui::Text("%s  %lld steps done", std::string(training_state_name(status.state)).c_str(), static_cast<long long>(status.step));
  ImGui::TextWrapped("loss %.5f   %.1f steps/s%s%s", status.loss, status.steps_per_second, status.backend.empty() ? "" : "   on the ",
              status.backend.empty() ? "" : (status.backend == "cuda" ? "GPU (CUDA)" : "CPU"));
  ImGui::TextWrapped("scale 2^%.0f (%s)   skipped %lld", std::log2(status.loss_scale), status.dynamic_scaling ? "dynamic" : "static",
              static_cast<long long>(status.skipped_steps));
  if (!status.error.empty() || !app.training_message.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, to_imgui(palette::error_text));
    ImGui::TextWrapped("%s", status.error.empty() ? app.training_message.c_str() : status.error.c_str());
    ImGui::PopStyleColor();
  }

}

// Fault injection: what one non-finite gradient does (the step is skipped, the scale backs off).
void draw_inject(App& app, TrainingSession& session, bool active) {
  InjectState& inject = app.inject;
  static constexpr FaultInjection::Value fault_values[] = {FaultInjection::Value::nan, FaultInjection::Value::infinity};
  ImGui::SetNextItemWidth(px(70));
  choice_combo("##inject value", inject.value, fault_values, fault_value_name);
  ImGui::SameLine();
  const std::optional<GptShape>& gpt = session.settings().config.gpt;
  ImGui::SetNextItemWidth(px(gpt ? 150 : 90));  // a GPT's names are longer: "h1.attn.proj"
  std::string target;  // the layer or weight the button names
  if (gpt) {
    // A GPT's weights by the names the run log records them under.
    const std::vector<std::string> weights = gpt_recorded_weights(*gpt);
    inject.gpt_weight = std::clamp(inject.gpt_weight, 0, static_cast<int>(weights.size()) - 1);
    target = weights[static_cast<std::size_t>(inject.gpt_weight)];
    if (ImGui::BeginCombo("##inject weight", target.c_str())) {
      for (std::size_t w = 0; w < weights.size(); ++w)
        if (ImGui::Selectable(weights[w].c_str(), static_cast<int>(w) == inject.gpt_weight)) inject.gpt_weight = static_cast<int>(w);
      ImGui::EndCombo();
    }
  } else {
    const int layers = std::max(1, static_cast<int>(session.settings().config.layer_sizes.size()) - 1);
    inject.layer = std::clamp(inject.layer, 1, layers);
    ImGui::SliderInt("##inject layer", &inject.layer, 1, layers, "fc%d");
    target = mlp_layer_name(static_cast<std::size_t>(inject.layer) - 1);
  }
  same_line_if_room(button_width("Inject"));
  ImGui::BeginDisabled(!active);
  if (ImGui::Button("Inject")) {
    if (gpt) session.inject_next_step(inject.value, target);
    else session.inject_next_step(inject.value, inject.layer);
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("put a %s into %s's weight gradient at the next step", inject.value == FaultInjection::Value::nan ? "NaN" : "infinity",
                      target.c_str());

}

// The run's settings: the options of fpscope train, taking effect on Start.
void draw_settings_form(TrainingForm& f) {
  ImGui::TextUnformatted("Settings (take effect on Start)");
  ImGui::PushItemWidth(px(170));
  const bool was_gpt = names_gpt(f.model);
  if (ImGui::InputText("model", &f.model)) follow_model_kind(f, was_gpt);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("An MLP's layer sizes, input to classes (32-64-64-10), or a GPT: gpt:layers=2,width=64,heads=4,context=32\n"
                      "(backend auto trains it on the GPU where a device answers; the batch, learning rate, loss weight and optimizer still at\n"
                      "an MLP's defaults take a GPT's: 16 sequences, AdamW at 1e-3, the loss unweighted).");
  ImGui::BeginDisabled(names_gpt(f.model));  // a GPT's blocks use GELU
  choice_combo("activation", f.activation, all_activations, activation_name);
  ImGui::EndDisabled();
  choice_combo("precision", f.precision, all_precisions, precision_name);
  choice_combo("rounding", f.rounding, all_rounding_modes, rounding_mode_name);
  choice_combo("loss scaling", f.scaling, all_scaling_kinds, scaling_kind_name);
  if (f.scaling == LossScalerConfig::Kind::fixed) ImGui::SliderInt("static scale", &f.static_scale_log2, 0, slider_max_scale_log2, "2^%d");
  ImGui::InputInt("batch", &f.batch);
  choice_combo("optimizer", f.optimizer.kind, all_optimizers, optimizer_name);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("sgd: w -= lr g. momentum: b = m b + g, w -= lr b. adamw: decoupled weight decay, bias-corrected\n"
                      "moments (torch.optim.AdamW). States in fp32, on either backend.");
  if (f.optimizer.kind == OptimizerKind::momentum) ImGui::SliderFloat("momentum", &f.optimizer.momentum, 0.0f, 0.99f, "%.2f");
  if (f.optimizer.kind == OptimizerKind::adamw) ImGui::InputFloat("weight decay", &f.optimizer.weight_decay, 0, 0, "%g");
  ImGui::InputFloat("clip grad norm", &f.optimizer.clip_grad_norm, 0, 0, "%g");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Clip the unscaled gradients' global L2 norm to this (0: off); skipped steps are never clipped.");
  f.optimizer.clip_grad_norm = std::max(0.0f, f.optimizer.clip_grad_norm);
  f.optimizer.weight_decay = std::max(0.0f, f.optimizer.weight_decay);
  choice_combo("recipe", f.recipe.recipe, all_gemm_recipes, gemm_recipe_name);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The matrix products' operands: FP8 with per-tensor scaling (delayed: from an amax history of 16 steps;\n"
                      "current: from this step's amax), FP8 unscaled, or OCP MX / NVFP4 blocks along each product's reduction\n"
                      "axis. Curves then shows each FP8 operand's amax and scale. Either backend trains it (2-D weight tiles and the\n"
                      "Hadamard transform only the CPU: backend auto keeps those runs there).");
  if (block_scaled(f.recipe.recipe)) {
    ImGui::Checkbox("weights in 2-D tiles", &f.recipe.square_weight_tiles);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Each weight scaled by square tiles of the block size (16x16 for nvfp4), quantized once a step: the forward\n"
                        "and input-gradient products see the same values (NVIDIA's NVFP4 recipe). CPU backend.");
    ImGui::Checkbox("Hadamard (weight gradients)", &f.recipe.hadamard_weight_gradients);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("The weight gradient's two operands through a 16-point random Hadamard transform along the batch before\n"
                        "they are quantized: outliers spread over their run of 16 (NVIDIA's NVFP4 recipe). CPU backend.");
  }
  if (f.recipe.recipe != GemmRecipe::none) {
    const auto gradient_name = [](const std::optional<RoundingMode>& mode) { return mode ? rounding_mode_name(*mode) : std::string("as the run"); };
    if (ImGui::BeginCombo("gradient rounding", gradient_name(f.recipe.gradient_rounding).c_str())) {
      if (ImGui::Selectable("as the run", !f.recipe.gradient_rounding)) f.recipe.gradient_rounding.reset();
      for (const RoundingMode mode : all_rounding_modes)
        if (ImGui::Selectable(rounding_mode_name(mode).c_str(), f.recipe.gradient_rounding == mode)) f.recipe.gradient_rounding = mode;
      ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("How the recipe's output-gradient operands round (NVIDIA's NVFP4 recipe: stochastic, everything else to\n"
                        "nearest), from the run's stochastic stream.");
  }
  ImGui::InputFloat("learning rate", &f.learning_rate, 0, 0, "%g");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("SGD: a step is learning rate x the gradient of the weighted loss, so 16384 with a\n"
                      "loss weight of 2^-14 moves the weights as a rate of 1 on the plain loss would.");
  ImGui::SliderInt("loss weight", &f.loss_weight_log2, -16, 0, "2^%d");
  ImGui::InputInt("record every", &f.record_every);
  ImGui::InputInt("steps (0: run on)", &f.steps);
  ImGui::InputText("data", &f.data);
  static constexpr const char* backends[] = {"auto", "cpu", "cuda"};
  if (ImGui::BeginCombo("backend", f.backend.c_str())) {
    for (const char* name : backends)
      if (ImGui::Selectable(name, f.backend == name)) f.backend = name;
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("auto: the CUDA backend where a device answers, else the CPU");
  if (ImGui::BeginCombo("record blocks", f.record_blocks.empty() ? "none" : f.record_blocks.c_str())) {
    if (ImGui::Selectable("none", f.record_blocks.empty())) f.record_blocks.clear();
    for (const BlockFormat& format : named_block_formats()) {
      const std::string name = block_format_name(format);
      if (ImGui::Selectable(name.c_str(), f.record_blocks == name)) f.record_blocks = name;
    }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Also record what this block-scaled format would do to every recorded tensor (the Blocks view);\n"
                      "it changes nothing in the training. Either backend records it (the CUDA backend blocks each tensor on the device).");
  ImGui::Checkbox("fp32 shadow", &f.shadow);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("On recorded steps, also run the step in float32 without casts and record its tensors as\n"
                      "'<name> (fp32 shadow)': the values nothing flushed, in the run log. Without it the advice\n"
                      "comes from shadows of the latest steps, sampled now and then and kept out of the log.");
  ImGui::InputInt("seed", &f.seed);
  ImGui::PopItemWidth();
  f.batch = std::clamp(f.batch, 1, 1 << 16);
  f.record_every = std::max(1, f.record_every);
  f.steps = std::max(0, f.steps);
  ImGui::TextDisabled("data: synthetic, mnist:DIR (MLP) or text:FILE (GPT)");
}

}  // namespace

void follow_model_kind(TrainingForm& f, bool was_gpt) {
  const training_defaults::KindSettings now = training_defaults::follow_model_kind(
      {f.batch, f.learning_rate, f.loss_weight_log2, f.optimizer.kind}, was_gpt, names_gpt(f.model));
  f.batch = now.batch;
  f.learning_rate = now.learning_rate;
  f.loss_weight_log2 = now.loss_weight_log2;
  f.optimizer.kind = now.optimizer;
}

TrainingOptions training_options(const TrainingForm& f) {
  const auto number = [](double value) { return fmt::format("{:.9g}", value); };  // a float32 read back as itself
  TrainingOptions o;
  o.model = f.model;
  if (!names_gpt(f.model)) o.activation = activation_name(f.activation);
  o.precision = precision_name(f.precision);
  o.round = rounding_mode_name(f.rounding);
  switch (f.scaling) {
    case LossScalerConfig::Kind::none: o.loss_scale = "none"; break;
    case LossScalerConfig::Kind::fixed: o.loss_scale = fmt::format("2^{}", f.static_scale_log2); break;
    case LossScalerConfig::Kind::dynamic: o.loss_scale = "dynamic"; break;
  }
  o.steps = std::to_string(f.steps);
  o.endless = true;
  o.batch = std::to_string(f.batch);
  o.lr = number(f.learning_rate);
  o.loss_weight = fmt::format("2^{}", f.loss_weight_log2);
  o.record_every = std::to_string(f.record_every);
  o.data = f.data;
  o.backend = f.backend;
  if (!f.record_blocks.empty()) o.record_blocks = f.record_blocks;
  const OptimizerConfig& optimizer = f.optimizer;
  o.optimizer = optimizer_name(optimizer.kind);
  o.momentum = number(optimizer.momentum);
  o.betas = number(optimizer.beta1) + "," + number(optimizer.beta2);
  o.eps = number(optimizer.epsilon);
  if (optimizer.kind == OptimizerKind::adamw) o.weight_decay = number(optimizer.weight_decay);
  o.clip_grad_norm = number(optimizer.clip_grad_norm);
  const RecipeConfig& recipe = f.recipe;
  o.recipe = gemm_recipe_name(recipe.recipe);
  if (per_tensor_fp8(recipe.recipe)) o.fp8_format = recipe.all_e4m3 ? "e4m3" : "hybrid";
  if (recipe.recipe == GemmRecipe::fp8_delayed) o.amax_history = std::to_string(recipe.amax_history);
  if (recipe.recipe == GemmRecipe::fp8_delayed || recipe.recipe == GemmRecipe::fp8_current) o.fp8_margin = std::to_string(recipe.margin);
  if (block_scaled(recipe.recipe)) {
    o.weight_blocks = recipe.square_weight_tiles ? "2d" : "1d";
    o.hadamard = recipe.hadamard_weight_gradients;
  }
  if (recipe.recipe != GemmRecipe::none && recipe.gradient_rounding) o.gradient_round = rounding_mode_name(*recipe.gradient_rounding);
  o.seed = std::to_string(f.seed);
  o.pause_at_step = std::to_string(f.pause_at_step);
  for (const FaultInjection& fault : f.faults) o.inject.push_back(describe(fault));
  o.shadow = f.shadow;
  return o;
}

TrainingForm training_form(const TrainingSettings& settings, const TrainingOptions& options) {
  const TrainingConfig& config = settings.config;
  const auto fits_int = [](const char* option, std::int64_t value) {
    if (value > std::numeric_limits<int>::max()) throw std::invalid_argument(fmt::format("{} {} is more than the app's form holds", option, value));
    return static_cast<int>(value);
  };
  TrainingForm f;
  f.model = options.model;
  f.activation = config.activation;
  f.precision = config.precision;
  f.rounding = config.rounding;
  f.scaling = config.scaler.kind;
  if (config.scaler.kind == LossScalerConfig::Kind::fixed) {
    const std::optional<int> k = slider_power(config.scaler.initial_scale, slider_min_scale_log2, slider_max_scale_log2);
    if (!k)
      throw std::invalid_argument(fmt::format("--loss-scale '{}' is not a power of two from 2^{} to 2^{} (the app's slider)",
                                              printable_text(options.loss_scale), slider_min_scale_log2, slider_max_scale_log2));
    f.static_scale_log2 = *k;
  }
  const std::optional<int> weight = slider_power(config.loss_weight, -16, 0);
  if (!weight)
    throw std::invalid_argument("--loss-weight '" + printable_text(options.loss_weight.value_or("")) +
                                "' is not a power of two from 2^-16 to 1 (the app's slider)");
  f.loss_weight_log2 = *weight;
  f.batch = settings.batch;
  f.learning_rate = config.learning_rate;
  f.record_every = fits_int("--record-every", settings.record_every);
  f.steps = fits_int("--steps", settings.steps);
  f.data = settings.data;
  f.backend = settings.backend;
  f.record_blocks = config.record_blocks ? block_recording_name(*config.record_blocks) : "";
  f.optimizer = config.optimizer;
  f.recipe = config.recipe;
  if (config.seed > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw std::invalid_argument(fmt::format("--seed {} is more than the app's form holds (0 to {})", config.seed, std::numeric_limits<int>::max()));
  f.seed = static_cast<int>(config.seed);
  f.pause_at_step = fits_int("--pause-at-step", settings.pause_at_step);
  f.faults = settings.faults;
  f.shadow = settings.shadow;
  return f;
}

void draw_training(App& app) {
  ImGui::TextUnformatted("Training");
  ImGui::Separator();
  if (app.follower) {
    draw_followed(app);
    return;
  }
  TrainingSession& session = *app.session;
  const TrainingStatus& status = app.training_status;
  const bool active = status.state == TrainingStatus::State::running || status.state == TrainingStatus::State::paused;
  draw_run_controls(app, session, status, active);
  draw_run_status(app, status);
  draw_scale_preview(app, active ? &session : nullptr, status.loss_scale);
  bool dynamic = status.dynamic_scaling;
  if (ImGui::Checkbox("dynamic (GradScaler's rule)", &dynamic) && active) {
    if (dynamic) session.set_dynamic_scaling();
    else session.set_static_scale(status.loss_scale);
  }

  draw_inject(app, session, active);
  ImGui::Separator();
  draw_settings_form(app.form);
}

}  // namespace fpscope::gui
