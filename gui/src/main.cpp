// fpscope-gui: the main loop (poll events, new frame, draw the views, render), headless frames and screenshots.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <fmt/core.h>
#include <imgui.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <cfloat>
#include <filesystem>
#include <functional>
#include <chrono>
#include <csignal>
#include <map>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app.hpp"
#include "drawing_cost.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "screenshot.hpp"
#include "software_gl.hpp"
#include "ui_scale.hpp"

namespace {

std::string glfw_error_text;
void on_glfw_error(int, const char* description) { glfw_error_text = description; }

// Input the window received since the last frame. Installed before ImGui's callbacks, which call
// these first ("chain"), so ImGui sees every event as before. Interaction (the pointer moving, a
// button, the wheel, a key) draws at full rate for a moment; what the window system says of the
// window itself (exposed, resized, focused, the pointer entering it) asks for one frame. None at
// the start: a window mapped under the pointer hears all of the latter and where the pointer is
// at once, and a run started from the command line trained beside 0.75 s of frames at full rate
// (about a core's worth of software GL, a tenth of a 300-step GPT run).
bool input_arrived = false;
bool redraw_requested = false;
void note_input() { input_arrived = true; }
void note_redraw() { redraw_requested = true; }
// The pointer's first report tells where it is, not that it moved.
std::optional<std::pair<double, double>> last_pointer;
void on_pointer(GLFWwindow*, double x, double y) {
  if (last_pointer && *last_pointer != std::pair{x, y}) note_input();
  else note_redraw();
  last_pointer = std::pair{x, y};
}
// The window's shortcuts, taken in the key callback itself: Dear ImGui 1.86 sees a key only if it
// is still down when the frame starts, so a quick tap (press and release between two frames)
// would be lost. Ctrl + / Ctrl - / Ctrl 0 change the UI scale (applied before the next frame),
// Ctrl Q quits.
float scale_steps_requested = 0;  // quarters to add; NaN: back to 1
void on_key(GLFWwindow* window, int key, int, int action, int mods) {
  note_input();
  if (action != GLFW_PRESS || (mods & GLFW_MOD_CONTROL) == 0) return;
  if (key == GLFW_KEY_Q) glfwSetWindowShouldClose(window, GLFW_TRUE);
  if (key == GLFW_KEY_EQUAL || key == GLFW_KEY_KP_ADD) scale_steps_requested += 1;
  if (key == GLFW_KEY_MINUS || key == GLFW_KEY_KP_SUBTRACT) scale_steps_requested -= 1;
  if (key == GLFW_KEY_0 || key == GLFW_KEY_KP_0) scale_steps_requested = std::numeric_limits<float>::quiet_NaN();
}
// Keys reach ImGui a change per frame. Dear ImGui 1.86 sees a key only as down or up when a frame
// starts, so a key pressed and released between two frames (a quick tap, typed or sent by a
// program) would be lost: 25 BackSpaces sent at once removed 6 characters. The window's key events
// and typed characters are queued as they come and handed to ImGui's backend (which calls on_key
// first) in order, each frame up to a second event of a key that already changed in that frame, or
// a release after a press, which wait for the next: a frame sees every press down with the keys
// held with it, and a character typed after Ctrl+A reaches the field after the selection.
struct KeyEvent {
  int key, scancode, action, mods;
  unsigned character;  // a typed character (key is -1 then), in its place among the keys
};
std::deque<KeyEvent> pending_keys;
void queue_key(GLFWwindow*, int key, int scancode, int action, int mods) {
  pending_keys.push_back({key, scancode, action, mods, 0});
  note_input();
}
void queue_character(GLFWwindow*, unsigned character) {
  pending_keys.push_back({-1, 0, 0, 0, character});
  note_input();
}
// Before a frame: the queued key events this frame may see. True while some wait for later frames.
bool deliver_keys(GLFWwindow* window) {
  std::vector<int> changed_this_frame;
  bool pressed_this_frame = false;
  while (!pending_keys.empty()) {
    const KeyEvent e = pending_keys.front();
    if (e.key < 0) {
      pending_keys.pop_front();
      ImGui_ImplGlfw_CharCallback(window, e.character);
      continue;
    }
    const bool changes = e.action != GLFW_REPEAT;
    if (changes && std::find(changed_this_frame.begin(), changed_this_frame.end(), e.key) != changed_this_frame.end()) break;
    // A release after a press waits too: Ctrl let go in the frame that sees A pressed would make
    // Ctrl+A a plain A (ImGui reads the modifiers' state when the frame starts).
    if (e.action == GLFW_RELEASE && pressed_this_frame) break;
    pending_keys.pop_front();
    if (changes) changed_this_frame.push_back(e.key);
    if (e.action == GLFW_PRESS) pressed_this_frame = true;
    ImGui_ImplGlfw_KeyCallback(window, e.key, e.scancode, e.action, e.mods);
  }
  return !pending_keys.empty();
}

void install_input_callbacks(GLFWwindow* window) {
  glfwSetCursorPosCallback(window, on_pointer);
  glfwSetMouseButtonCallback(window, [](GLFWwindow*, int, int, int) { note_input(); });
  glfwSetScrollCallback(window, [](GLFWwindow*, double, double) { note_input(); });
  glfwSetKeyCallback(window, on_key);
  glfwSetCharCallback(window, [](GLFWwindow*, unsigned) { note_input(); });
  glfwSetWindowFocusCallback(window, [](GLFWwindow*, int) { note_redraw(); });
  glfwSetCursorEnterCallback(window, [](GLFWwindow*, int) { note_redraw(); });
  glfwSetWindowRefreshCallback(window, [](GLFWwindow*) { note_redraw(); });
  glfwSetFramebufferSizeCallback(window, [](GLFWwindow*, int, int) { note_redraw(); });
}

// When nothing changes, nothing is drawn: the loop sleeps in glfwWaitEventsTimeout, waking for
// input, and every poll interval to look for new data (a followed log, a paused session's status).
// After input it draws at full rate for a moment, for ImGui's hover and click feedback.
constexpr double idle_poll_seconds = 0.25;
constexpr double active_after_input_seconds = 0.75;
// Of one core, while a run trains and the window is left alone. Software GL on a small machine
// takes that core from the training's threads, which wait on each other: a twentieth, not a
// tenth (a GPU draws a frame in far less, and then the 10-a-second cap is what binds).
constexpr double training_drawing_share = 0.05;
// While a followed log's backlog is read: how often the loop looks whether the next window is in.
constexpr double follow_ready_check_seconds = 0.002;

struct Options {
  fpscope::gui::AppOptions app;
  std::string view = "histogram";
  int frames = 0;           // headless: render this many frames once settled, then exit
  std::string screenshot;   // ... and save the last one here
  std::string export_folder;  // ... and run the Export view's actions into this folder
  int width = 1480, height = 900;
  bool report = false;
  double settle_timeout = 300;
  float ui_scale = 0;  // 0: the monitor's content scale
};

// The process's peak resident memory in MiB (Linux: VmHWM in /proc/self/status); 0 where unknown.
double peak_memory_mib() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
  std::fclose(f);
  return kib / 1024.0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int run(const Options& o) {
  glfwSetErrorCallback(on_glfw_error);
  fpscope::gui::choose_software_gl_threads(o.app.follow.empty());
  if (!glfwInit()) {
    std::fprintf(stderr, "fpscope-gui: cannot open a window (%s): run it on a desktop, or headless under xvfb-run\n",
                 glfw_error_text.c_str());
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  GLFWwindow* window = glfwCreateWindow(o.width, o.height, "fpscope", nullptr, nullptr);
  if (window == nullptr) {
    std::fprintf(stderr, "fpscope-gui: cannot create an OpenGL 3.3 window (%s)\n", glfw_error_text.c_str());
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;  // the layout is fixed; leave no imgui.ini behind
  ImGui::StyleColorsDark();
  install_input_callbacks(window);
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  glfwSetKeyCallback(window, queue_key);  // in place of the backend's: deliver_keys hands them on
  glfwSetCharCallback(window, queue_character);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  float content_scale = 1, unused = 1;
  glfwGetWindowContentScale(window, &content_scale, &unused);
  fpscope::gui::apply_ui_scale(o.ui_scale > 0 ? o.ui_scale : fpscope::gui::default_ui_scale(content_scale));
  float requested_scale = fpscope::gui::current_ui_scale();

  int status = 0;
  {
    fpscope::gui::App app(o.app);
    const auto start = std::chrono::steady_clock::now();
    const bool headless = o.frames > 0;
    int frames_after_settling = 0;
    bool warned_settle = false;
    std::vector<double> frame_ms;
    int frames_for_input = 0;  // drawn at full rate because input arrived (--report)
    std::map<std::string, int> advice_frames;  // the loss-scale advice each drawn frame showed (--report)
    // 60 frames a second; while a run trains in this process and nobody works the window, 10 at
    // most and fewer where a frame is dear, so that drawing takes at most a twentieth of one core
    // and training keeps the rest (software GL on a small machine spends tens of milliseconds a
    // frame).
    double active_until = 0;
    bool animated_last_frame = false;  // one more frame after a save ends or a message goes
    std::uint64_t drawn_version = ~0ull;
    fpscope::TrainingStatus drawn_status;
    bool drawn_once = false;
    double drawing_cpu_before = fpscope::gui::drawing_cpu_seconds(), drawing_cpu_per_frame = 0;
    while (!glfwWindowShouldClose(window)) {
      // Something changes without input: a run training here, a save under way, a message timing out.
      const bool live = app.training_status.state == fpscope::TrainingStatus::State::running || app.animating() ||
                           animated_last_frame;
      animated_last_frame = app.animating();
      if (headless || live || seconds_since(start) < active_until) {
        glfwPollEvents();
      } else {
        glfwWaitEventsTimeout(idle_poll_seconds);
      }
      const auto frame_start = std::chrono::steady_clock::now();
      if (input_arrived) active_until = seconds_since(start) + active_after_input_seconds;
      if (scale_steps_requested != 0) {  // Ctrl + / - / 0, from the key callback
        requested_scale = std::isnan(scale_steps_requested) ? 1.0f : requested_scale + 0.25f * scale_steps_requested;
        requested_scale = std::clamp(requested_scale, fpscope::gui::min_ui_scale, fpscope::gui::max_ui_scale);
        scale_steps_requested = 0;
      }
      if (requested_scale != fpscope::gui::current_ui_scale()) {  // between frames: the font atlas is rebuilt
        fpscope::gui::apply_ui_scale(requested_scale);
        requested_scale = fpscope::gui::current_ui_scale();
        input_arrived = true;
      }
      app.update(seconds_since(start));
      // Idle and nothing new: keep the last frame on screen.
      const fpscope::TrainingStatus& session_status = app.training_status;
      const bool status_changed = session_status.state != drawn_status.state || session_status.step != drawn_status.step ||
                                  session_status.loss_scale != drawn_status.loss_scale;
      if (!headless && drawn_once && !input_arrived && !redraw_requested && seconds_since(start) >= active_until && !live &&
          !status_changed && app.data_version == drawn_version && app.pending_window_png.empty())
        continue;
      input_arrived = false;
      redraw_requested = false;
      if (seconds_since(start) < active_until) ++frames_for_input;
      drawn_once = true;
      drawn_version = app.data_version;
      drawn_status = session_status;
      if (deliver_keys(window)) input_arrived = true;  // more taps wait: another frame at once
      ImGui_ImplOpenGL3_NewFrame();
      ImGui_ImplGlfw_NewFrame();
      // Headless frames are pictures, not sessions: keep the pointer (wherever Xvfb put it) out.
      if (headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
      ImGui::NewFrame();
      app.draw();
      if (o.report) {
        const fpscope::LossScaleAdvice advice = app.steady_advice(app.format_index);
        ++advice_frames[advice.kind == fpscope::LossScaleAdvice::Kind::scale ? fmt::format("2^{}", advice.scale_log2)
                        : advice.kind == fpscope::LossScaleAdvice::Kind::no_scaling_needed ? std::string("none needed")
                                                                                         : std::string("no advice")];
      }
      ImGui::Render();
      int width = 0, height = 0;
      glfwGetFramebufferSize(window, &width, &height);
      glViewport(0, 0, width, height);
      // The app's window draws no background of its own (App::draw): the clear colour is the colour
      // its background quad made over this clear, without a blended pass over every pixel, which
      // is most of a frame's work under software GL.
      const ImVec4 window_bg = ImGui::GetStyle().Colors[ImGuiCol_WindowBg];
      const auto over = [&](float bg, float clear) { return bg * window_bg.w + clear * (1.0f - window_bg.w); };
      glClearColor(over(window_bg.x, 0.08f), over(window_bg.y, 0.08f), over(window_bg.z, 0.10f), 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());

      bool last_frame = false;
      if (headless) {
        const bool settled = app.settled();
        if (!settled && seconds_since(start) > o.settle_timeout && !warned_settle) {
          std::fprintf(stderr, "fpscope-gui: still running after %.0f s; taking the frames anyway\n", o.settle_timeout);
          warned_settle = true;
        }
        if (settled || warned_settle) last_frame = ++frames_after_settling >= o.frames;
      }
      try {
        if (!app.pending_window_png.empty()) {
          app.export_message_until = app.now + 4;
          fpscope::gui::save_framebuffer_png(width, height, fpscope::gui::export_target(app, app.pending_window_png));
          app.export_message = "saved the window as " + app.pending_window_png;
          app.pending_window_png.clear();
        }
        if (last_frame && !o.screenshot.empty()) fpscope::gui::save_framebuffer_png(width, height, fpscope::gui::export_target(app, o.screenshot));
        if (last_frame && !o.export_folder.empty()) {
          const std::string message =
              fpscope::gui::export_folder_whole(app, o.export_folder, fpscope::gui::framebuffer_png(width, height, "fpscope-window.png"));
          std::fprintf(stderr, "fpscope-gui: %s\n", fpscope::printable_text(message, 4096).c_str());
        }
      } catch (const std::exception& e) {
        if (last_frame) {
          std::fprintf(stderr, "fpscope-gui: %s\n", fpscope::printable_text(e.what(), 4096).c_str());
          status = 1;
        } else {
          app.export_message = e.what();
          app.pending_window_png.clear();
        }
      }
      glfwSwapBuffers(window);
      const double work = seconds_since(frame_start);
      // The frame's processor time, software GL's render threads included (their clock-tick
      // counts are coarse: averaged over the last frames).
      const double cpu_now = fpscope::gui::drawing_cpu_seconds();
      drawing_cpu_per_frame = 0.8 * drawing_cpu_per_frame + 0.2 * (cpu_now - drawing_cpu_before);
      drawing_cpu_before = cpu_now;
      if (frames_after_settling > 0 || !headless) frame_ms.push_back(work * 1000.0);  // interactive: every frame drawn
      if (last_frame) break;
      const bool working = seconds_since(start) < active_until;  // input in the last moments
      const bool backlog = app.follower && !app.follower->caught_up();
      const double frame_budget = backlog            ? 1.0 / 10.0
                                  : live && !working ? std::max(1.0 / 10.0, std::max(work, drawing_cpu_per_frame) / training_drawing_share)
                                                     : 1.0 / 60.0;
      if (backlog) {
        // A followed log's backlog: the follower reads its next window once a frame has taken the
        // last (FollowThread::taken), so the next frame comes as soon as that window is read.
        for (double left = frame_budget - work; left > 0 && !input_arrived && !redraw_requested && !app.follower->window_ready();
             left = frame_budget - seconds_since(frame_start))
          glfwWaitEventsTimeout(std::min(left, follow_ready_check_seconds));
      } else if (live && !working) {
        // Paced for training: wait out the budget, but answer input (or the window system asking
        // for a frame) at once rather than up to half a second later.
        for (double left = frame_budget - work; left > 0 && !input_arrived && !redraw_requested;
             left = frame_budget - seconds_since(frame_start))
          glfwWaitEventsTimeout(left);
      } else if (work < frame_budget) {
        std::this_thread::sleep_for(std::chrono::duration<double>(frame_budget - work));
      }
    }
    if (o.report && !frame_ms.empty()) {
      std::sort(frame_ms.begin(), frame_ms.end());
      const auto session = app.session ? app.session->status() : fpscope::TrainingStatus{};
      fmt::print("frames {}  median frame {:.2f} ms  p95 {:.2f} ms  snapshots {}  training steps {} in {:.2f} s ({:.1f} steps/s), {} skipped\n",
                 frame_ms.size(), frame_ms[frame_ms.size() / 2], frame_ms[std::min(frame_ms.size() - 1, frame_ms.size() * 95 / 100)],
                 app.snapshots.size(), session.step, session.running_seconds,
                 session.running_seconds > 0 ? static_cast<double>(session.step) / session.running_seconds : 0.0, session.skipped_steps);
      fmt::print("memory: peak {:.0f} MiB; snapshots held {} ({:.0f} MiB by the store's estimate), {} thinned; step records {}\n",
                 peak_memory_mib(), app.snapshots.size(), static_cast<double>(app.store.snapshot_bytes()) / (1 << 20),
                 app.store.thinned_snapshots(), app.steps.size());
      fmt::print("ui scale {:.2f} (font {:.0f} px)\n", fpscope::gui::current_ui_scale(), ImGui::GetFontSize());
      fmt::print("training panel {:.0f} px wide in a window {:.0f} px wide\n", app.panel_width_shown, ImGui::GetIO().DisplaySize.x);
      fmt::print("frames at full rate after input {}\n", frames_for_input);
      fmt::print("target format {}\n", fpscope::gui::target_format_names[app.format_index]);
      int advised_frames = 0;
      for (const auto& [advice, count] : advice_frames) advised_frames += count;
      std::string advice_line;
      for (const auto& [advice, count] : advice_frames)
        advice_line += fmt::format("{}{} in {} of {} frames ({:.1f}%)", advice_line.empty() ? "" : ", ", advice, count, advised_frames,
                                   100.0 * count / std::max(1, advised_frames));
      fmt::print("advice shown: {}\n", advice_line);
      if (app.view == fpscope::gui::View::inspector) fmt::print("{}", app.inspector.report);
      if (app.view == fpscope::gui::View::what_if) fmt::print("{}", app.what_if.report);
      if (const fpscope::Snapshot* shown = app.current_snapshot(); shown != nullptr && !app.tensor_names.empty())
        fmt::print("shown: {} at step {}, {} {}\n", fpscope::gui::view_name(app.view), shown->step,
                   app.tensor_names[static_cast<std::size_t>(app.tensor_index)], fpscope::tensor_kind_name(app.kind));
      if (app.curves.plot_right > app.curves.plot_left) {
        fmt::print("curves scale plot x {:.1f} .. {:.1f} over steps 0 .. {:.0f}, y {:.1f} .. {:.1f}\n", app.curves.plot_left, app.curves.plot_right,
                   app.curves.plot_steps, app.curves.plot_top, app.curves.plot_bottom);
        fmt::print("curves loss axis log10 {:.4f} .. {:.4f}, scale axis log2 {:.0f} .. {:.0f}\n", app.curves.loss_axis_lo,
                   app.curves.loss_axis_hi, app.curves.scale_axis_lo, app.curves.scale_axis_hi);
      }
      if (const auto& series = app.curves.series; !series.marked.empty())
        fmt::print("curves red ticks: {} skipped, {} unfinished\n", series.marked.size() - series.unfinished, series.unfinished);
      const auto& g = app.histogram.geometry;
      if (g.binade_end > g.binade_lo) {
        const fpscope::Snapshot* shown = app.current_snapshot();
        const fpscope::TensorRecord* record = shown != nullptr ? app.selected_record(*shown) : nullptr;
        const bool rerun = record != nullptr && app.counterfactual_record(record->name, record->kind) != nullptr;
        fmt::print("histogram x {:.1f} .. {:.1f} px over binades {} .. {}: {:.3f} px per binade; preview 2^{}, recorded 2^{}\n", g.x_min,
                   g.x_max, g.binade_lo, g.binade_end, (g.x_max - g.x_min) / static_cast<float>(g.binade_end - g.binade_lo),
                   app.preview_scale_log2(), app.recorded_scale_log2());
        fmt::print("preview outline: {}\n", rerun ? "the next step re-run" : "the recorded values shifted");
      }
    }
    if (headless && (!app.follow_error.empty() || !app.training_message.empty())) status = 1;
    if (app.heatmap.texture != 0) glDeleteTextures(1, &app.heatmap.texture);  // while the GL context lives
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  fpscope::start_without_blas_workers(argv);
  fpscope::keep_step_memory_mapped();
  std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit: a write that says EFBIG, not a silent kill
  Options o;
  CLI::App cli("fpscope-gui: watch mixed-precision training live, tune the loss scale by eye, explore float formats bit by bit");
  cli.add_option("--follow", o.app.follow, "show a run log that another process is writing (fpscope train, the PyTorch bridge)");
  cli.add_flag("--demo", o.app.demo, "train an fp32 baseline, then fp16 without loss scaling, on settings that flush gradients");
  cli.add_option("--view", o.view, "the view to show first: training, histogram, heatmap, curves, what-if, blocks, inspector, export")
      ->capture_default_str();
  cli.add_option("--frames", o.frames, "headless: once the demo or the followed log has settled, render N frames and exit");
  cli.add_option("--screenshot", o.screenshot, "with --frames: save the last frame as this PNG");
  cli.add_option("--export", o.export_folder, "with --frames: save run.jsonl, histograms.csv and fpscope-window.png into this folder (the Export view's buttons)");
  cli.add_option("--width", o.width, "window width")->capture_default_str();
  cli.add_option("--height", o.height, "window height")->capture_default_str();
  // The Training view's settings: fpscope train's options, read by its parser (training_settings.hpp).
  fpscope::TrainingOptions training;
  training.steps = "0";  // the app runs until stopped
  training.endless = true;
  for (const fpscope::TrainingOptionSpec& spec : fpscope::training_option_specs()) {
    if (!spec.in_app) continue;
    const std::string help = "training: " + spec.help;
    if (spec.text) {
      CLI::Option* option = cli.add_option(spec.name, training.*spec.text, help);
      if (spec.shows_default) option->capture_default_str();
    } else if (spec.optional_text) {
      cli.add_option_function<std::string>(spec.name, [&training, member = spec.optional_text](const std::string& text) { training.*member = text; },
                                           help);
    } else if (spec.repeated) {
      cli.add_option(spec.name, training.*spec.repeated, help);
    } else {
      cli.add_flag(spec.name, training.*spec.flag, help);
    }
  }
  std::string preview_scale;
  cli.add_option("--preview-scale", preview_scale, "the loss-scale slider's preview on opening: a power of two, such as 2^10");
  cli.add_flag("--start", o.app.start, "start training with these settings on opening");
  std::string inspect_text, inspect_format, arithmetic;
  cli.add_option("--inspect", inspect_text, "the Float inspector's number on opening: 0.1, 1e-40, 0x1.8p-3, or bits 0x3C00 / 0b...");
  std::string target_format;
  cli.add_option("--target-format", target_format,
                 "the format the histogram, heatmap and training views shade on opening: fp16 bf16 e4m3 e5m2 e4m3fnuz e5m2fnuz e3m2 e2m3 e2m1");
  cli.add_option("--inspect-format", inspect_format, "the Float inspector's selected format: one of its rows by any of its names (fp16, e4m3, float8_e4m3fn, ...), or a custom eXmY");
  cli.add_option("--arithmetic", arithmetic, "the Float inspector's arithmetic on opening: \"A OP B\" (OP one of + - x /) or \"sqrt A\"");
  std::string kind = "activation_gradient";
  cli.add_option("--tensor", o.app.tensor, "the layer to show on opening (fc1, fc2, ... or a module name), once the run has it");
  cli.add_option("--kind", kind, "the tensor kind to show on opening: activation, activation_gradient, weight, weight_gradient")
      ->capture_default_str();
  cli.add_option("--at-step", o.app.settle_at_step, "with --frames: take the frames once the run has done this many steps, while it trains on");
  bool idle = false;
  cli.add_flag("--idle", idle, "open without training anything (by default a window opens on the example, paused at step 0: fp16, no loss scaling)");
  cli.add_flag("--report", o.report, "print frame times and training speed on exit");
  cli.add_option("--ui-scale", o.ui_scale, "size of text and widgets, 0.5 .. 4 (default: the monitor's content scale; Ctrl +/-/0 change it)");
  try {
    cli.parse(argc, argv);
    const auto view = fpscope::gui::parse_view(o.view);
    if (!view) throw CLI::ValidationError("unknown --view '" + fpscope::printable_text(o.view) + "': expected training, histogram, heatmap, curves, what-if, blocks, inspector or export");
    o.app.view = *view;
    // The names fpscope train takes, read by the same functions.
    try {
      o.app.kind = fpscope::parse_tensor_kind(kind);
      if (!target_format.empty()) {
        o.app.format_index = fpscope::gui::target_format_index(target_format);
        if (*o.app.format_index < 0)
          throw std::invalid_argument("--target-format '" + fpscope::printable_text(target_format) +
                                      "': expected fp16, bf16, e4m3, e5m2, e4m3fnuz, e5m2fnuz, e3m2, e2m3 or e2m1 (or another name of one, such as half or float8_e4m3fn)");
      }
      if (!inspect_text.empty() || !inspect_format.empty() || !arithmetic.empty()) {
        fpscope::gui::InspectorState inspector;
        if (!inspect_text.empty()) inspector.text = inspect_text;
        if (!inspect_format.empty()) {
          const int named = fpscope::gui::inspector_format_index(inspect_format);
          if (named >= 0) {
            inspector.detail = named;
          } else {
            (void)fpscope::parse_format(inspect_format);  // throws naming it when it is no format
            inspector.custom = inspect_format;
            inspector.detail = fpscope::gui::inspector_custom_index;
          }
        }
        if (!arithmetic.empty()) {
          std::vector<std::string> words;
          for (std::size_t at = 0; at < arithmetic.size();) {
            const std::size_t end = arithmetic.find(' ', at);
            if (end != at) words.push_back(arithmetic.substr(at, end == std::string::npos ? std::string::npos : end - at));
            if (end == std::string::npos) break;
            at = end + 1;
          }
          static constexpr const char* ops[] = {"+", "-", "x", "/"};
          const auto op = words.size() == 3 ? std::find(std::begin(ops), std::end(ops), words[1]) : std::end(ops);
          if (words.size() == 2 && words[0] == "sqrt") {
            inspector.a = words[1];
            inspector.op = 4;
          } else if (op != std::end(ops)) {
            inspector.a = words[0];
            inspector.b = words[2];
            inspector.op = static_cast<int>(op - std::begin(ops));
          } else {
            throw std::invalid_argument("--arithmetic '" + fpscope::printable_text(arithmetic) + "' is not \"A OP B\" (OP + - x /) or \"sqrt A\"");
          }
        }
        o.app.inspector = inspector;
      }
      o.app.form = fpscope::gui::training_form(fpscope::parse_training_options(training), training);
      using fpscope::gui::slider_max_scale_log2, fpscope::gui::slider_min_scale_log2;
      if (!preview_scale.empty()) {
        const std::optional<int> k = fpscope::gui::slider_power(fpscope::parse_scale_factor(preview_scale), slider_min_scale_log2, slider_max_scale_log2);
        if (!k)
          throw std::invalid_argument(fmt::format("--preview-scale '{}' is not a power of two from 2^{} to 2^{}",
                                                  fpscope::printable_text(preview_scale), slider_min_scale_log2, slider_max_scale_log2));
        o.app.preview_scale_log2 = *k;
      }
    } catch (const std::exception& e) {
      throw CLI::ValidationError(e.what());
    }
    if (!o.export_folder.empty() && o.frames <= 0) throw CLI::ValidationError("--export needs --frames N (N > 0)");
    if (!o.screenshot.empty() && o.frames <= 0) throw CLI::ValidationError("--screenshot needs --frames N (N > 0)");
    if (o.width < 200 || o.height < 150 || o.width > 8192 || o.height > 8192) throw CLI::ValidationError("--width and --height must be 200..8192 and 150..8192");
    if (o.frames < 0) throw CLI::ValidationError("--frames must not be negative");
    if (o.app.settle_at_step < 0) throw CLI::ValidationError("--at-step must not be negative");
    // Headless frames of a run trained here are taken when it ends, or at --at-step: a run told
    // neither would never be pictured.
    if (o.frames > 0 && o.app.start && o.app.form.steps == 0 && o.app.settle_at_step == 0 && o.app.form.pause_at_step == 0)
      throw CLI::ValidationError("--frames with --start needs a step to take them at: --steps N, --at-step N or --pause-at-step N (the run trains until stopped)");
    // A window opened with nothing to show opens the example, paused at step 0; headless runs do only what they are told.
    o.app.example = !idle && o.frames == 0 && o.app.follow.empty() && !o.app.demo && !o.app.start;
    if (cli.count("--ui-scale") > 0 && !(o.ui_scale >= fpscope::gui::min_ui_scale && o.ui_scale <= fpscope::gui::max_ui_scale))
      throw CLI::ValidationError("--ui-scale must be 0.5 .. 4");
    // Headless outputs are checked before a window opens: writable, and none of them the followed log.
    // Each replaces only an earlier file of its kind (`kinds`, beside it).
    std::vector<fpscope::OutputTarget> outputs;
    std::vector<std::function<void(const fpscope::OutputTarget&)>> kinds;
    const auto of_kind = [](fpscope::FileKind kind) { return [kind](const fpscope::OutputTarget& t) { fpscope::check_replaces_only(t, kind); }; };
    try {
      if (!o.screenshot.empty()) {
        outputs.push_back(fpscope::resolve_output(o.screenshot, "--screenshot"));
        kinds.push_back(of_kind(fpscope::FileKind::png));
      }
      if (!o.export_folder.empty()) {
        if (!std::filesystem::is_directory(o.export_folder))
          throw fpscope::OutputError("--export " + fpscope::printable_text(o.export_folder, 200) + " is not a folder");
        const std::pair<const char*, std::function<void(const fpscope::OutputTarget&)>> exports[] = {
            {"run.jsonl", fpscope::check_replaces_only_a_run_log}, {"histograms.csv", of_kind(fpscope::FileKind::csv)},
            {"fpscope-window.png", of_kind(fpscope::FileKind::png)}};
        for (const auto& [name, kind] : exports) {
          outputs.push_back(fpscope::resolve_output(std::filesystem::path(o.export_folder) / name, "--export"));
          kinds.push_back(kind);
        }
      }
      std::vector<std::filesystem::path> inputs;
      if (!o.app.follow.empty()) inputs.emplace_back(o.app.follow);
      fpscope::check_outputs(outputs, inputs);
      for (std::size_t i = 0; i < outputs.size(); ++i) kinds[i](outputs[i]);
    } catch (const fpscope::OutputError& e) {
      throw CLI::ValidationError(e.what());
    }
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fpscope-gui: %s\n", fpscope::printable_text(e.what(), 4096).c_str());
    return 2;
  }
  return run(o);
}
