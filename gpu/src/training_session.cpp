// The training thread: steps, drains the command queue between steps, writes its records to the sink.
#include "fpscope/gpu/training_session.hpp"

#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/gemm.hpp"

#include <algorithm>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <bit>
#include <chrono>
#include <cmath>

#include "fpscope/core/convert.hpp"
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

void keep_step_memory_mapped() {
#ifdef __GLIBC__
  ::mallopt(M_ARENA_MAX, 1);
#endif
}

PreparedRun prepare_training(const TrainingSettings& settings) {
  if (settings.batch < 1 || settings.record_every < 1 || settings.steps < 0)
    throw std::invalid_argument("batch and record-every must be positive, steps not negative");
  PreparedRun run;
  run.settings = settings;
  try {
    run.data.emplace(settings.data, settings.config);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("--data: ") + e.what());
  }
  run.trainer = make_trainer_backend(settings.backend, settings.config);
  if (settings.shadow) run.shadow = make_trainer_backend(std::string(run.trainer->name()), shadow_config(settings.config));
  for (const FaultInjection& fault : settings.faults) run.trainer->inject(fault);
  run.header = training_run_header(settings, *run.trainer);
  run.header.run_id = new_run_id();
  set_gemm_threads(settings.threads);
  return run;
}

StepResult counterfactual_step(TrainerBackend& trainer, const LossScalerConfig& running_scaler, const Eigen::MatrixXf& inputs,
                               const std::vector<int>& labels, double loss_scale) {
  const TrainerState before = trainer.state();
  StepResult result;
  try {
    trainer.reconfigure_scaler(LossScalerConfig::fixed(loss_scale));
    result = trainer.step(inputs, labels, true, true);
  } catch (...) {
    trainer.reconfigure_scaler(running_scaler);
    trainer.restore(before);
    throw;
  }
  // The rule first: reconfiguring starts the scaler's state over, which restore() then sets.
  trainer.reconfigure_scaler(running_scaler);
  trainer.restore(before);
  return result;
}

StepResult replay_skipped_step(TrainerBackend& trainer, const LossScalerConfig& running_scaler, const TrainerState& before, const Eigen::MatrixXf& inputs,
                               const std::vector<int>& labels) {
  const TrainerState now = trainer.state();
  TrainerState start = now;
  start.steps = before.steps;
  start.scaler = before.scaler;
  start.stochastic_counter = before.stochastic_counter;
  start.fp8 = before.fp8;
  trainer.restore(start);
  StepResult result;
  try {
    result = counterfactual_step(trainer, running_scaler, inputs, labels, before.scaler.scale);
  } catch (...) {
    trainer.restore(now);
    throw;
  }
  trainer.restore(now);
  return result;
}

std::optional<Culprit> step_culprit(const StepResult& result, Format format, const Snapshot* snapshot) {
  std::optional<Culprit> culprit = find_culprit(result.sentinel, format_name(format), largest_finite_value(format));
  if (culprit && snapshot != nullptr) count_culprit(*culprit, *snapshot);
  return culprit;
}

TrainingConfig shadow_config(const TrainingConfig& config) {
  TrainingConfig shadow = config;
  shadow.precision = Precision::fp32;
  shadow.recipe = RecipeConfig{};
  shadow.record_blocks.reset();
  shadow.scaler = LossScalerConfig::none();
  return shadow;
}

std::vector<TensorRecord> shadow_records(TrainerBackend& shadow, const TrainerBackend& trainer, const Eigen::MatrixXf& inputs,
                                         const std::vector<int>& labels, double loss_scale) {
  TrainerState state = trainer.state();
  state.fp8.clear();  // the shadow runs no recipe
  shadow.restore(state);
  shadow.reconfigure_scaler(LossScalerConfig::fixed(loss_scale));
  StepResult result = shadow.step(inputs, labels, true, true);
  std::vector<TensorRecord> records = std::move(result.snapshot->tensors);
  for (TensorRecord& record : records) {
    record.name = shadow_tensor_name(record.name);
    record.cast.reset();  // float32 casts nothing
  }
  return records;
}

