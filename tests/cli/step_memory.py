"""fpscope train's steps reuse their memory: a step faults in (almost) no fresh pages.

A step allocates its buffers and frees them as it ends. On the training thread, glibc's per-thread
arena would unmap a heap the moment it empties, so that every step faulted all of its buffers in
again -- 6,000 pages a step for this GPT -- work a step on the main thread never does
(keep_step_memory_mapped, training_session.hpp). The pages a step faults in are the difference
between the minor faults of a 13-step and a 3-step run, over 10.

Usage: step_memory.py FPSCOPE"""

import os
import resource
import subprocess
import sys
import tempfile

FPSCOPE = sys.argv[1]
MODEL = ["--model", "gpt:layers=2,width=128,heads=4,context=128", "--batch", "16", "--precision", "bf16", "--backend", "cpu"]
FEW, MANY = 3, 13
BOUND = 256  # pages (1 MiB) a step: the run log's own growth is a few KiB


def minor_faults(steps, threads):
    with tempfile.TemporaryDirectory() as folder:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        subprocess.run([FPSCOPE, "train", *MODEL, "--threads", str(threads), "--steps", str(steps), "--out", os.path.join(folder, "run.jsonl")],
                       check=True, capture_output=True)
        return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before


failed = False
for threads in (1, 2):
    per_step = (minor_faults(MANY, threads) - minor_faults(FEW, threads)) / (MANY - FEW)
    ok = per_step < BOUND
    failed |= not ok
    print(f"{'ok' if ok else 'FAIL'}: {threads} thread(s): {per_step:.0f} fresh pages a step (bound {BOUND})")
sys.exit(1 if failed else 0)
