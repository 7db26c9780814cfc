// What drawing a frame costs in processor time, for the frame pacing (main.cpp): the drawing
// thread's own CPU time plus that of software GL's render threads, which do the rasterising out of
// the drawing thread's sight (Mesa's llvmpipe, one per core: a frame's wall time there is well
// below the core time it takes). Hardware GL has no such threads.
#pragma once

namespace fpscope::gui {

// CPU seconds used so far by the calling thread and the process's software-GL render threads
// (Linux: /proc/self/task; elsewhere the calling thread alone).
double drawing_cpu_seconds();

}  // namespace fpscope::gui
