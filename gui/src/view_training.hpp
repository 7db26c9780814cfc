// The Training view: the run's controls and status, the loss-scale slider, injection, and the form of
// the run's settings (fpscope train's options) with its state.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/gpu/training_settings.hpp"
#include "scale_slider.hpp"

namespace fpscope::gui {

class App;

// The Training view's form: the options of `fpscope train`.
// Its defaults are fpscope train's (training_defaults.hpp), but for the length.
struct TrainingForm {
  std::string model = training_defaults::model;
  Activation activation = training_defaults::activation;
  Precision precision = training_defaults::precision;
  RoundingMode rounding = training_defaults::rounding;
  // Unscaled on opening: Start shows fp16 flushing the gradients; the slider then shows the rescue.
  LossScalerConfig::Kind scaling = parse_loss_scale(training_defaults::loss_scale).kind;
  int static_scale_log2 = 10;  // for Kind::fixed
  int batch = training_defaults::batch;
  float learning_rate = training_defaults::learning_rate;
  int loss_weight_log2 = training_defaults::loss_weight_log2;
  int record_every = training_defaults::record_every;
  int steps = 0;  // 0: until stopped
  std::string data = training_defaults::data;
  std::string backend = "auto";  // cpu, cuda, or auto: cuda where a device answers
  std::string record_blocks;     // "" or a block format (FORMAT[:RULE]) whose statistics each recorded tensor carries
  OptimizerConfig optimizer;     // SGD by default; backend auto trains momentum and AdamW on the CPU
  // FP8 or block-scaled GEMM operands and their options (fpscope train's --recipe, --fp8-format,
  // --amax-history, --fp8-margin, --weight-blocks, --hadamard, --gradient-round); an option of
  // another recipe than the chosen one is left out at Start.
  RecipeConfig recipe;
  int seed = training_defaults::seed;
  int pause_at_step = 0;  // > 0: the run pauses itself there (--pause-at-step; not in the form)
  std::vector<FaultInjection> faults;  // --inject: applied at Start (not in the form)
  bool shadow = false;  // recorded steps also in float32 without casts: "<name> (fp32 shadow)"
};

// The form as the options fpscope train would be given for it: what Start hands to the one
// parser (parse_training_options), so the app's run is checked as the command's is.
TrainingOptions training_options(const TrainingForm& form);
// The form holding `settings`, as read from `options`; throws std::invalid_argument where a setting
// does not fit the form (a static loss scale or a loss weight its power-of-two sliders cannot hold).
TrainingForm training_form(const TrainingSettings& settings, const TrainingOptions& options);

// After the form's model changed between an MLP and a GPT: the batch, learning rate, loss weight
// and optimizer that still hold the other kind's defaults take this kind's (training_defaults::gpt);
// what the user set stays.
void follow_model_kind(TrainingForm& form, bool was_gpt);

// Fault injection from the Training view.
struct InjectState {
  FaultInjection::Value value = FaultInjection::Value::nan;
  int layer = 1;       // 1-based: fc1, fc2, ...
  int gpt_weight = 0;  // a GPT's: an index into gpt_recorded_weights
};

void draw_training(App& app);

}  // namespace fpscope::gui
