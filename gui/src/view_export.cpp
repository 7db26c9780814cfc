// Export view: save the run log, the histograms as tidy CSV, or a PNG of the window.
#include <fmt/core.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <filesystem>

#include "app.hpp"
#include "ui_scale.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/run_log.hpp"

namespace fpscope::gui {

namespace {

std::vector<Snapshot> copies(const App& app) {
  std::vector<Snapshot> out;
  out.reserve(app.snapshots.size());
  for (const auto& s : app.snapshots) out.push_back(*s);
  return out;
}

}  // namespace

OutputTarget export_target(const App& app, const std::filesystem::path& path) {
  const OutputTarget target = resolve_output(path);
  std::vector<std::filesystem::path> inputs;
  if (app.follower) inputs.push_back(app.follower->path());
  check_outputs({&target, 1}, inputs);
  return target;
}

std::string export_run_log(const App& app, const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder.empty() ? "." : folder) / "run.jsonl";
  if (app.snapshots.empty()) return "nothing to save yet: no recorded steps";
  try {
    // A followed log is saved as it was read, byte for byte (fields fpscope does not know kept);
    // a run trained here is written from its snapshots.
    const OutputTarget target = export_target(app, path);
    if (app.follower) write_output(target, app.follower->bytes_read());
    else write_run_log(target, RunLog{app.header, app.steps, copies(app), {}});
    return fmt::format("saved {} snapshots to {}", app.snapshots.size(), path.string());
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string export_histograms_csv(const App& app, const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder.empty() ? "." : folder) / "histograms.csv";
  if (app.snapshots.empty()) return "nothing to save yet: no recorded steps";
  try {
    write_output(export_target(app, path), histograms_csv(copies(app)));
    return "saved " + path.string();
  } catch (const std::exception& e) {
    return e.what();
  }
}

void draw_export(App& app) {
  ImGui::TextUnformatted("Files are written whole (a temporary file, then a rename): an existing file is replaced only by a complete one.");
  ImGui::SetNextItemWidth(px(420));
  ImGui::InputText("folder", &app.export_folder);
  const std::filesystem::path folder = app.export_folder.empty() ? std::filesystem::path(".") : std::filesystem::path(app.export_folder);
  const bool have_run = !app.snapshots.empty();
  if (!have_run) ImGui::TextDisabled("No run yet: the run log and CSV need recorded steps; the window PNG works any time.");
  ImGui::BeginDisabled(!have_run);
  if (ImGui::Button("Save run log (run.jsonl)")) app.export_message = export_run_log(app, app.export_folder);
  ImGui::SameLine();
  if (ImGui::Button("Save histograms (histograms.csv)")) app.export_message = export_histograms_csv(app, app.export_folder);
  ImGui::EndDisabled();
  ImGui::SameLine();
  if (ImGui::Button("Save a PNG of the window (fpscope-window.png)")) {
    if (!std::filesystem::is_directory(folder)) app.export_message = "cannot save into " + folder.string() + ": not a folder";
    else app.pending_window_png = (folder / "fpscope-window.png").string();
  }
  if (!app.export_message.empty()) ImGui::TextWrapped("%s", app.export_message.c_str());
  ImGui::Separator();
  ImGui::TextDisabled("The CLI reads what this saves: fpscope analyze run.jsonl, fpscope export run.jsonl --png plot.png.");
  if (have_run) ImGui::Text("%zu snapshots, %zu layers; header: %s, %s, %s", app.snapshots.size(), app.tensor_names.size(),
                            app.header.model.c_str(), app.header.precision.c_str(), app.header.scaler.c_str());
}

}  // namespace fpscope::gui
