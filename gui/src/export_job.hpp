// ExportJob: a save (run log, CSV) on its own thread, so that writing an 84 MB log never holds up
// a frame; the Export view shows what is being saved and for how long, then the job's sentence.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>

namespace fpscope::gui {

class ExportJob {
 public:
  ExportJob() = default;
  ~ExportJob();  // waits for a save under way: a file is never left half-written by quitting
  ExportJob(const ExportJob&) = delete;
  ExportJob& operator=(const ExportJob&) = delete;

  // What a save does: returns one sentence saying what it did or why it could not, and reports the
  // share done (0 .. 1) through the function it is given where it can tell.
  using Work = std::function<std::string(const std::function<void(double)>& progress)>;
  // Runs `work` on its own thread. Returns false, doing nothing, while another save runs.
  bool start(std::string what, Work work);
  bool busy() const;
  const std::string& what() const { return what_; }
  double seconds() const;
  double progress() const { return progress_->load(); }  // 0 until the save reports
  // The finished save's sentence, once; nothing while it runs or when there was none.
  std::optional<std::string> take_result();

 private:
  std::future<std::string> result_;
  std::shared_ptr<std::atomic<double>> progress_ = std::make_shared<std::atomic<double>>(0.0);
  std::string what_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace fpscope::gui
