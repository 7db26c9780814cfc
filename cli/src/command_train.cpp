// `fpscope train`: mixed-precision training of an MLP or a GPT on the CPU or CUDA backend, recording a run log.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/analyzer/npy.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "fpscope/gpu/training_settings.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "interrupt_watch.hpp"
#include "number_option.hpp"

namespace fpscope::cli {

namespace {

// The training options are the driver's (training_settings.hpp), read by its one parser; the
// outputs around the run are this command's.
struct TrainOptions {
  TrainingOptions training;
  std::optional<std::string> out;
  std::string checkpoint_every = "0";
  std::optional<std::string> checkpoint;
  std::optional<std::string> export_inputs;
  bool resume = false;
};

// The parameters as NumPy arrays in PyTorch's layouts (an MLP's fcN.weight out x in, fcN.bias; a
// GPT's gpt_parameters names and shapes, vectors one-dimensional), row-major as .npy wants.
void export_parameters(const std::filesystem::path& folder, const TrainingConfig& config, const TrainerState& state) {
  const auto write = [&](const std::string& name, const Eigen::MatrixXf& m, bool vector) {
    const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = m;
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(m.rows())};
    if (!vector) shape.push_back(static_cast<std::uint64_t>(m.cols()));
    const auto* bytes = reinterpret_cast<const unsigned char*>(row_major.data());
    write_output(folder / (name + ".npy"), npy_bytes("<f4", shape, {bytes, static_cast<std::size_t>(m.size()) * sizeof(float)}));
  };
  if (config.gpt) {
    const std::vector<GptParameter> layout = gpt_parameters(*config.gpt);
    for (std::size_t p = 0; p < layout.size(); ++p) write(layout[p].name, state.weights[p], layout[p].cols == 1);
    return;
  }
  for (std::size_t l = 0; l < state.weights.size(); ++l) {
    write(mlp_layer_name(l) + ".weight", state.weights[l], false);
    write(mlp_layer_name(l) + ".bias", state.biases[l], true);
  }
}

// A step's batch: an MLP's inputs as float32 and labels as int32; a GPT's token ids and targets as
// int32, batch x context each.
void export_batch(const std::filesystem::path& folder, std::int64_t step, const TrainingConfig& config, const Eigen::MatrixXf& inputs,
                  const std::vector<int>& labels) {
  const std::string suffix = fmt::format("-{:06}.npy", step);
  const std::vector<std::uint64_t> input_shape{static_cast<std::uint64_t>(inputs.rows()), static_cast<std::uint64_t>(inputs.cols())};
  const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = inputs;
  if (config.gpt) {
    const std::vector<std::int32_t> tokens(row_major.data(), row_major.data() + row_major.size());
    write_output(folder / ("inputs" + suffix),
                 npy_bytes("<i4", input_shape, {reinterpret_cast<const unsigned char*>(tokens.data()), tokens.size() * sizeof(std::int32_t)}));
  } else {
    write_output(folder / ("inputs" + suffix), npy_bytes("<f4", input_shape, {reinterpret_cast<const unsigned char*>(row_major.data()),
                                                                                static_cast<std::size_t>(row_major.size()) * sizeof(float)}));
  }
  const std::vector<std::int32_t> targets(labels.begin(), labels.end());
  std::vector<std::uint64_t> target_shape{static_cast<std::uint64_t>(labels.size())};
  if (config.gpt) target_shape = input_shape;
  write_output(folder / ("targets" + suffix),
               npy_bytes("<i4", target_shape, {reinterpret_cast<const unsigned char*>(targets.data()), targets.size() * sizeof(std::int32_t)}));
}

// After a SIGINT or a SIGTERM the step in progress finishes, the log is left whole, and train exits
// with the shell's status for that signal: 128 + its number (130, 143).
int interrupted_status(int signal_number) { return 128 + signal_number; }

// A second SIGINT or SIGTERM while the step in progress finishes (a step can take minutes, or be
// stuck in a library): the run ends now, that step abandoned. The log is kept as it is, whole up
// to the last line written (RunLogSink::keep_as_it_is), with the same status as the first signal
// gives, and without waiting for the training thread: the process exits from here.
[[noreturn]] void stop_at_once(RunLogSink* log_sink, std::int64_t first_step, std::int64_t steps, int signal_number, bool checkpoints,
                               bool after_progress) {
  const std::int64_t written = log_sink != nullptr ? log_sink->keep_as_it_is() : -1;
  const std::int64_t step = written >= 0 ? written + 1 : first_step;  // steps done, as the first signal's message counts them
  const std::string line =
      fmt::format("{}fpscope: {} again: stopped at once, the step in progress abandoned, after step {} of {}: the run log is whole up to it{}\n",
                  after_progress ? "\n" : "", signal_number == SIGTERM ? "terminated (SIGTERM)" : "interrupted", step, steps,
                  checkpoints ? "; --resume goes on from the last checkpoint" : "");
  std::fflush(stdout);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::_Exit(interrupted_status(signal_number));
}

// How often the waiting front end looks at the run: for a Ctrl-C, and for the progress line.
constexpr std::chrono::milliseconds poll_interval{100};

void run_train(const TrainOptions& o) {
  // Ctrl-C and SIGTERM are watched for from here, before the run starts any thread (interrupt_watch.hpp).
  InterruptWatch interrupts;
  // Every option is read and checked before any file is touched.
  TrainingSettings settings;
  try {
    settings = parse_training_options(o.training);
  } catch (const TrainingOptionError& e) {
    throw UsageError(e.what());
  }
  const auto checkpoint_every = parse_integer_option<std::int64_t>("--checkpoint-every", o.checkpoint_every, 0, max_training_steps);
  if (o.checkpoint && o.checkpoint->empty()) throw OutputError("--checkpoint is empty: name a file");

  // The outputs, resolved and checked against each other and the inputs before anything is written.
  const std::string checkpoint_path = o.checkpoint ? *o.checkpoint : o.out && *o.out != "-" ? *o.out + ".ckpt" : std::string("fpscope-train.ckpt");
  std::vector<OutputTarget> outputs;
  if (o.out) outputs.push_back(resolve_output(*o.out, "--out"));
  if (checkpoint_every > 0) outputs.push_back(resolve_output(checkpoint_path, "--checkpoint"));
  PreparedRun run;
  try {
    run = prepare_training(settings);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  check_outputs(outputs, run.data->files());
  if (o.out && !o.resume) check_replaces_only_a_run_log(outputs.front());
  if (checkpoint_every > 0) check_replaces_only_a_checkpoint(outputs.back());
  std::optional<std::filesystem::path> export_folder;
  if (o.export_inputs) {
    export_folder = *o.export_inputs;
    std::error_code error;
    const bool exists = std::filesystem::exists(*export_folder, error);
    if (o.export_inputs->empty() || (exists && (!std::filesystem::is_directory(*export_folder, error) || !std::filesystem::is_empty(*export_folder, error))))
      throw OutputError("--export-inputs " + printable_text(*o.export_inputs, 200) + " is not a new or empty folder: name one, nothing is overwritten");
  }
  const OutputTarget* log_target = o.out ? &outputs.front() : nullptr;

  TrainerBackend& trainer = *run.trainer;
  RunHeader& header = run.header;
  // What a checkpoint must agree with to be resumed: everything that decides the bits, the
  // products' kernels last (a checkpoint from before they were recorded has none to compare).
  RunHeader options_header = header;
  options_header.products.clear();
  options_header.run_id.clear();
  const std::string products_part = "|products " + header.products;
  const std::string options_part = checkpoint_settings_text(settings, run_header_line(options_header), trainer.name(), o.out.value_or(""));
  std::string checkpoint_settings = options_part + products_part;
  std::optional<RunLogPosition> resume_from;
  const std::string our_log = o.out.value_or("");
  // A checkpoint belongs to the run that wrote it, known by the log it covers: another run's is
  // neither resumed nor replaced (two runs given one --checkpoint would take turns destroying
  // each other's progress).
  const auto owner_of = [&](const TrainingCheckpoint& checkpoint) {
    const std::string theirs = split_checkpoint_settings(checkpoint.settings).log_path;
    return fmt::format("run {} ({})", checkpoint.run_id, theirs.empty() ? std::string("without a run log") : "logging to " + printable_text(theirs, 200));
  };
  if (!o.resume && checkpoint_every > 0 && std::filesystem::exists(checkpoint_path)) {
    try {
      const TrainingCheckpoint existing = read_checkpoint(checkpoint_path);
      if (!same_run_log(split_checkpoint_settings(existing.settings).log_path, our_log))
        throw UsageError("--checkpoint " + printable_text(checkpoint_path, 200) + " holds the state of " + owner_of(existing) +
                             ", which could still resume from it: name another --checkpoint, or remove it",
                         2);
    } catch (const CheckpointError&) {
      // Not a readable checkpoint: check_replaces_only_a_checkpoint has judged what it is.
    }
  }
  if (o.resume) {
    TrainingCheckpoint checkpoint;
    try {
      checkpoint = read_checkpoint(checkpoint_path);
    } catch (const CheckpointError& e) {
      throw UsageError(std::string(e.what()) + ": cannot --resume", 1);
    }
    const std::size_t their_products = checkpoint.settings.rfind("|products ");
    const std::string their_options = checkpoint.settings.substr(0, their_products);
    const CheckpointSettingsParts theirs = split_checkpoint_settings(their_options), ours = split_checkpoint_settings(options_part);
    if (!same_run_log(theirs.log_path, ours.log_path))
      throw UsageError("checkpoint " + printable_text(checkpoint_path, 200) + " is the state of " + owner_of(checkpoint) + ", not of this run" +
                           (our_log.empty() ? std::string(" without a log") : " logging to " + printable_text(our_log, 200)) +
                           ": resume that run, or give this one its own --checkpoint",
                       1);
    if (theirs.without_log != ours.without_log)
      throw UsageError("checkpoint " + printable_text(checkpoint_path, 200) + " was written by a run with other settings: resume with the same options", 1);
    if (their_products != std::string::npos && checkpoint.settings.substr(their_products) != products_part)
      throw UsageError("checkpoint " + printable_text(checkpoint_path, 200) + " was written where the products ran in other kernels (" +
                           printable_text(checkpoint.settings.substr(their_products + products_part.find(' ') + 1), 200) + "), not here (" +
                           header.products + "), and they round differently: resume it where it was written, or with its FPSCOPE_FLOAT32_PRODUCTS and FPSCOPE_BF16_PRODUCTS",
                       1);
    if (checkpoint.trainer.steps > settings.steps)
      throw UsageError(fmt::format("checkpoint {} is at step {}, and --steps {} ends the run before it: give more steps to go on",
                                   printable_text(checkpoint_path, 200), checkpoint.trainer.steps, settings.steps),
                       1);
    if (checkpoint.trainer.steps == settings.steps) {  // a finished run: nothing is opened, nothing trains
      fmt::print("{} steps: the checkpoint is at the run's last step, nothing left to train\n", settings.steps);
      return;
    }
    // A checkpoint from before runs named their products goes on in its log as it began, a header
    // without them, and so do the checkpoints this run writes.
    if (their_products == std::string::npos) {
      header.products.clear();
      checkpoint_settings = their_options;
    }
    trainer.restore(checkpoint.trainer);
    run.data->restore_state(checkpoint.data_state);
    header.run_id = checkpoint.run_id;
    resume_from = RunLogPosition{checkpoint.run_log_bytes, checkpoint.run_log_crc32};
  }
  const std::int64_t first_step = trainer.step_count();
  // With the run log on standard output, the summary goes to standard error.
  std::FILE* summary = log_target && log_target->kind == OutputTarget::Kind::descriptor && log_target->descriptor == 1 ? stderr : stdout;

  // A signal that came while the run was being made (a large model's first weights take seconds
  // to draw) ends it here, before anything is written.
  if (const int early = interrupts.interrupted(); early != 0)
    throw UsageError(fmt::format("{} before the first step: nothing was written", early == SIGTERM ? "terminated (SIGTERM)" : "interrupted"),
                     interrupted_status(early));
  RunExtras extras;
  if (checkpoint_every > 0) extras.checkpoints = CheckpointPlan{outputs.back(), checkpoint_every, checkpoint_settings};
  if (export_folder) {
    std::error_code error;
    std::filesystem::create_directories(*export_folder, error);
    if (error) throw OutputError("cannot make folder " + printable_text(export_folder->string(), 200) + ": " + error.message());
    export_parameters(*export_folder, settings.config, trainer.state());
    extras.on_batch = [&, folder = *export_folder](std::int64_t step, const Eigen::MatrixXf& inputs, const std::vector<int>& labels) {
      export_batch(folder, step, settings.config, inputs, labels);
    };
  }
  std::optional<RunLogSink> log_sink;
  NullRunSink no_log;
  if (log_target) log_sink.emplace(*log_target, resume_from);
  RunSink& sink = log_sink ? static_cast<RunSink&>(*log_sink) : no_log;
  TrainingSession session(sink);
  session.start(std::move(run), std::move(extras));

  // Progress is for a person watching: shown on a terminal, never in a log of stderr.
  const bool show_progress = ::isatty(STDERR_FILENO) != 0;
  int interrupted = 0;  // the signal that stopped the run
  // The first signal stops the run after the step in progress; session.stop() waits for that on a
  // thread of its own (made after the watch, so it blocks both signals too), while this one
  // watches for a second.
  std::thread stopper;
  std::int64_t shown_step = -1;
  for (;;) {
    const bool ended = session.wait_for_end(poll_interval);
    if (!ended && interrupted == 0 && (interrupted = interrupts.interrupted()) != 0) {
      stopper = std::thread([&session] { session.stop(); });  // the log is made durable
      if (show_progress) fmt::print(stderr, "\nfinishing the step in progress (interrupt again to stop at once)\n");
    } else if (!ended && interrupted != 0 && interrupts.interrupted_again()) {
      stop_at_once(log_sink ? &*log_sink : nullptr, first_step, settings.steps, interrupted, checkpoint_every > 0, show_progress);
    }
    const TrainingStatus status = session.status();
    if (show_progress && status.step != shown_step) {
      shown_step = status.step;
      fmt::print(stderr, "\r{} step {:>7}/{}  loss {:.4f}  scale {:g}  skipped {}  {:.1f} steps/s   ", status.backend, status.step, settings.steps,
                 status.loss, status.loss_scale, status.skipped_steps,
                 static_cast<double>(status.step - first_step) / std::max(status.running_seconds, 1e-9));
    }
    if (ended) break;
  }
  if (stopper.joinable()) stopper.join();
  if (show_progress) fmt::print(stderr, "\n");
  session.rethrow_failure();
  if (log_sink) log_sink->keep();  // a failed run's log is not kept: the file it replaced goes back
  const TrainingStatus status = session.status();
  if (interrupted != 0)
    throw UsageError(fmt::format("{} after step {} of {}: the run log is whole up to it{}", interrupted == SIGTERM ? "terminated (SIGTERM)" : "interrupted",
                                 status.step, settings.steps, checkpoint_every > 0 ? "; --resume goes on from the last checkpoint" : ""),
                     interrupted_status(interrupted));
  fmt::print(summary, "{} steps, final loss {:.6f}, loss scale {:g}, skipped steps {}\n", status.step, status.loss, status.loss_scale,
             status.skipped_steps);
}

}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train an MLP or a GPT in fp32 or mixed precision (CPU or CUDA backend), recording exponent histograms");
  for (const TrainingOptionSpec& spec : training_option_specs()) {
    if (!spec.in_cli) continue;
    if (spec.text) {
      CLI::Option* option = cmd->add_option(spec.name, o->training.*spec.text, spec.help);
      if (spec.shows_default) option->capture_default_str();
    } else if (spec.optional_text) {
      cmd->add_option_function<std::string>(spec.name, [o, member = spec.optional_text](const std::string& text) { o->training.*member = text; },
                                            spec.help);
    } else if (spec.repeated) {
      cmd->add_option(spec.name, o->training.*spec.repeated, spec.help);
    } else {
      cmd->add_flag(spec.name, o->training.*spec.flag, spec.help);
    }
  }
  cmd->add_option_function<std::string>("--out", [o](const std::string& path) { o->out = path; },
                                        "run log to write as training goes (JSON Lines; - for standard output)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "write a checkpoint every N steps (atomically)")->capture_default_str();
  cmd->add_option_function<std::string>("--checkpoint", [o](const std::string& path) { o->checkpoint = path; },
                                        "checkpoint file (default: the run log's name + .ckpt, or fpscope-train.ckpt)");
  cmd->add_option_function<std::string>("--export-inputs", [o](const std::string& path) { o->export_inputs = path; },
                                        "write the starting parameters (NAME.npy, PyTorch's names and layouts) and every step's batch "
                                        "(inputs-STEP.npy, targets-STEP.npy) into this new folder, to replay the run in another framework");
  cmd->add_flag("--resume", o->resume, "go on from the checkpoint with the same options; the run log is cut back to it");
  cmd->callback([o] { run_train(*o); });
}

}  // namespace fpscope::cli
