// TrainingSession: the one loop that trains. A trainer (CPU or CUDA backend) on its own thread,
// steered through a command queue drained between steps, writing its records to a RunSink: the
// app's RunStore, or fpscope train's run log. Both front ends drive one; neither waits on a step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <optional>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_settings.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "fpscope/snapshot/run_sink.hpp"

namespace fpscope {

// A run ready to start: its settings checked, its model and data built, its header made (with a
// new run id); nothing trained or written yet. A front end may restore a checkpoint into the
// trainer and the data, and take the header's run id from it, before starting it.
struct PreparedRun {
  TrainingSettings settings;
  std::unique_ptr<TrainerBackend> trainer;
  std::unique_ptr<TrainerBackend> shadow;  // settings.shadow: the same model in float32, on the same backend
  std::optional<TrainingData> data;
  RunHeader header;
};
// Builds the model and opens the data. Throws std::invalid_argument (an unknown backend, --backend
// cuda where no device answers, data that does not fit the model) or IdxError (unreadable data).
// Sets the engine's threads (settings.threads).
PreparedRun prepare_training(const TrainingSettings& settings);

// Called first in the main of a program that trains through a TrainingSession, before any thread
// allocates: every thread then allocates from glibc's main arena. A step allocates its buffers
// (tens of MB for a GPT) and frees them as it ends; in a thread's own arena a heap that empties is
// unmapped at once, so each step on the training thread would fault all of them in again (6,300
// fresh pages a step for the 4 x 256 GPT at batch 16), work a step on the main thread never does.
// The main arena keeps freed memory mapped up to its trim threshold. Does nothing off glibc.
void keep_step_memory_mapped();

// Checkpoints the session writes as it trains: after every `every` steps, once the sink has made
// what it holds durable (a checkpoint never covers bytes a power cut could take back).
struct CheckpointPlan {
  OutputTarget target;
  std::int64_t every = 0;
  std::string settings;  // checkpoint_settings_text: what a resume must agree with
};

// What a front end adds to a run: checkpoints, and a look at each batch before it is trained on
// (fpscope train --export-inputs). Both run on the training thread; what they throw fails the run.
struct RunExtras {
  std::optional<CheckpointPlan> checkpoints;
  std::function<void(std::int64_t step, const Eigen::MatrixXf& inputs, const std::vector<int>& labels)> on_batch;
};

// The next step again at another loss scale, applying nothing: `trainer` steps on (inputs,
// labels) -- the batch its next step would take -- recording every tensor, with static scaling at
// `loss_scale`, and is then put back as it was: weights, optimizer states, the scaler (its state,
// and `running_scaler` as its rule), the stochastic-rounding counter, FP8 histories and the step
// count. The result is bit for bit the step that Apply at `loss_scale` (reconfigure_scaler to a
// static scale, then step) would give. Both backends: it needs only state() and restore().
StepResult counterfactual_step(TrainerBackend& trainer, const LossScalerConfig& running_scaler, const Eigen::MatrixXf& inputs,
                               const std::vector<int>& labels, double loss_scale);

// A step that skipped, run again recording every tensor: `before` is the trainer's position() taken
// before it, (inputs, labels) its batch. A skipped step leaves the weights and optimizer buffers
// as it found them, so `before` with them is the state it began from; the step is re-run from
// there as counterfactual_step runs one (at its own loss scale), and the trainer is then put back
// as it is now. Bit for bit the step as a recorded step (held by a test).
StepResult replay_skipped_step(TrainerBackend& trainer, const LossScalerConfig& running_scaler, const TrainerState& before, const Eigen::MatrixXf& inputs,
                               const std::vector<int>& labels);

// Of a step that skipped or lost its loss: its culprit (culprit.hpp) from the step's sentinel
// readings in the trainer's format, counted in `snapshot` where the step has one; none where no
// tensor the sentinel reads held a fault.
std::optional<Culprit> step_culprit(const StepResult& result, Format format, const Snapshot* snapshot);

// The fp32 shadow of `trainer`'s next step (TrainingSettings::shadow): `shadow`, a float32 trainer
// of the same model, takes `trainer`'s weights and steps once on (inputs, labels) at `loss_scale`,
// recording; its tensors come back named "<name> (fp32 shadow)". `trainer` is not touched.
std::vector<TensorRecord> shadow_records(TrainerBackend& shadow, const TrainerBackend& trainer, const Eigen::MatrixXf& inputs,
                                         const std::vector<int>& labels, double loss_scale);
// The config of a run's shadow: the same model and optimizer, float32, no recipe, nothing blocked.
TrainingConfig shadow_config(const TrainingConfig& config);

// A counterfactual step the session ran (request_counterfactual): what the run's next step would
// record at `loss_scale`.
struct CounterfactualResult {
  std::uint64_t answer = 0;   // counts the answers: 1, 2, ...
  double loss_scale = 1;      // the scale asked for
  std::int64_t step = 0;      // the step it re-ran: the next one the run takes
  StepResult result;          // loss, skip and the snapshot of every tensor at that scale
};

// The fp32 shadow of a run's next step, sampled on request (request_shadow_sample): the values its
// gradients take where nothing flushes or overflows, which loss-scale advice reads.
struct ShadowSample {
  std::uint64_t answer = 0;           // counts the answers: 1, 2, ...
  std::int64_t step = 0;              // the step it shadowed: the next one the run takes
  std::vector<TensorRecord> records;  // "<name> (fp32 shadow)", at the run's loss scale then
};

// What the app shows about the session; copied out under the lock.
struct TrainingStatus {
  enum class State : std::uint8_t { idle, running, paused, finished, failed };
  State state = State::idle;
  std::int64_t step = 0;          // steps done
  double loss = 0;                // of the last step
  double loss_scale = 1;          // the scaler's scale now
  bool dynamic_scaling = false;
  std::int64_t skipped_steps = 0;
  double steps_per_second = 0;    // over the last second or so of running
  double running_seconds = 0;     // time spent stepping (paused time not counted)
  std::string error;              // when failed
  std::string backend;            // the backend training: "cpu" or "cuda"
};

std::string_view training_state_name(TrainingStatus::State state);

class TrainingSession {
 public:
  explicit TrainingSession(RunSink& sink);
  ~TrainingSession();  // stops the thread
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Stops the running session, if any; begins the sink with the run's header and starts stepping.
  // Throws (on the caller's thread, before anything trains) what prepare_training and the sink's
  // begin() throw.
  void start(const TrainingSettings& settings);
  void start(PreparedRun run, RunExtras extras = {});
  void stop();   // ends the run after the step in progress (state: finished); the sink keeps what was recorded
  void reset();  // ends the run and forgets it: state idle, the sink's memory cleared
  // Waits until the run has ended (finished, or failed) or `timeout` passed; true when it ended.
  bool wait_for_end(std::chrono::milliseconds timeout) const;
  // A run that failed: its exception again, for a front end that reports it as it was thrown.
  // Does nothing for a run that did not fail.
  void rethrow_failure() const;

