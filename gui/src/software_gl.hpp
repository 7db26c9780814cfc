// How many threads Mesa's software rasteriser (llvmpipe: Xvfb, machines without a GPU driver)
// renders on: LP_NUM_THREADS, read when the first OpenGL context is made; hardware drivers ignore
// it, and a value the user set stands.
#pragma once

namespace fpscope::gui {

// A window that trains here, on a machine of 4 processors or fewer: one render thread (Mesa's
// default is one per processor, which took the cores the engine's pool trains on: a GPT trained at
// 0.70x its headless speed beside them, 0.90x beside one). A window that follows a log trains
// nothing: Mesa's default, every processor, so that its frames (the drawing thread waits for the
// rasteriser at every swap) come sooner. Call before the window is made.
void choose_software_gl_threads(bool trains_here);

}  // namespace fpscope::gui
