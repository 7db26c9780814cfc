// The app's frame: copy what is new from the store, then lay out the training panel and the view tabs.
#include "app.hpp"
#include "ui_scale.hpp"

#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "flow_layout.hpp"
#include "long_name.hpp"
#include "plot_frame.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt_shape.hpp"

namespace fpscope::gui {

std::string_view view_name(View view) {
  switch (view) {
    case View::training: return "training";
    case View::histogram: return "histogram";
    case View::heatmap: return "heatmap";
    case View::curves: return "curves";
    case View::what_if: return "what-if";
    case View::blocks: return "blocks";
    case View::inspector: return "inspector";
    case View::export_files: return "export";
  }
  return "?";
}

std::optional<View> parse_view(std::string_view name) {
  for (View view : all_views)
    if (view_name(view) == name) return view;
  return std::nullopt;
}

App::App(const AppOptions& options) : view(options.view), form(options.form) {
  preview.scale_log2 = options.preview_scale_log2;
  settle_at_step_ = options.settle_at_step;
  wanted_tensor_ = options.tensor;
  if (options.inspector) inspector = *options.inspector;
  kind = options.kind;
  format_index = options.format_index.value_or(0);
  format_chosen = options.format_index.has_value();
  store.set_memory_budget(snapshot_memory_budget);
  if (!options.follow.empty()) {
    follower = std::make_unique<FollowThread>(options.follow, store, follow_window_bytes, follow_poll_bytes);
  } else {
    session = std::make_unique<TrainingSession>(store);
    baseline_session = std::make_unique<TrainingSession>(baseline_store);
  }
  if (options.demo && session) {
    // The paper's effect, small: a tanh MLP whose loss is weighted by 2^-14 (lr raised to match),
    // so activation gradients sit near fp16's subnormal range. fp32 first, as the baseline.
    form.precision = Precision::fp32;
    form.scaling = LossScalerConfig::Kind::none;
    form.steps = 150;
    form.batch = 1024;
    if (start_training(form)) demo_stage_ = 0;
  } else if ((options.start || options.example) && session && !start_training(form, options.example && !options.start)) {
    std::fprintf(stderr, "fpscope-gui: cannot start training: %s\n", printable_text(training_message, 4096).c_str());
  }
}

App::~App() = default;

bool App::start_training(const TrainingForm& f, bool paused) {
  try {
    TrainingSettings settings = parse_training_options(training_options(f));
    settings.start_paused = paused;
    save_baseline_if_fp32();
    session->start(settings);
    if (demo_stage_ < 0) start_baseline(settings);  // the demo trains its own, first
    training_message.clear();
    step_index = -1;
    return true;
  } catch (const std::exception& e) {
    training_message = e.what();
    return false;
  }
}

void App::save_baseline_if_fp32() {
  if (header.precision != "fp32" || snapshots.empty()) return;
  baseline_steps.clear();
  baseline_loss.clear();
  for (const auto& s : snapshots) {
    baseline_steps.push_back(static_cast<double>(s->step));
    baseline_loss.push_back(s->loss);
  }
}

// How far the baseline trains ahead of the run it is drawn beside.
constexpr std::int64_t baseline_lead_steps = 500;

void App::start_baseline(const TrainingSettings& settings) {
  if (settings.config.precision == Precision::fp32) {  // the run is its own baseline
    baseline_session->reset();
    baseline_beside = false;
    return;
  }
  baseline_steps.clear();
  baseline_loss.clear();
  baseline_beside = true;
  TrainingSettings baseline = settings;
  baseline.config = shadow_config(settings.config);
  baseline.shadow = false;
  baseline.faults.clear();
  baseline.record_every = std::numeric_limits<std::int32_t>::max();  // the loss of every step; histograms of step 0 alone
  baseline.start_paused = false;
  baseline.pause_at_step = 0;
  baseline_session->start(baseline);
}

void App::pace_baseline() {
  if (!baseline_session) return;
  const TrainingStatus baseline = baseline_session->status();
  if (baseline.state == TrainingStatus::State::idle) return;
  if (training_status.state == TrainingStatus::State::idle) {  // the run was reset: so is its baseline
    baseline_session->reset();
    baseline_steps.clear();
    baseline_loss.clear();
    baseline_beside = false;
    return;
  }
  const RunStore::Update update = baseline_store.update_since(baseline_generation_, baseline_store.size(), baseline_steps.size());
  if (update.generation != baseline_generation_) {
    baseline_generation_ = update.generation;
    baseline_steps.clear();
    baseline_loss.clear();
  }
  for (const StepRecord& r : update.steps) {
    baseline_steps.push_back(static_cast<double>(r.step));
    baseline_loss.push_back(r.loss);
  }
  const std::int64_t lead_to = training_status.step + baseline_lead_steps;
  if (baseline.state == TrainingStatus::State::running && baseline.step >= lead_to) baseline_session->pause();
  else if (baseline.state == TrainingStatus::State::paused && baseline.step < lead_to) baseline_session->resume();
}

void App::update(double now_seconds) {
  now = now_seconds;
  if (session) training_status = session->status();
  if (follower) {
    if (std::string error = follower->error(); error != follow_error) {
      follow_error = std::move(error);
      if (!follow_error.empty()) std::fprintf(stderr, "fpscope-gui: %s\n", printable_text(follow_error, 4096).c_str());
    }
  }
  const std::uint64_t previous_generation = store_generation_seen_;
  RunStore::Update update = store.update_since(previous_generation, snapshots.size(), steps.size(), store_layout_seen_);
  std::int64_t selected_step = -1;  // kept across thinning by its step number
  if (update.generation != previous_generation) {
    snapshots.clear();
    steps.clear();
    tensor_names.clear();
    step_index = -1;
    ++data_version;
  } else if (update.layout != store_layout_seen_) {
    if (step_index >= 0) selected_step = snapshots[static_cast<std::size_t>(step_index)]->step;
    snapshots.clear();  // the store thinned old snapshots: take its list whole
    ++data_version;
  }
  store_generation_seen_ = update.generation;
  store_layout_seen_ = update.layout;
  // Until someone picks a target format, the views show what the run's own format does, for a run
  // trained here as for a log followed (fp32 runs keep the one shown: they have no format to flush in).
  if (!format_chosen && !(update.header == header))
    if (const std::optional<Format> cast_to = run_cast_format(update.header))
      if (const int index = target_format_index(format_name(*cast_to)); index >= 0) format_index = index;
  header = std::move(update.header);
  growing = !update.snapshots.empty();
  if (growing || !update.steps.empty()) last_growth_at = now;
  steps.insert(steps.end(), update.steps.begin(), update.steps.end());
  if (!update.snapshots.empty()) {
    for (const auto& s : update.snapshots) {
      for (const TensorRecord& t : s->tensors)
        if (std::find(tensor_names.begin(), tensor_names.end(), t.name) == tensor_names.end()) tensor_names.push_back(t.name);
    }
    snapshots.insert(snapshots.end(), update.snapshots.begin(), update.snapshots.end());
    ++data_version;
  }
  if (follower) follower->taken();  // it holds no snapshot the store has let go: read on
  if (selected_step >= 0) {  // the step shown, or the nearest kept one before it
    const auto at = std::upper_bound(snapshots.begin(), snapshots.end(), selected_step,
                                     [](std::int64_t step, const auto& s) { return step < s->step; });
    step_index = at == snapshots.begin() ? 0 : static_cast<int>(at - snapshots.begin()) - 1;
  }
  if (!wanted_tensor_.empty()) {
    const auto at = std::find(tensor_names.begin(), tensor_names.end(), wanted_tensor_);
    if (at != tensor_names.end()) {
      tensor_index = static_cast<int>(at - tensor_names.begin());
      wanted_tensor_.clear();
    }
  }
  if (tensor_index >= static_cast<int>(tensor_names.size())) tensor_index = 0;
  if (step_index >= static_cast<int>(snapshots.size())) step_index = -1;

  if (demo_stage_ == 0 && training_status.state == TrainingStatus::State::finished) {
    TrainingForm fp16 = form;
    fp16.precision = Precision::fp16;
    fp16.scaling = LossScalerConfig::Kind::none;
    form = fp16;
    demo_stage_ = start_training(fp16) ? 1 : 2;
  } else if (demo_stage_ == 1 && training_status.state != TrainingStatus::State::running) {
    demo_stage_ = 2;
  }
  ask_for_counterfactual();
  sample_shadows();
  pace_baseline();
}

// Shadow samples steady_advice reads: the last this many, one asked for at most every
// shadow_sample_seconds and every shadow_sample_steps steps while the run goes on (each costs a
// float32 step: one in shadow_sample_steps at most).
constexpr std::size_t shadow_samples_kept = 32;
constexpr double shadow_sample_seconds = 0.25;
constexpr double shadow_sample_steps = 20;

bool App::advice_from_samples() const {
  const TrainingStatus::State state = training_status.state;
  const bool holds_trainer = session && (state == TrainingStatus::State::running || state == TrainingStatus::State::paused ||
                                         state == TrainingStatus::State::finished);
  return holds_trainer && !session->settings().shadow && session->settings().config.precision != Precision::fp32;
}

void App::sample_shadows() {
  if (!advice_from_samples()) {
    shadow_samples_.clear();
    sampled_gradients_.clear();
    shadow_answer_seen_ = 0;
    shadow_asked_step_ = -1;
    return;
  }
  if (const std::shared_ptr<const ShadowSample> sample = session->shadow_sample(); sample && sample->answer != shadow_answer_seen_) {
    shadow_answer_seen_ = sample->answer;
    auto snapshot = std::make_shared<Snapshot>();
    snapshot->step = sample->step;
    snapshot->tensors = sample->records;
    shadow_samples_.push_back(std::move(snapshot));
    if (shadow_samples_.size() > shadow_samples_kept) shadow_samples_.erase(shadow_samples_.begin());
    std::vector<const Snapshot*> samples;
    for (const auto& s : shadow_samples_) samples.push_back(s.get());
    sampled_gradients_.clear();
    for (TensorSeries& series : tensor_series(std::span<const Snapshot* const>(samples)))
      if (is_gradient(series.kind)) sampled_gradients_.push_back(std::move(series));
  }
  const bool answered = shadow_answer_seen_ > 0 && shadow_asked_step_ >= 0 && shadow_samples_.back()->step >= shadow_asked_step_;
  if (training_status.state == TrainingStatus::State::running) {
    const double every = std::max(shadow_sample_seconds, training_status.steps_per_second > 0 ? shadow_sample_steps / training_status.steps_per_second : 0.0);
    if (shadow_asked_step_ < 0 || (now - shadow_asked_at_ >= every && (answered || now - shadow_asked_at_ >= 4 * every))) {
      session->request_shadow_sample();
      shadow_asked_at_ = now;
      shadow_asked_step_ = training_status.step;
    }
  } else if (shadow_asked_step_ != training_status.step) {  // paused or finished: the next step's, once
    session->request_shadow_sample();
    shadow_asked_at_ = now;
    shadow_asked_step_ = training_status.step;
  }
}

// A running session moves on while an answer is computed: its answer is a step or two behind when
// it arrives, and a new one is asked for at most this often (each costs a recorded step).
constexpr double counterfactual_refresh_seconds = 0.5;

void App::ask_for_counterfactual() {
  const TrainingStatus::State state = training_status.state;
  const bool holds_trainer = session && (state == TrainingStatus::State::running || state == TrainingStatus::State::paused ||
                                         state == TrainingStatus::State::finished);
  if (!holds_trainer) {
    counterfactual_.reset();
    asked_scale_log2_.reset();
    return;
  }
  counterfactual_ = session->counterfactual();
  if (!preview.scale_log2) return;
  const bool moved = asked_scale_log2_ != preview.scale_log2;
  const bool stale = state == TrainingStatus::State::running ? now - asked_at_ >= counterfactual_refresh_seconds
                                                               : asked_step_ != training_status.step;
  if (moved || stale) {
    session->request_counterfactual(std::ldexp(1.0, *preview.scale_log2));
    asked_scale_log2_ = preview.scale_log2;
    asked_step_ = training_status.step;
    asked_at_ = now;
  }
}

LossScaleAdvice App::steady_advice(int format_index) {
  window_series();  // brings window_gradients_ up to date
  const bool sampled = advice_from_samples();
  LossScaleAdvice advice = sampled && sampled_gradients_.empty() ? LossScaleAdvice{}
                                                                 : recommend_loss_scale(sampled ? sampled_gradients_ : window_gradients_,
                                                                                        target_formats[format_index]);
  std::optional<int>& held = held_advice_log2_[static_cast<std::size_t>(format_index)];
  if (advice.kind != LossScaleAdvice::Kind::scale) {
    held.reset();
    return advice;
  }
  if (!held || advice.scale_log2 < *held || advice.scale_log2 > *held + 1) held = advice.scale_log2;
  advice.scale_log2 = *held;
  return advice;
}

const CounterfactualResult* App::counterfactual_preview() const {
  if (!counterfactual_ || !preview.scale_log2 || !counterfactual_->result.snapshot) return nullptr;
  if (counterfactual_->loss_scale != std::ldexp(1.0, *preview.scale_log2)) return nullptr;
  return counterfactual_.get();
}

const TensorRecord* App::counterfactual_record(const std::string& name, TensorKind kind) const {
  const CounterfactualResult* answer = counterfactual_preview();
  if (answer == nullptr) return nullptr;
  for (const TensorRecord& t : answer->result.snapshot->tensors)
    if (t.name == name && t.kind == kind) return &t;
  return nullptr;
}

bool App::counterfactual_pending() const {
  return counterfactual_preview() == nullptr && preview.scale_log2 && asked_scale_log2_ == preview.scale_log2;
}

bool App::settled() const {
  if (follower) return follower->polls() > 0 && follower->caught_up() && store.size() == snapshots.size();
  if (demo_stage_ >= 0 && demo_stage_ < 2) return false;
  if (counterfactual_pending()) return false;  // the preview the picture shows is the engine's
  if (advice_from_samples() && shadow_samples_.empty()) return false;  // the advice waits for its first shadow
  if (session && training_status.state == TrainingStatus::State::running)  // settled only when told where: it grows on
    return settle_at_step_ > 0 && training_status.step >= settle_at_step_ && !snapshots.empty();
  return store.size() == snapshots.size();
}

const Snapshot* App::current_snapshot() const {
  if (snapshots.empty()) return nullptr;
  return snapshots[static_cast<std::size_t>(current_index())].get();
}

std::string App::open_culprit(const StepRecord& step) {
  if (!step.culprit || snapshots.empty()) return "no culprit recorded for this step";
  const Culprit& c = *step.culprit;
  const auto at = std::lower_bound(snapshots.begin(), snapshots.end(), step.step,
                                   [](const std::shared_ptr<const Snapshot>& s, std::int64_t k) { return s->step < k; });
  std::string missing;
  std::size_t index = static_cast<std::size_t>(at - snapshots.begin());
  if (at == snapshots.end() || (*at)->step != step.step) {
    missing = fmt::format("step {} has no histograms in this log (recorded between its snapshots); the nearest recorded step is shown", step.step);
    if (index == snapshots.size() || (index > 0 && step.step - snapshots[index - 1]->step < snapshots[index]->step - step.step)) --index;
  }
  const auto name = std::find(tensor_names.begin(), tensor_names.end(), c.name);
  if (name != tensor_names.end()) tensor_index = static_cast<int>(name - tensor_names.begin());
  else missing = fmt::format("no recorded tensor is named {}", c.name);
  kind = c.kind;
  step_index = static_cast<int>(index);
  show_view(View::histogram);
  return missing;
}

std::int64_t App::current_index() const {
  if (snapshots.empty()) return -1;
  return step_index < 0 ? static_cast<std::int64_t>(snapshots.size()) - 1 : step_index;
}

const TensorRecord* App::selected_record(const Snapshot& snapshot) const {
  if (tensor_names.empty()) return nullptr;
  const std::string& name = tensor_names[static_cast<std::size_t>(tensor_index)];
  for (const TensorRecord& t : snapshot.tensors)
    if (t.name == name && t.kind == kind) return &t;
  return nullptr;
}

const std::vector<TensorSeries>& App::window_series() {
  const std::int64_t end = current_index();
  const int window = std::max(1, what_if.window);
  const auto key = std::make_tuple(data_version, end, window);
  if (key != window_series_key_) {
    window_series_.clear();
    if (end >= 0) {
      std::vector<const Snapshot*> recent;  // the store's, not copies (a GPT's snapshot is 0.3 MiB)
      for (std::int64_t i = std::max<std::int64_t>(0, end - window + 1); i <= end; ++i) recent.push_back(&*snapshots[static_cast<std::size_t>(i)]);
      window_series_ = tensor_series(std::span<const Snapshot* const>(recent));
    }
    window_gradients_.clear();
    for (const TensorSeries& series : window_series_)
      if (is_gradient(series.kind)) window_gradients_.push_back(series);
    window_series_key_ = key;
  }
  return window_series_;
}

int App::recorded_scale_log2() const {
  const Snapshot* s = current_snapshot();
  return s == nullptr ? 0 : scale_log2_of(s->loss_scale).log2;
}

void App::selection_controls() {
  // As wide as the longest name, within limits; a name still too long shows its end (the layer),
  // whole in the list and in a tooltip.
  float longest = 0;
  for (const std::string& name : tensor_names) longest = std::max(longest, ImGui::CalcTextSize(name.c_str()).x);
  const float padding = ImGui::GetStyle().FramePadding.x * 2 + ImGui::GetFrameHeight();
  const float combo_width = std::clamp(longest + padding, px(110), px(330));
  ImGui::SetNextItemWidth(combo_width);
  const std::string tensor_label =
      tensor_names.empty() ? "(none)" : left_abbreviated(tensor_names[static_cast<std::size_t>(tensor_index)], combo_width - padding);
  ImGui::SetNextWindowSizeConstraints(ImVec2(longest + padding, 0), ImVec2(FLT_MAX, FLT_MAX));
  if (ImGui::BeginCombo("layer", tensor_label.c_str())) {
    for (int i = 0; i < static_cast<int>(tensor_names.size()); ++i)
      if (ImGui::Selectable(tensor_names[static_cast<std::size_t>(i)].c_str(), i == tensor_index)) tensor_index = i;
    ImGui::EndCombo();
  }
  if (!tensor_names.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tensor_names[static_cast<std::size_t>(tensor_index)].c_str());
  same_line_if_room(labelled_width(px(170), "tensor"));
  ImGui::SetNextItemWidth(px(170));
  static constexpr TensorKind kinds[] = {TensorKind::activation, TensorKind::activation_gradient, TensorKind::weight,
                                         TensorKind::weight_gradient};
  if (ImGui::BeginCombo("tensor", std::string(tensor_kind_name(kind)).c_str())) {
    for (TensorKind k : kinds)
      if (ImGui::Selectable(std::string(tensor_kind_name(k)).c_str(), k == kind)) kind = k;
    ImGui::EndCombo();
  }
  same_line_if_room(labelled_width(px(120), "format"));
  ImGui::SetNextItemWidth(px(120));
  if (ImGui::BeginCombo("format", target_format_names[format_index])) {
    for (int i = 0; i < target_format_count; ++i)
      if (ImGui::Selectable(target_format_names[i], i == format_index)) {
        format_index = i;
        format_chosen = true;
      }
    ImGui::EndCombo();
  }
  if (!snapshots.empty()) {
    // The step's controls on this line where they fit with a slider of some length, else on the
    // next, so that a narrow window keeps them (the slider above all) in reach.
    same_line_if_room(checkbox_width("latest") + checkbox_width("pin") + 3 * ImGui::GetStyle().ItemSpacing.x + px(160));
    bool follow_latest = step_index < 0;
    if (ImGui::Checkbox("latest", &follow_latest)) step_index = follow_latest ? -1 : static_cast<int>(snapshots.size()) - 1;
    ImGui::SameLine();
    int index = static_cast<int>(current_index());
    const std::int64_t shown_step = snapshots[static_cast<std::size_t>(index)]->step;
    bool pinned = store.pinned(shown_step);
    if (ImGui::Checkbox("pin", &pinned)) pinned ? store.pin(shown_step) : store.unpin(shown_step);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Keep this step exactly as recorded. Long runs thin their old snapshots to stay within %zu MiB\n"
                        "(every other one, again and again; the newest and the pinned stay): %llu thinned so far.",
                        snapshot_memory_budget >> 20, static_cast<unsigned long long>(store.thinned_snapshots()));
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-1);
    const std::string label = fmt::format("step {}", snapshots[static_cast<std::size_t>(index)]->step);
    if (ImGui::SliderInt("##step", &index, 0, static_cast<int>(snapshots.size()) - 1, label.c_str())) step_index = index;
  }
}