  // Commands, drained by the training thread between steps.
  void pause();
  void resume();
  void single_step();  // one step while paused
  void set_static_scale(double scale);  // from the slider: static scaling at this scale, now
  void set_dynamic_scaling();           // GradScaler's rule from the current settings' config
  // A non-finite value into layer `layer`'s weight gradient at the next step (fault injection);
  // a GPT's weight by its recorded name (gpt_parameters' `recorded`: "h0.attn.qkv"). Neither
  // touches a run of the other model, nor one whose model has no such layer or weight.
  void inject_next_step(FaultInjection::Value value, int layer);
  void inject_next_step(FaultInjection::Value value, const std::string& weight);
  // The next step at `loss_scale`, applying nothing (counterfactual_step), run between steps of a
  // running, paused or finished session; its answer replaces the last (counterfactual()). A request
  // replaces one not yet taken up: while a person drags, only the latest scale is computed.
  void request_counterfactual(double loss_scale);
  // The latest answer, shared (a reader copies a pointer, not the snapshot); null before the
  // first, and after start() or reset().
  std::shared_ptr<const CounterfactualResult> counterfactual() const;
  // The fp32 shadow of the next step (shadow_records), run between steps as a counterfactual is,
  // applying nothing, whether or not the run records shadows of its own; its answer replaces the
  // last (shadow_sample()), a request replaces one not yet taken up.
  void request_shadow_sample();
  std::shared_ptr<const ShadowSample> shadow_sample() const;

  TrainingStatus status() const;
  const TrainingSettings& settings() const { return settings_; }

 private:
  enum class Command : std::uint8_t { pause, resume, single_step, set_static, set_dynamic, inject, counterfactual, shadow_sample };
  struct QueuedCommand {
    Command command;
    double value = 0;
    FaultInjection fault{};
  };
  void post(Command command, double value = 0, FaultInjection fault = {});
  void run(std::unique_ptr<TrainerBackend> trainer, std::unique_ptr<TrainerBackend> shadow, TrainingData data, RunHeader header,
           RunExtras extras);

  RunSink& sink_;
  TrainingSettings settings_;
  std::thread thread_;
  mutable std::mutex mutex_;  // guards queue_, status_, quit_
  std::condition_variable wake_;
  mutable std::condition_variable ended_;  // the run ended: finished or failed
  std::exception_ptr failure_;
  std::shared_ptr<const CounterfactualResult> counterfactual_;
  std::shared_ptr<const ShadowSample> shadow_sample_;
  std::deque<QueuedCommand> queue_;
  TrainingStatus status_;
  bool quit_ = false;
};

}  // namespace fpscope
