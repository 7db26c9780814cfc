// Drawing's CPU time (drawing_cost.hpp).
#include "drawing_cost.hpp"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#if defined(__linux__)
#include <unistd.h>
#endif

namespace fpscope::gui {

namespace {

double thread_cpu_seconds() {
  timespec now{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) != 0) return 0;
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

#if defined(__linux__)
// User and system time of the tasks named llvmpipe-N, from their stat lines (fields 14 and 15,
// after the parenthesised name), in clock ticks.
double render_threads_cpu_seconds() {
  static const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  double seconds = 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name.rfind("llvmpipe", 0) != 0) continue;
    std::ifstream stat_file(task.path() / "stat");
    const std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));  // from field 3, the state
    std::string field;
    double utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stod(field);
      if (i == 15) stime = std::stod(field);
    }
    seconds += (utime + stime) / ticks_per_second;
  }
  return seconds;
}
#else
double render_threads_cpu_seconds() { return 0; }
#endif

}  // namespace

double drawing_cpu_seconds() { return thread_cpu_seconds() + render_threads_cpu_seconds(); }

}  // namespace fpscope::gui
