// TrainingSession: a trainer (CPU or CUDA backend) on its own thread, steered through a command queue, publishing
// Snapshots into a RunStore. The app's Training view drives one; it never waits on a step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "fpscope/snapshot/run_store.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"

namespace fpscope {

struct TrainingSettings {
  MlpConfig mlp;
  std::string source = "fpscope";  // who trains, for the run's header (the app says "fpscope-gui")
  std::string data = "synthetic";  // or "mnist:DIR"
  std::string backend = "auto";    // cpu, cuda, or auto (cuda where a device answers): backend_choice.hpp
  int batch = 128;
  int record_every = 1;
  std::int64_t steps = 0;  // stop after this many steps; 0 runs until stopped
  bool start_paused = false;
  std::int64_t pause_at_step = 0;  // > 0: pause once this many steps are done (as the Pause button would)
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
  explicit TrainingSession(RunStore& store);
  ~TrainingSession();  // stops the thread
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Clears the store, writes the run's header, builds the model and data and starts stepping.
  // Throws std::invalid_argument / IdxError (on the caller's thread) for bad settings or data
  // (an unknown backend, or --backend cuda where no device answers, included);
  // the running session, if any, is stopped first.
  void start(const TrainingSettings& settings);
  void stop();   // ends the run (state: finished); the store keeps what was recorded
  void reset();  // ends the run and forgets it: state idle, the store cleared

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

  TrainingStatus status() const;
  const TrainingSettings& settings() const { return settings_; }

 private:
  enum class Command : std::uint8_t { pause, resume, single_step, set_static, set_dynamic, inject };
  struct QueuedCommand {
    Command command;
    double value = 0;
    FaultInjection fault{};
  };
  void post(Command command, double value = 0, FaultInjection fault = {});
  void run(std::unique_ptr<TrainerBackend> trainer, TrainingData data);

  RunStore& store_;
  TrainingSettings settings_;
  std::thread thread_;
  mutable std::mutex mutex_;  // guards queue_, status_, quit_
  std::condition_variable wake_;
  std::deque<QueuedCommand> queue_;
  TrainingStatus status_;
  bool quit_ = false;
};

}  // namespace fpscope
