"""The CPU backend's training step beside PyTorch's for the same model, batch and thread count, as
ratios (fpscope / PyTorch; below 1 is faster): build/bench/bench_train_step times fpscope, this
script times torch -- fp32, and bf16 under torch.autocast("cpu") -- on a 784-1024-1024-10 relu MLP
at batch 256 (SGD) and a GPT of 4 layers x 256 wide x context 128 at batch 8 (AdamW; the model of
tests/gpu/gpt_vs_torch.py). fp16 mixed is held to torch fp32 (torch has no fp16 CPU autocast
worth timing), recording to the unrecorded fp16 step.

Usage: bench_train_torch.py [BUILD_DIR] [THREADS]"""

import os
import platform
import statistics
import subprocess
import sys
import time

# The thread count before torch loads: Debian's torch runs its products in OpenBLAS, whose own
# threads torch.set_num_threads does not reach (left alone they oversubscribe the cores).
THREADS = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count()
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(THREADS)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpu"))
from gpt_vs_torch import Gpt  # noqa: E402

STEPS = 10


def torch_step_ms(model, optimizer, inputs, targets, autocast):
    times = []
    for step in range(STEPS + 2):
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(inputs)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step >= 2:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def torch_times(kind):
    torch.manual_seed(0)
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                    torch.nn.Linear(1024, 10))
        inputs, targets = torch.randn(256, 784), torch.randint(0, 10, (256,))
        make = lambda: torch.optim.SGD(model.parameters(), lr=0.01)  # noqa: E731
    else:
        model = Gpt(4, 256, 4, 128, 256)
        inputs, targets = torch.randint(0, 256, (8, 128)), torch.randint(0, 256, (8, 128))
        make = lambda: torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)  # noqa: E731
    return {"fp32": torch_step_ms(model, make(), inputs, targets, False), "bf16": torch_step_ms(model, make(), inputs, targets, True)}


def fpscope_times(build, model, batch, threads):
    out = subprocess.run([os.path.join(build, "bench", "bench_train_step"), model, str(batch), str(threads), str(STEPS)],
                         check=True, capture_output=True, text=True).stdout
    return {name: float(ms) for name, ms in (line.split() for line in out.splitlines())}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    threads = THREADS
    torch.set_num_threads(threads)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {threads} threads for both; torch {torch.__version__}; "
          f"median of {STEPS} steps")
    for kind, model, batch in (("mlp", "784-1024-1024-10", 256), ("gpt", "gpt:layers=4,width=256,heads=4,context=128", 8)):
        ours = fpscope_times(build, model, batch, threads)
        theirs = torch_times(kind)
        print(f"\n{model} at batch {batch}:")
        print(f"  fp32 step          fpscope {ours['fp32']:8.2f} ms   torch fp32 {theirs['fp32']:8.2f} ms   {ours['fp32'] / theirs['fp32']:.2f}x")
        print(f"  bf16 mixed step    fpscope {ours['bf16']:8.2f} ms   torch bf16 autocast {theirs['bf16']:8.2f} ms   "
              f"{ours['bf16'] / theirs['bf16']:.2f}x")
        print(f"  fp16 mixed step    fpscope {ours['fp16']:8.2f} ms   torch fp32 {theirs['fp32']:8.2f} ms   {ours['fp16'] / theirs['fp32']:.2f}x")
        print(f"  recording every tensor every step: {ours['fp16_recording']:8.2f} ms, +{100 * (ours['fp16_recording'] / ours['fp16'] - 1):.1f}% "
              f"over the fp16 step; every 10th step: {ours['fp16_recording_every_10']:8.2f} ms, "
              f"+{100 * (ours['fp16_recording_every_10'] / ours['fp16'] - 1):.1f}%")


if __name__ == "__main__":
    main()
