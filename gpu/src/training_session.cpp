// The training thread: steps, drains the command queue between steps, publishes Snapshots.
#include "fpscope/gpu/training_session.hpp"

#include "fpscope/gpu/backend_choice.hpp"

#include <algorithm>
#include <chrono>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/gpt.hpp"

namespace fpscope {

std::string_view training_state_name(TrainingStatus::State state) {
  switch (state) {
    case TrainingStatus::State::idle: return "idle";
    case TrainingStatus::State::running: return "running";
    case TrainingStatus::State::paused: return "paused";
    case TrainingStatus::State::finished: return "finished";
    case TrainingStatus::State::failed: return "failed";
  }
  return "?";
}

TrainingSession::TrainingSession(RunStore& store) : store_(store) {}

TrainingSession::~TrainingSession() { stop(); }

void TrainingSession::start(const TrainingSettings& settings) {
  stop();
  // Built here so that bad settings throw on the caller's thread, before anything changes.
  TrainingData data(settings.data, settings.mlp);
  std::unique_ptr<TrainerBackend> trainer = make_trainer_backend(settings.backend, settings.mlp);
  if (settings.batch < 1 || settings.record_every < 1 || settings.steps < 0)
    throw std::invalid_argument("batch and record-every must be positive, steps not negative");
  settings_ = settings;
  RunHeader header;
  header.source = settings.source;
  header.run_id = new_run_id();
  header.model = model_name(settings.mlp);
  header.precision = precision_name(settings.mlp.precision);
  header.format = format_name(trainer->format());
  header.rounding = rounding_mode_name(settings.mlp.rounding);
  header.scaler = describe(settings.mlp.scaler);
  header.optimizer = describe(settings.mlp.optimizer);
  if (settings.mlp.recipe.recipe != GemmRecipe::none) header.recipe = recipe_description(settings.mlp.recipe);
  header.products = products_description(trainer->name());
  store_.clear();
  store_.set_header(header);
  {
    std::lock_guard lock(mutex_);
    queue_.clear();
    quit_ = false;
    status_ = TrainingStatus{};
    status_.state = settings.start_paused ? TrainingStatus::State::paused : TrainingStatus::State::running;
    status_.loss_scale = trainer->scaler_state().scale;
    status_.backend = std::string(trainer->name());
    status_.dynamic_scaling = settings.mlp.scaler.kind == LossScalerConfig::Kind::dynamic;
  }
  thread_ = std::thread([this, trainer = std::move(trainer), data = std::move(data)]() mutable {
    run(std::move(trainer), std::move(data));
  });
}

void TrainingSession::stop() {
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (status_.state == TrainingStatus::State::running || status_.state == TrainingStatus::State::paused)
    status_.state = TrainingStatus::State::finished;
  status_.steps_per_second = 0;
}

void TrainingSession::reset() {
  stop();
  {
    std::lock_guard lock(mutex_);
    status_ = TrainingStatus{};
  }
  store_.clear();
}

void TrainingSession::post(Command command, double value, FaultInjection fault) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({command, value, fault});
  }
  wake_.notify_all();
}

void TrainingSession::pause() { post(Command::pause); }
void TrainingSession::resume() { post(Command::resume); }
void TrainingSession::single_step() { post(Command::single_step); }
void TrainingSession::set_static_scale(double scale) { post(Command::set_static, scale); }
void TrainingSession::set_dynamic_scaling() { post(Command::set_dynamic); }

void TrainingSession::inject_next_step(FaultInjection::Value value, int layer) {
  post(Command::inject, 0, FaultInjection{value, layer, 0, {}});
}

void TrainingSession::inject_next_step(FaultInjection::Value value, const std::string& weight) {
  post(Command::inject, 0, FaultInjection{value, 0, 0, weight});
}