TrainingSession::TrainingSession(RunSink& sink) : sink_(sink) {}

TrainingSession::~TrainingSession() { stop(); }

void TrainingSession::start(const TrainingSettings& settings) {
  stop();
  start(prepare_training(settings));
}

void TrainingSession::start(PreparedRun prepared, RunExtras extras) {
  stop();
  settings_ = prepared.settings;
  sink_.begin(prepared.header);
  TrainerBackend& trainer = *prepared.trainer;
  {
    std::lock_guard lock(mutex_);
    queue_.clear();
    quit_ = false;
    failure_ = nullptr;
    counterfactual_.reset();
    shadow_sample_.reset();
    status_ = TrainingStatus{};
    status_.state = settings_.start_paused ? TrainingStatus::State::paused : TrainingStatus::State::running;
    status_.step = trainer.step_count();
    status_.loss_scale = trainer.scaler_state().scale;
    status_.skipped_steps = trainer.scaler_state().skipped_steps;
    status_.backend = std::string(trainer.name());
    status_.dynamic_scaling = settings_.config.scaler.kind == LossScalerConfig::Kind::dynamic;
  }
  thread_ = std::thread([this, trainer = std::move(prepared.trainer), shadow = std::move(prepared.shadow), data = std::move(*prepared.data),
                         header = std::move(prepared.header), extras = std::move(extras)]() mutable {
    run(std::move(trainer), std::move(shadow), std::move(data), std::move(header), std::move(extras));
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
  ended_.notify_all();
}

bool TrainingSession::wait_for_end(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return ended_.wait_for(lock, timeout, [this] {
    return status_.state == TrainingStatus::State::finished || status_.state == TrainingStatus::State::failed;
  });
}

void TrainingSession::rethrow_failure() const {
  std::exception_ptr failure;
  {
    std::lock_guard lock(mutex_);
    failure = failure_;
  }
  if (failure) std::rethrow_exception(failure);
}

void TrainingSession::reset() {
  stop();
  {
    std::lock_guard lock(mutex_);
    status_ = TrainingStatus{};
    counterfactual_.reset();
    shadow_sample_.reset();
  }
  sink_.forget();
}

void TrainingSession::post(Command command, double value, FaultInjection fault) {
  {
    std::lock_guard lock(mutex_);
    if (command == Command::counterfactual || command == Command::shadow_sample)  // only the latest request is answered
      std::erase_if(queue_, [command](const QueuedCommand& c) { return c.command == command; });
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

void TrainingSession::request_counterfactual(double loss_scale) {
  if (loss_scale > 0 && std::isfinite(loss_scale)) post(Command::counterfactual, loss_scale);
}

std::shared_ptr<const CounterfactualResult> TrainingSession::counterfactual() const {
  std::lock_guard lock(mutex_);
  return counterfactual_;
}

void TrainingSession::request_shadow_sample() { post(Command::shadow_sample); }

std::shared_ptr<const ShadowSample> TrainingSession::shadow_sample() const {
  std::lock_guard lock(mutex_);
  return shadow_sample_;
}

TrainingStatus TrainingSession::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void TrainingSession::run(std::unique_ptr<TrainerBackend> backend, std::unique_ptr<TrainerBackend> shadow, TrainingData data, RunHeader header,
                          RunExtras extras) {
  TrainerBackend& trainer = *backend;
  using Clock = std::chrono::steady_clock;
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  auto window_start = Clock::now();
  std::int64_t window_steps = 0;
  const std::int64_t limit = settings_.steps;
  const std::int64_t record_every = settings_.record_every;
  const int batch = settings_.batch;
  // A sink that keeps no steps (fpscope train without a log) records nothing, and a device backend
  // then reads a step's loss back only for the status, every tenth step and the last.
  const bool keeps_steps = sink_.keeps_steps();
  const std::vector<std::string> gpt_weights = settings_.config.gpt ? gpt_recorded_weights(*settings_.config.gpt) : std::vector<std::string>{};
  const LossScalerConfig dynamic_config =
      settings_.config.scaler.kind == LossScalerConfig::Kind::dynamic ? settings_.config.scaler : LossScalerConfig::pytorch();
  LossScalerConfig running_scaler = settings_.config.scaler;  // the rule the scaler follows now
  std::unique_ptr<TrainerBackend> sampler;  // request_shadow_sample's float32 trainer where the run has no shadow
  bool synced_at_end = false;
  try {
    for (;;) {
      bool take_step = false;
      std::optional<double> counterfactual_scale;
      bool sample_shadow = false;
      {
        std::unique_lock lock(mutex_);
        for (;;) {
          // One command at a time up to a single step or a counterfactual, so that "step, set scale,
          // step" keeps its order.
          while (!queue_.empty() && !take_step && !counterfactual_scale && !sample_shadow) {
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
                if (c.value > 0) {
                  running_scaler = LossScalerConfig::fixed(c.value);
                  trainer.reconfigure_scaler(running_scaler);
                }
                status_.dynamic_scaling = false;
                status_.loss_scale = trainer.scaler_state().scale;
                break;
              case Command::inject: {
                const bool mlp_layer = !settings_.config.gpt && c.fault.tensor.empty() && c.fault.layer >= 1 &&
                                       static_cast<std::size_t>(c.fault.layer) < settings_.config.layer_sizes.size();
                const bool gpt_weight = settings_.config.gpt && !c.fault.tensor.empty() &&
                                        std::any_of(gpt_weights.begin(), gpt_weights.end(), [&](const std::string& w) { return w == c.fault.tensor; });
                if (mlp_layer || gpt_weight) {
                  FaultInjection fault = c.fault;
                  fault.step = trainer.step_count();
                  trainer.inject(fault);
                }
                break;
              }
              case Command::set_dynamic:
                running_scaler = dynamic_config;
                trainer.reconfigure_scaler(running_scaler);
                status_.dynamic_scaling = true;
                status_.loss_scale = trainer.scaler_state().scale;
                break;
              case Command::counterfactual:
                counterfactual_scale = c.value;
                break;
              case Command::shadow_sample:
                sample_shadow = true;
                break;
            }
          }
          if (quit_) {
            lock.unlock();
            if (!synced_at_end) sink_.sync();  // the records durable before the run says it ended
            return;
          }
          if (counterfactual_scale || sample_shadow) break;
          if (limit > 0 && status_.step >= limit && status_.state != TrainingStatus::State::finished) {
            // Finished: the records made durable, then the thread stays to answer counterfactuals
            // until stopped. steps_per_second keeps the last rate.
            lock.unlock();
            sink_.sync();
            synced_at_end = true;
            lock.lock();
            status_.state = TrainingStatus::State::finished;
            ended_.notify_all();
          }
          if (status_.state != TrainingStatus::State::finished && (take_step || status_.state == TrainingStatus::State::running)) break;
          if (status_.state != TrainingStatus::State::finished) status_.steps_per_second = 0;
          wake_.wait(lock, [this] { return quit_ || !queue_.empty(); });
        }
      }
      if (counterfactual_scale || sample_shadow) {
        // The batch the next step will take, and the data put back to give it to that step.
        const std::string data_state = data.save_state();
        data.next_batch(batch, inputs, labels);
        data.restore_state(data_state);
      }
      if (sample_shadow) {
        // The run's own shadow where it records one; else one made for the samples alone, so
        // that the run's records stay as its settings say.
        if (!shadow && !sampler) sampler = make_trainer_backend(std::string(trainer.name()), shadow_config(settings_.config));
        ShadowSample answer;
        answer.step = trainer.step_count();
        answer.records = shadow_records(shadow ? *shadow : *sampler, trainer, inputs, labels, trainer.scaler_state().scale);
        std::lock_guard lock(mutex_);
        answer.answer = shadow_sample_ ? shadow_sample_->answer + 1 : 1;
        shadow_sample_ = std::make_shared<const ShadowSample>(std::move(answer));
        continue;
      }
      if (counterfactual_scale) {
        CounterfactualResult answer;
        answer.loss_scale = *counterfactual_scale;
        answer.step = trainer.step_count();
        answer.result = counterfactual_step(trainer, running_scaler, inputs, labels, *counterfactual_scale);
        std::lock_guard lock(mutex_);
        answer.answer = counterfactual_ ? counterfactual_->answer + 1 : 1;
        counterfactual_ = std::make_shared<const CounterfactualResult>(std::move(answer));
        continue;
      }
      const auto step_start = Clock::now();
      data.next_batch(batch, inputs, labels);
      const std::int64_t step = trainer.step_count();
      if (extras.on_batch) extras.on_batch(step, inputs, labels);
      const bool read_loss = keeps_steps || step % 10 == 0 || step + 1 == limit;
      const bool record = keeps_steps && step % record_every == 0;
      std::vector<TensorRecord> shadowed;
      if (record && shadow) shadowed = shadow_records(*shadow, trainer, inputs, labels, trainer.scaler_state().scale);
      // Where the sink keeps steps, a step that skips or loses its loss gets its culprit and, where
      // it was not due to be recorded, its histograms (replay_skipped_step).
      TrainerState before;
      BoxedOptional<Culprit> culprit;
      if (keeps_steps) before = trainer.position();
      StepResult result = trainer.step(inputs, labels, record, read_loss);
      if (result.snapshot)
        for (TensorRecord& t : shadowed) result.snapshot->tensors.push_back(std::move(t));
      if (keeps_steps && (result.skipped || !std::isfinite(result.loss))) {
        if (!result.snapshot && result.skipped) {
          StepResult replayed = replay_skipped_step(trainer, running_scaler, before, inputs, labels);
          // Taken only where it is the step itself, as it must be: the same loss, skip and readings.
          if (replayed.snapshot && replayed.sentinel == result.sentinel && replayed.skipped &&
              std::bit_cast<std::uint64_t>(replayed.loss) == std::bit_cast<std::uint64_t>(result.loss))
            result.snapshot = std::move(replayed.snapshot);
        }
        culprit = step_culprit(result, trainer.format(), result.snapshot ? &*result.snapshot : nullptr);
        if (result.snapshot) result.snapshot->culprit = culprit;
      }
      if (result.snapshot) sink_.append(std::move(*result.snapshot));
      else if (keeps_steps) sink_.append_step({step, result.loss, result.loss_scale, result.skipped, result.scaling, std::move(culprit)});
      if (extras.checkpoints && (step + 1) % extras.checkpoints->every == 0) {
        const RunLogPosition position = sink_.sync();
        write_checkpoint(extras.checkpoints->target,
                         {extras.checkpoints->settings, trainer.state(), data.save_state(), header.run_id, position.bytes, position.crc32});
      }
      ++window_steps;
      const auto now = Clock::now();
      const double seconds = std::chrono::duration<double>(now - window_start).count();
      std::lock_guard lock(mutex_);
      status_.step = trainer.step_count();
      if (settings_.pause_at_step > 0 && status_.step == settings_.pause_at_step && status_.state == TrainingStatus::State::running)
        status_.state = TrainingStatus::State::paused;
      status_.running_seconds += std::chrono::duration<double>(now - step_start).count();
      if (read_loss) status_.loss = result.loss;
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
    failure_ = std::current_exception();
    ended_.notify_all();
  }
}

}  // namespace fpscope