float panel_width_now(float dragged, float room) {
  const float wanted = dragged > 0 ? px(dragged) : std::min(px(330), 0.45f * room);
  const float widest = 0.6f * room;
  return std::clamp(wanted, std::min(px(180), widest), widest);
}

void App::draw() {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  // No background: the frame is cleared to the colour it would have made (main.cpp).
  ImGui::Begin("fpscope", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoBackground);
  const float room = ImGui::GetContentRegionAvail().x;
  panel_width_shown = panel_width_now(panel_width_dragged, room);
  ImGui::BeginChild("training", ImVec2(panel_width_shown, 0), true);
  draw_training(*this);
  ImGui::EndChild();
  // The panel's right edge: a drag moves it, a double-click puts it back.
  ImGui::SameLine(0, 0);
  const float edge_width = ImGui::GetStyle().ItemSpacing.x;
  ImGui::InvisibleButton("##panel edge", ImVec2(edge_width, std::max(1.0f, ImGui::GetContentRegionAvail().y)));
  if (ImGui::IsItemHovered() || ImGui::IsItemActive()) {
    ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeEW);
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    ImGui::GetWindowDrawList()->AddLine(ImVec2((a.x + b.x) / 2, a.y), ImVec2((a.x + b.x) / 2, b.y), to_imgui(palette::axis_line), px(2));
  }
  if (ImGui::IsItemActive() && ImGui::GetIO().MouseDelta.x != 0)
    panel_width_dragged = (panel_width_shown + ImGui::GetIO().MouseDelta.x) / px(1);
  if (ImGui::IsItemHovered() && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) panel_width_dragged = 0;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Drag to widen or narrow the panel; double-click for its default width.");
  ImGui::SameLine(0, 0);
  ImGui::BeginChild("views", ImVec2(0, 0), false);
  if (ImGui::BeginTabBar("view tabs")) {
    struct Tab {
      View view;
      const char* label;
      void (*draw)(App&);
    };
    static constexpr Tab tabs[] = {{View::histogram, "Histogram", draw_histogram},  {View::heatmap, "Heatmap", draw_heatmap},
                                   {View::curves, "Curves", draw_curves},            {View::what_if, "What-if", draw_what_if},
                                   {View::blocks, "Blocks", draw_blocks},
                                   {View::inspector, "Float inspector", draw_float_inspector},
                                   {View::export_files, "Export", draw_export}};
    // The Training view is the panel on the left; `--view training` shows it beside the histogram.
    const View shown = view == View::training ? View::histogram : view;
    // Taken before the tabs draw: a view may ask for another tab (show_view) while it draws, for
    // the next frame.
    const bool requested = requested_tab_;
    requested_tab_ = false;
    for (const Tab& tab : tabs) {
      const bool select_now = requested && tab.view == shown;
      if (ImGui::BeginTabItem(tab.label, nullptr, select_now ? ImGuiTabItemFlags_SetSelected : 0)) {
        if (!requested && !requested_tab_ && view != View::training) view = tab.view;
        tab.draw(*this);
        ImGui::EndTabItem();
      }
    }
    if (ImGui::TabItemButton("PNG", ImGuiTabItemFlags_Trailing | ImGuiTabItemFlags_NoTooltip)) pending_window_png = view_png_path(*this);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Save the window as it shows this view: %s", view_png_path(*this).c_str());
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::End();
  if (now < export_message_until && !export_message.empty()) {  // what the PNG button did, over any view
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x - px(12), viewport->WorkPos.y + viewport->WorkSize.y - px(12)),
                            ImGuiCond_Always, ImVec2(1, 1));
    ImGui::Begin("##export message", nullptr,
                 ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoInputs | ImGuiWindowFlags_NoSavedSettings);
    ImGui::TextUnformatted(export_message.c_str());
    ImGui::End();
  }
}

const TensorRecord* App::shown_record(const char* no_run, const Snapshot*& snapshot) {
  selection_controls();
  snapshot = current_snapshot();
  if (snapshot == nullptr) {
    const bool waiting = session && (training_status.state == TrainingStatus::State::paused || training_status.state == TrainingStatus::State::running);
    ImGui::TextDisabled("%s", follower  ? "Nothing recorded in the log yet: waiting for its first snapshot."
                              : waiting ? "Nothing recorded yet: the run waits at its first step (Resume or Step on the left)."
                                        : no_run);
    return nullptr;
  }
  const TensorRecord* record = selected_record(*snapshot);
  if (record == nullptr)
    ImGui::TextDisabled("Step %lld recorded no %s for this layer.", static_cast<long long>(snapshot->step),
                        std::string(tensor_kind_name(kind)).c_str());
  return record;
}

int target_format_index(std::string_view name) {
  try {
    const Format f = parse_format(name);  // any of its names: fp16, half, torch.float8_e4m3fn, ...
    for (int i = 0; i < target_format_count; ++i)
      if (f == target_formats[i]) return i;
  } catch (const UnknownNameError&) {
  }
  return -1;
}

}  // namespace fpscope::gui
