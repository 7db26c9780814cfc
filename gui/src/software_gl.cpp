// LP_NUM_THREADS for Mesa's software rasteriser (software_gl.hpp).
#include "software_gl.hpp"

#include <cstdlib>
#include <thread>

namespace fpscope::gui {

void choose_software_gl_threads(bool trains_here) {
  if (trains_here && std::thread::hardware_concurrency() <= 4) setenv("LP_NUM_THREADS", "1", 0);
}

}  // namespace fpscope::gui
