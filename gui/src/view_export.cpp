// Export view: save the run log, the histograms as tidy CSV, or a PNG of the window.
#include <fmt/core.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "app.hpp"
#include "flow_layout.hpp"
#include "ui_scale.hpp"
#include "wrapped_text.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/run_log.hpp"

namespace fpscope::gui {

namespace {

std::vector<Snapshot> copies(const std::vector<std::shared_ptr<const Snapshot>>& snapshots) {
  std::vector<Snapshot> out;
  out.reserve(snapshots.size());
  for (const auto& s : snapshots) out.push_back(*s);
  return out;
}

// `path` resolved, checked against the followed log (no export may overwrite it), and by
// `replaces_only` (an export replaces only an earlier file of its kind).
OutputTarget checked_target(const std::filesystem::path& path, const std::optional<std::filesystem::path>& followed,
                            const std::function<void(const OutputTarget&)>& replaces_only) {
  const OutputTarget target = resolve_output(path);
  std::vector<std::filesystem::path> inputs;
  if (followed) inputs.push_back(*followed);
  check_outputs({&target, 1}, inputs);
  replaces_only(target);
  return target;
}
auto of_kind(FileKind kind) {
  return [kind](const OutputTarget& target) { check_replaces_only(target, kind); };
}

std::optional<std::filesystem::path> followed_path(const App& app) {
  if (app.follower) return app.follower->path();
  return std::nullopt;
}

}  // namespace

OutputTarget export_target(const App& app, const std::filesystem::path& path) { return checked_target(path, followed_path(app), of_kind(FileKind::png)); }

std::string export_folder_whole(const App& app, const std::string& folder, const std::string& window_png) {
  const std::filesystem::path base = folder.empty() ? "." : folder;
  if (app.snapshots.empty()) throw OutputError("nothing to save into " + base.string() + " yet: no recorded steps");
  const std::optional<std::filesystem::path> followed = followed_path(app);
  const std::vector<OutputTarget> targets{checked_target(base / "run.jsonl", followed, check_replaces_only_a_run_log),
                                          checked_target(base / "histograms.csv", followed, of_kind(FileKind::csv)),
                                          checked_target(base / "fpscope-window.png", followed, of_kind(FileKind::png))};
  const std::string log = app.follower ? app.follower->bytes_read() : run_log_text(RunLog{app.header, app.steps, copies(app.snapshots), {}});
  const std::string csv = histograms_csv(copies(app.snapshots));
  const std::vector<std::string_view> contents{log, csv, window_png};
  write_outputs(targets, contents);
  return fmt::format("saved run.jsonl ({} snapshots), histograms.csv and fpscope-window.png into {}", app.snapshots.size(), base.string());
}

ExportJob::Work run_log_saver(const App& app, const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder.empty() ? "." : folder) / "run.jsonl";
  if (app.snapshots.empty()) return [](const auto&) { return std::string("nothing to save yet: no recorded steps"); };
  // A followed log is saved as it was read, byte for byte (fields fpscope does not know kept);
  // a run trained here is written from its snapshots.
  return [path, followed = followed_path(app), follower = app.follower.get(), header = app.header, steps = app.steps,
          snapshots = app.snapshots](const std::function<void(double)>& progress) -> std::string {
    try {
      const OutputTarget target = checked_target(path, followed, check_replaces_only_a_run_log);
      if (follower != nullptr) write_output(target, follower->bytes_read());
      else write_run_log(target, RunLog{header, steps, copies(snapshots), {}}, progress);
      return fmt::format("saved {} snapshots to {}", snapshots.size(), path.string());
    } catch (const std::exception& e) {
      return e.what();
    }
  };
}

ExportJob::Work histograms_csv_saver(const App& app, const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder.empty() ? "." : folder) / "histograms.csv";
  if (app.snapshots.empty()) return [](const auto&) { return std::string("nothing to save yet: no recorded steps"); };
  return [path, followed = followed_path(app), snapshots = app.snapshots](const std::function<void(double)>&) -> std::string {
    try {
      write_output(checked_target(path, followed, of_kind(FileKind::csv)), histograms_csv(copies(snapshots)));
      return "saved " + path.string();
    } catch (const std::exception& e) {
      return e.what();
    }
  };
}


std::string view_png_path(const App& app) {
  const std::filesystem::path folder = app.export_folder.empty() ? std::filesystem::path(".") : std::filesystem::path(app.export_folder);
  return (folder / ("fpscope-" + std::string(view_name(app.view)) + ".png")).string();
}

void draw_export(App& app) {
  ImGui::TextWrapped("Files are written whole (a temporary file, then a rename): an existing file is replaced only by a complete one.");
  ImGui::SetNextItemWidth(px(420));
  ImGui::InputText("folder", &app.export_folder);
  const std::filesystem::path folder = app.export_folder.empty() ? std::filesystem::path(".") : std::filesystem::path(app.export_folder);
  const bool have_run = !app.snapshots.empty();
  if (!have_run) text_disabled_wrapped("No run yet: the run log and CSV need recorded steps; the window PNG works any time.");
  if (auto result = app.export_job.take_result()) app.export_message = *result;
  const bool saving = app.export_job.busy();
  ImGui::BeginDisabled(!have_run || saving);
  if (ImGui::Button("Save run log (run.jsonl)")) app.export_job.start("run.jsonl", run_log_saver(app, app.export_folder));
  same_line_if_room(button_width("Save histograms (histograms.csv)"));
  if (ImGui::Button("Save histograms (histograms.csv)")) app.export_job.start("histograms.csv", histograms_csv_saver(app, app.export_folder));
  ImGui::EndDisabled();
  same_line_if_room(button_width("Save a PNG of the window (fpscope-window.png)"));
  if (ImGui::Button("Save a PNG of the window (fpscope-window.png)")) {
    if (!std::filesystem::is_directory(folder)) app.export_message = "cannot save into " + folder.string() + ": not a folder";
    else app.pending_window_png = (folder / "fpscope-window.png").string();
  }
  if (saving) {
    ImGui::TextWrapped("saving %s in the background: %.1f s so far (the window stays live; quitting waits for it)", app.export_job.what().c_str(),
                       app.export_job.seconds());
    const double done = app.export_job.progress();
    if (done > 0) ImGui::ProgressBar(static_cast<float>(done), ImVec2(px(420), 0));  // a share the save reported
  }
  else if (!app.export_message.empty())
    ImGui::TextWrapped("%s", app.export_message.c_str());
  text_disabled_wrapped("Every view has a PNG button at the right of the tabs: it saves the window as it shows that view, as %s.",
                        view_png_path(app).c_str());
  ImGui::Separator();
  text_disabled_wrapped("The CLI reads what this saves: fpscope analyze run.jsonl, fpscope export run.jsonl --png plot.png.");
  if (have_run) ImGui::TextWrapped("%zu snapshots, %zu layers; header: %s, %s, %s", app.snapshots.size(), app.tensor_names.size(),
                            app.header.model.c_str(), app.header.precision.c_str(), app.header.scaler.c_str());
}

}  // namespace fpscope::gui
