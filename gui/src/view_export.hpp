// The Export view and the saves it runs (also headless, `fpscope-gui --export DIR`).
#pragma once

#include <filesystem>
#include <string>
#include "export_job.hpp"
#include "fpscope/snapshot/output_file.hpp"

namespace fpscope::gui {

class App;

void draw_export(App& app);

// The Export view's saves, as work for an ExportJob (each says in one sentence what it did or why
// it could not): what the save needs is copied now (shared snapshots, the
// header, the step records), so the app may go on changing while it runs.
ExportJob::Work run_log_saver(const App& app, const std::string& folder);
ExportJob::Work histograms_csv_saver(const App& app, const std::string& folder);
// `fpscope-gui --export DIR`: run.jsonl, histograms.csv and fpscope-window.png (`window_png`, the
// frame's bytes) into `folder`, all three or none (write_outputs); the sentence saying so, or
// throws naming what could not be written.
std::string export_folder_whole(const App& app, const std::string& folder, const std::string& window_png);
// The PNG a view saves into the export folder: fpscope-<view>.png.
std::string view_png_path(const App& app);
// A PNG of the window at `path`: resolved, checked against the files the app reads (the followed
// log: no export may overwrite one) and to replace only an earlier PNG; throws OutputError.
OutputTarget export_target(const App& app, const std::filesystem::path& path);

}  // namespace fpscope::gui
