// TrainingSettings: what a training run is, read and checked in one place from the option text
// that both front ends take (fpscope train and fpscope-gui name their options alike), with one
// set of defaults (training_defaults.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/snapshot/run_header.hpp"

namespace fpscope {

// Every run the training driver writes says this in its header's `source`, whichever front end
// started it: the same settings give the same log.
inline constexpr const char* training_source = "fpscope train";

// A run longer than this is a typo, not a plan (10^12 steps at 10^6 steps/s is 11 days).
inline constexpr std::int64_t max_training_steps = 1'000'000'000'000;

struct TrainingSettings {
  TrainingConfig config;            // the model (an MLP, or a GPT where config.gpt is set) and how it trains
  std::string data = "synthetic";   // "synthetic", "mnist:DIR" (an MLP) or "text:FILE" (a GPT): training_data.hpp
  std::string backend = "auto";     // cpu, cuda, or auto (cuda where a device answers): backend_choice.hpp
  int batch = 128;
  std::int64_t record_every = 1;
  std::int64_t steps = 0;           // stop after this many steps; 0 runs until stopped
  int threads = 0;                  // the CPU backend's threads (set_gemm_threads); 0: all cores
  std::vector<FaultInjection> faults;  // non-finite values put into gradients at given steps
  bool start_paused = false;
  std::int64_t pause_at_step = 0;   // > 0: pause once this many steps are done (as the Pause button would)
  // On recorded steps, the same step in float32 without casts (the same weights and batch, its
  // backward scaled by the step's scale) recorded beside the run's tensors as "<name> (fp32
  // shadow)", captured before_cast: the values the gradients take when nothing flushes them.
  bool shadow = false;
};


// The options as a person typed them. Unset optional texts take the model's own defaults (an
// MLP's or a GPT's, training_defaults.hpp); a set one is read as given, so an empty value is an error.
struct TrainingOptions {
  std::string model;
  std::optional<std::string> activation;  // an MLP's; a GPT's blocks use GELU
  std::string precision;
  std::string round;
  std::string loss_scale;
  std::string steps;
  std::optional<std::string> batch, lr, loss_weight, optimizer;
  std::string record_every;
  std::string data;
  std::string backend = "auto";
  std::optional<std::string> record_blocks;  // FORMAT or FORMAT:RULE
  std::string recipe = "none";
  std::string threads = "0";
  std::optional<std::string> fp8_format, amax_history, fp8_margin, weight_blocks, gradient_round;
  bool hadamard = false;
  std::optional<std::string> momentum, weight_decay, betas, eps;
  std::string clip_grad_norm = "0";
  std::string seed;
  std::vector<std::string> inject;  // VALUE@LAYER:STEP each
  std::string pause_at_step = "0";
  bool shadow = false;
  // `steps` is the count a run stops at; `endless`: 0 is taken too, for a run that goes on until
  // stopped (the app's Stop; fpscope train has none).
  bool endless = false;

  TrainingOptions();  // the example's settings (training_defaults.hpp), 500 steps
};

// A setting that cannot be used: one sentence naming the option and what it takes.
class TrainingOptionError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Reads and checks every option (each against the others too: an option of one recipe given with
// another, an injection past the last step, a model too big for the memory there is). Throws
// TrainingOptionError. Neither the data nor the backend is opened here (prepare_training does).
TrainingSettings parse_training_options(const TrainingOptions& options);

// The option table both front ends register: the option's name as typed ("--lr"), its help, and
// where its text goes (one of the four members). `flag` options take no value.
struct TrainingOptionSpec {
  std::string name;
  std::string help;
  std::string TrainingOptions::* text = nullptr;
  std::optional<std::string> TrainingOptions::* optional_text = nullptr;
  std::vector<std::string> TrainingOptions::* repeated = nullptr;
  bool TrainingOptions::* flag = nullptr;
  bool shows_default = true;
  bool in_app = true;
  bool in_cli = true;  // fpscope train takes it (it has no Pause, so no --pause-at-step)
};
const std::vector<TrainingOptionSpec>& training_option_specs();

// The run log's header of a run of these settings on `trainer` (its format and products), without
// a run id.
RunHeader training_run_header(const TrainingSettings& settings, const TrainerBackend& trainer);

// What a checkpoint must agree with to be resumed, as text: everything that decides the bits. The
// header's settings come as `header_line`, the run log's header line of the run without its run id
// and products (run_header_line); then the backend's name, the batch, learning rate, data, seed,
// injections and the run log the checkpoint covers. The products' kernels are the caller's to add
// after it, so that a checkpoint from before runs named them can be told apart.
std::string checkpoint_settings_text(const TrainingSettings& settings, std::string_view header_line, std::string_view backend,
                                     std::string_view log_path);
// The parts of such a text: the run log it covers (its path as that run was given it; empty for a
// run without one), and the rest, which a resume must match exactly (the log is matched by
// identity, not spelling: same_run_log).
struct CheckpointSettingsParts {
  std::string log_path;
  std::string without_log;
};
CheckpointSettingsParts split_checkpoint_settings(std::string_view settings);
// Whether two runs' log paths name one log: the same file (device and inode) where both exist,
// the same path once made absolute where not, or both none.
bool same_run_log(const std::string& a, const std::string& b);

}  // namespace fpscope
