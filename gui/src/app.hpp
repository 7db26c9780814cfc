// App: what fpscope-gui shows -- a run (trained here or followed from a log), the selection, and
// each view's state. The data side (RunStore, TrainingSession, RunLogFollower) knows nothing of
// ImGui; the app copies what is new once per frame and draws from its copy.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "export_job.hpp"
#include "scale_slider.hpp"
#include "view_curves.hpp"
#include "view_export.hpp"
#include "view_float_inspector.hpp"
#include "view_heatmap.hpp"
#include "view_histogram.hpp"
#include "view_training.hpp"
#include "view_what_if.hpp"
#include "follow_thread.hpp"
#include "fpscope/analyzer/heatmap.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "fpscope/snapshot/run_store.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/gpu/training_session.hpp"

namespace fpscope::gui {

enum class View : std::uint8_t { training, histogram, heatmap, curves, what_if, blocks, inspector, export_files };
inline constexpr View all_views[] = {View::training, View::histogram, View::heatmap,   View::curves,
                                     View::what_if,  View::blocks,    View::inspector, View::export_files};
std::string_view view_name(View view);  // "training", "histogram", ..., "what-if", "blocks", "inspector", "export"
std::optional<View> parse_view(std::string_view name);

// The formats the histogram, heatmap and what-if views can shade: the 16-bit ones, OCP FP8, the
// FNUZ FP8 of AMD and GraphCore, and the OCP MX element formats (FP6, FP4).
inline constexpr Format target_formats[] = {formats::fp16,     formats::bf16,     formats::e4m3, formats::e5m2, formats::e4m3fnuz,
                                            formats::e5m2fnuz, formats::e3m2,     formats::e2m3, formats::e2m1};
inline constexpr const char* target_format_names[] = {"fp16", "bf16", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e3m2", "e2m3", "e2m1"};
inline constexpr int target_format_count = static_cast<int>(std::size(target_formats));

// The snapshots the app keeps in memory: past this, old ones are thinned (RunStore). The app's
// peak is about this, plus the snapshots of one poll of a followed log (the follower reads on
// only once a frame has taken them), plus the heap's fragments, plus ~110 MB of window, fonts
// and GL: under 400 MB however long a run goes (bench/gui_responsiveness.sh measures it at
// 100,000 steps).
inline constexpr std::size_t snapshot_memory_budget = std::size_t{128} << 20;
// A followed log that has not grown for this long is said to be quiet (its writer finished or paused).
inline constexpr double follow_quiet_seconds = 5;
// A followed log is read a window at a time (no line may be longer), taking about poll_bytes of
// it per frame: a poll's snapshots are what the app holds beyond the store's budget until the
// frame takes them (FollowThread::taken).
inline constexpr std::uint64_t follow_window_bytes = std::uint64_t{8} << 20;
inline constexpr std::uint64_t follow_poll_bytes = std::uint64_t{2} << 20;







// The training panel's width in pixels where the window's content is `room` pixels wide: the
// width the user dragged it to (for UI scale 1; 0 where none), else 330 or, in a narrower window,
// 45% of it; between 180 and 60% of the room, so that the views keep the rest.
float panel_width_now(float dragged, float room);

struct AppOptions {
  std::string follow;  // a run log to follow instead of training here
  bool demo = false;   // train an fp32 baseline, then fp16 without loss scaling, on the paper's settings
  View view = View::histogram;
  TrainingForm form;   // the Training view's settings on opening
  bool start = false;  // start training with `form` on opening
  bool example = false;  // start the example (the form's defaults: fp16, no loss scaling, run on)
  std::optional<int> preview_scale_log2;  // the slider's preview on opening
  std::int64_t settle_at_step = 0;  // headless: a running session has settled once it did this many steps
  std::optional<InspectorState> inspector;  // the Float inspector on opening (--inspect, --inspect-format, --arithmetic)
  std::string tensor;  // the layer selected on opening, once the run has it (--tensor)
  // The target format on opening (--target-format), into target_formats; unset: the format of the
  // run the app trains (fp16 when it trains none, or fp32).
  std::optional<int> format_index;
  TensorKind kind = TensorKind::activation_gradient;  // --kind
};



// The loss-scale slider previews in every state: the histograms are drawn as they would be at this
// scale (an outlined ghost over the recorded bars) without touching the run; Apply makes it the
// run's static scale. Unset, the slider shows the run's (or the log's) current scale.
struct ScalePreview {
  std::optional<int> scale_log2;
  bool apply_while_dragging = false;
};



class App {
 public:
  explicit App(const AppOptions& options);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  // Once per frame, before draw(): poll the follower, copy new snapshots, advance the demo.
  void update(double now_seconds);
  void draw();
  // Headless runs take their screenshot once the demo has finished and a followed log is read.
  bool settled() const;
  // Something on screen changes by itself: a save under way, a message about to go.
  bool animating() const {
    return export_job.busy() || now < export_message_until || (follower && now - last_growth_at <= follow_quiet_seconds + 0.5);
  }

  // --- the run, as of this frame ---
  RunStore store;
  std::unique_ptr<TrainingSession> session;
  TrainingStatus training_status;  // the session's, read once per frame by update(); every view draws from it
  std::unique_ptr<FollowThread> follower;  // reads on its own thread
  std::string follow_error;  // shown in the window; also printed once to stderr
  RunHeader header;
  std::vector<std::shared_ptr<const Snapshot>> snapshots;
  std::vector<StepRecord> steps;  // every step of the run, recorded or not
  std::uint64_t data_version = 0;  // changes whenever `snapshots` does
  std::vector<std::string> tensor_names;  // layer names in first-seen order
  // Curves' fp32 baseline: the loss of the same settings in float32, every step. Beside a
  // low-precision run trained here, baseline_session trains it (shadow_config: fp32, no recipe, no
  // scaling; the same data and seed), at most baseline_lead_steps ahead of the run and paused
  // there; otherwise (the demo) the last fp32 run shown before a new one started.
  std::vector<double> baseline_steps, baseline_loss;
  RunStore baseline_store;
  std::unique_ptr<TrainingSession> baseline_session;
  bool baseline_beside = false;  // baseline_* is baseline_session's (it runs ahead: Curves draws it up to the run's step)
  double now = 0;
  bool growing = false;  // new snapshots arrived this frame
  double last_growth_at = 0;  // when snapshots last arrived (a followed log goes quiet when its writer ends)

  // --- selection shared by the views ---
  int tensor_index = 0;  // into tensor_names
  TensorKind kind = TensorKind::activation_gradient;
  int format_index = 0;         // into target_formats
  bool format_chosen = false;   // by --target-format or the format menu: training no longer picks it
  int step_index = -1;   // into snapshots; -1 follows the latest
  View view = View::histogram;

  // --- layout ---
  // The training panel's width as the user dragged its right edge, for UI scale 1 (0: not dragged;
  // panel_width_now says what a frame gives it).
  float panel_width_dragged = 0;
  float panel_width_shown = 0;  // what the last frame gave it, in pixels (--report)

  // --- per-view state ---
  TrainingForm form;
  std::string training_message;  // the last start's error, shown under the form
  InspectorState inspector;
  WhatIfState what_if;
  HistogramState histogram;
  CurvesState curves;
  InjectState inject;
  ScalePreview preview;
  HeatmapState heatmap;
  std::string export_folder = ".";
  std::string export_message;
  std::string pending_window_png;  // main() writes the frame here after rendering
  double export_message_until = -1;  // shown over every view until then (a PNG saved from any view)
  ExportJob export_job;  // after `follower`: destroyed first, so a save reading the log finishes before it goes

  // --- helpers for the views ---
  const Snapshot* current_snapshot() const;
  // A skipped step's culprit opened in the Histogram: its step (the snapshot of it, or where the
  // log holds none, the nearest recorded one), its tensor and kind. Returns what it could not do
  // (empty when all was done), for the caller to say.
  std::string open_culprit(const StepRecord& step);
  // Brings `v`'s tab to the front at the next frame, as a click on it would.
  void show_view(View v) {
    view = v;
    requested_tab_ = true;
  }
  std::int64_t current_index() const;
  const TensorRecord* selected_record(const Snapshot& snapshot) const;
  Format target_format() const { return target_formats[format_index]; }
  // Start a run from the form (errors go to training_message); used by the Training view and the demo.
  // `paused`: it waits at step 0 for Resume (the example, so a person sees it begin).
  bool start_training(const TrainingForm& form, bool paused = false);
  void selection_controls();  // tensor, kind, format and step pickers, shared by several views
  // The selection controls, then the selected tensor of the shown step; nullptr after saying why
  // there is none (no run yet: `no_run`; waiting for a followed log; the step lacks the tensor).
  const TensorRecord* shown_record(const char* no_run, const Snapshot*& snapshot);
  // The scale the shown step ran with (2^k), and the slider's: the preview, or that.
  int recorded_scale_log2() const;
  int preview_scale_log2() const { return preview.scale_log2.value_or(recorded_scale_log2()); }
  // The preview from the engine where the window holds a trainer: the run's next step re-run at
  // the slider's scale (counterfactual_step), what Apply would give. update() asks for it as the
  // slider moves and the run goes on; null while none at the slider's scale has arrived (the
  // views then say it is being computed) and where nothing is previewed or no trainer is here.
  const CounterfactualResult* counterfactual_preview() const;
  // The record of `name` and `kind` in the counterfactual preview; null where there is none.
  const TensorRecord* counterfactual_record(const std::string& name, TensorKind kind) const;
  // Whether the preview waits for the engine's answer (a trainer here, a scale previewed, none yet).
  bool counterfactual_pending() const;
  // Every tensor's series over the `what_if.window` recorded steps ending at the shown one (the
  // What-if view and the Training panel's hint advise from it: a window keeps the advice from
  // jumping with one step's extremes). Built once per data version, step and window.
  const std::vector<TensorSeries>& window_series();
  // The loss-scale advice for target_formats[format_index], steadied: it goes down as soon as the
  // data asks (a higher scale would overflow), up only when the data moves it by more than a
  // binade, so it does not flicker from frame to frame with one step's extremes. It reads values
  // nothing flushed wherever there are any: the window's fp32 shadows where the run records them;
  // where a trainer is here and the run records none, the shadows sampled of its latest steps
  // (sample_shadows) -- none (no_gradients) until the first arrives, for advice from flushed
  // gradients overshoots; a followed log without shadows, its window's recorded gradients.
  LossScaleAdvice steady_advice(int format_index);
  // Whether steady_advice reads shadows sampled from the trainer (not the run's own records).
  bool advice_from_samples() const;

 private:
  void save_baseline_if_fp32();
  void start_baseline(const TrainingSettings& settings);
  void pace_baseline();  // once per frame: its new steps into baseline_*, paused or resumed to keep its lead
  std::uint64_t baseline_generation_ = ~0ull;
  std::uint64_t store_generation_seen_ = ~0ull;
  std::vector<TensorSeries> window_series_;
  std::vector<TensorSeries> window_gradients_;  // the gradients among them, which the advice reads
  std::tuple<std::uint64_t, std::int64_t, int> window_series_key_{~0ull, -1, 0};
  std::uint64_t store_layout_seen_ = 0;
  bool requested_tab_ = true;  // select `view`'s tab on the first frame
  int demo_stage_ = -1;  // -1 no demo; 0 fp32 baseline running; 1 fp16 running; 2 done
  std::int64_t settle_at_step_ = 0;
  std::string wanted_tensor_;  // selected as soon as it appears
  void ask_for_counterfactual();
  // Asks the session for the fp32 shadow of its next step now and then (request_shadow_sample),
  // keeping the last shadow_samples_kept answers and their gradients' series for steady_advice.
  void sample_shadows();
  std::vector<std::shared_ptr<const Snapshot>> shadow_samples_;
  std::vector<TensorSeries> sampled_gradients_;
  std::uint64_t shadow_answer_seen_ = 0;
  double shadow_asked_at_ = -1;
  std::int64_t shadow_asked_step_ = -1;
  std::array<std::optional<int>, target_format_count> held_advice_log2_{};  // steady_advice's, per format
  std::shared_ptr<const CounterfactualResult> counterfactual_;  // the latest answer
  std::optional<int> asked_scale_log2_;  // the last request's scale, its step and when it was made
  std::int64_t asked_step_ = -1;
  double asked_at_ = -1;
};

// Every view's draw function is in its own header (view_*.hpp); the Blocks view keeps no state.
void draw_blocks(App& app);
int target_format_index(std::string_view name);     // -1 when the name (any parse_format reads) is none of target_formats

}  // namespace fpscope::gui
