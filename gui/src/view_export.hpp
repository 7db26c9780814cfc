// The Export view and the saves it runs (also headless, `fpscope-gui --export DIR`).
#pragma once

#include <filesystem>
#include <string>
#include "export_job.hpp"
#include "fpscope/snapshot/output_file.hpp"

namespace fpscope::gui {

class App;

void draw_export(App& app);

// The Export view's actions, also run by `fpscope-gui --export DIR` once a headless run settles.
// Each returns one sentence saying what it did or why it could not.
std::string export_run_log(const App& app, const std::string& folder);
std::string export_histograms_csv(const App& app, const std::string& folder);
// The same as work for an ExportJob: what the save needs is copied now (shared snapshots, the
// header, the step records), so the app may go on changing while it runs.
ExportJob::Work run_log_saver(const App& app, const std::string& folder);
ExportJob::Work histograms_csv_saver(const App& app, const std::string& folder);
// The PNG a view saves into the export folder: fpscope-<view>.png.
std::string view_png_path(const App& app);
// A PNG of the window at `path`: resolved, checked against the files the app reads (the followed
// log: no export may overwrite one) and to replace only an earlier PNG; throws OutputError.
OutputTarget export_target(const App& app, const std::filesystem::path& path);

}  // namespace fpscope::gui
