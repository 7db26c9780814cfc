// ExportJob: std::async with a future per save.
#include "export_job.hpp"

#include <exception>

namespace fpscope::gui {

ExportJob::~ExportJob() {
  if (result_.valid()) result_.wait();
}

bool ExportJob::start(std::string what, Work work) {
  if (busy()) return false;
  what_ = std::move(what);
  started_ = std::chrono::steady_clock::now();
  progress_ = std::make_shared<std::atomic<double>>(0.0);
  result_ = std::async(std::launch::async, [work = std::move(work), progress = progress_]() -> std::string {
    try {
      return work([&progress](double share) { progress->store(share); });
    } catch (const std::exception& e) {
      return e.what();
    }
  });
  return true;
}

bool ExportJob::busy() const { return result_.valid() && result_.wait_for(std::chrono::seconds(0)) != std::future_status::ready; }

double ExportJob::seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count(); }

std::optional<std::string> ExportJob::take_result() {
  if (!result_.valid() || busy()) return std::nullopt;
  return result_.get();
}

}  // namespace fpscope::gui
