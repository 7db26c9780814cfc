// Keeping the heap's freed memory for the next step: a training step allocates and frees the same
// large tensors every time, and glibc by default returns blocks of more than 128 KiB to the kernel
// (mmap / trim), so every step paid for its page faults again (15% of a GPT step on the CPU).
// The trainers call this once per process; it raises glibc's mmap threshold to its largest (32 MiB
// on 64-bit) and the trim threshold to 1 GiB. Elsewhere than glibc it does nothing.
#pragma once

namespace fpscope {

void keep_training_memory();

}  // namespace fpscope