TrainingStatus TrainingSession::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void TrainingSession::run(std::unique_ptr<TrainerBackend> backend, TrainingData data) {
  TrainerBackend& trainer = *backend;
  using Clock = std::chrono::steady_clock;
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  auto window_start = Clock::now();
  std::int64_t window_steps = 0;
  const std::int64_t limit = settings_.steps;
  const int record_every = settings_.record_every;
  const int batch = settings_.batch;
  const std::vector<std::string> gpt_weights = settings_.mlp.gpt ? gpt_recorded_weights(*settings_.mlp.gpt) : std::vector<std::string>{};
  const LossScalerConfig dynamic_config =
      settings_.mlp.scaler.kind == LossScalerConfig::Kind::dynamic ? settings_.mlp.scaler : LossScalerConfig::pytorch();
  try {
    for (;;) {
      bool take_step = false;
      {
        std::unique_lock lock(mutex_);
        for (;;) {
          // One command at a time up to a single step, so that "step, set scale, step" keeps its order.
          while (!queue_.empty() && !take_step) {
            const QueuedCommand c = queue_.front();
            queue_.pop_front();
            switch (c.command) {
              case Command::pause:
                if (status_.state == TrainingStatus::State::running) status_.state = TrainingStatus::State::paused;
                break;
              case Command::resume:
                if (status_.state == TrainingStatus::State::paused) status_.state = TrainingStatus::State::running;
                window_start = Clock::now();
                window_steps = 0;
                break;
              case Command::single_step:
                if (status_.state == TrainingStatus::State::paused) take_step = true;
                break;
              case Command::set_static:
                if (c.value > 0) trainer.reconfigure_scaler(LossScalerConfig::fixed(c.value));
                status_.dynamic_scaling = false;
                status_.loss_scale = trainer.scaler_state().scale;
                break;
              case Command::inject: {
                const bool mlp_layer = !settings_.mlp.gpt && c.fault.tensor.empty() && c.fault.layer >= 1 &&
                                       static_cast<std::size_t>(c.fault.layer) < settings_.mlp.layer_sizes.size();
                const bool gpt_weight = settings_.mlp.gpt && !c.fault.tensor.empty() &&
                                        std::any_of(gpt_weights.begin(), gpt_weights.end(), [&](const std::string& w) { return w == c.fault.tensor; });
                if (mlp_layer || gpt_weight) {
                  FaultInjection fault = c.fault;
                  fault.step = trainer.step_count();
                  trainer.inject(fault);
                }
                break;
              }
              case Command::set_dynamic:
                trainer.reconfigure_scaler(dynamic_config);
                status_.dynamic_scaling = true;
                status_.loss_scale = trainer.scaler_state().scale;
                break;
            }
          }
          if (quit_) return;
          if (limit > 0 && status_.step >= limit) {
            status_.state = TrainingStatus::State::finished;  // steps_per_second keeps the last rate
            return;
          }
          if (take_step || status_.state == TrainingStatus::State::running) break;
          status_.steps_per_second = 0;
          wake_.wait(lock, [this] { return quit_ || !queue_.empty(); });
        }
      }
      const auto step_start = Clock::now();
      data.next_batch(batch, inputs, labels);
      const std::int64_t step = trainer.step_count();
      StepResult result = trainer.step(inputs, labels, step % record_every == 0, true);  // every step's loss: the curves
      if (result.snapshot) store_.append(std::move(*result.snapshot));
      else store_.append_step({step, result.loss, result.loss_scale, result.skipped, result.scaling});
      ++window_steps;
      const auto now = Clock::now();
      const double seconds = std::chrono::duration<double>(now - window_start).count();
      std::lock_guard lock(mutex_);
      status_.step = trainer.step_count();
      if (settings_.pause_at_step > 0 && status_.step == settings_.pause_at_step && status_.state == TrainingStatus::State::running)
        status_.state = TrainingStatus::State::paused;
      status_.running_seconds += std::chrono::duration<double>(now - step_start).count();
      status_.loss = result.loss;
      const LossScalerState scaler = trainer.scaler_state();
      status_.loss_scale = scaler.scale;
      status_.skipped_steps = scaler.skipped_steps;
      if (seconds >= 0.5) {
        status_.steps_per_second = static_cast<double>(window_steps) / seconds;
        window_start = now;
        window_steps = 0;
      } else if (status_.steps_per_second == 0 && seconds > 0) {
        status_.steps_per_second = static_cast<double>(window_steps) / seconds;
      }
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    status_.state = TrainingStatus::State::failed;
    status_.error = e.what();
  }
}

}  // namespace fpscope
