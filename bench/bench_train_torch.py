"""The CPU backend's training step beside PyTorch's for the same model and batch, as ratios
(fpscope / PyTorch; below 1 is faster), with the machine's load average before and after each
model's rounds: build/bench/bench_train_step times fpscope with THREADS
threads, this script times torch -- fp32, and bf16 under torch.autocast("cpu") -- on a
784-1024-1024-10 relu MLP at batch 256 (SGD) and a GPT of 4 layers x 256 wide x context 128 at
batch 8 (AdamW; the model of tests/gpu/gpt_vs_torch.py). Debian's torch runs its products in
OpenBLAS, whose threads torch.set_num_threads does not reach, so torch is timed in a fresh process
for every pairing of torch threads and OpenBLAS threads from {1, THREADS}, and its fastest pairing
is the baseline (printed). Three rounds alternate fpscope and torch, each side's time its median
over the rounds, the pairing the one with the lowest median (the machine's timings drift by a
fifth between processes). The headline ratio is the median of the rounds' ratios (each round's two
sides measured within a minute of each other, so that drift between rounds cancels), the ratio of
the two medians beside it. fp16 mixed is held to torch fp32 (torch has no fp16 CPU
autocast worth timing); recording every step, and every 10th, to the same fp16 trainer unrecorded,
the two stepping in turns in one process: the median over the rounds of the median ratio of
windows of one step (every step) or ten (every 10th, its first recorded), means beside it.

Usage: bench_train_torch.py [BUILD_DIR] [THREADS] [ROUNDS (default 5)]"""

import os
import platform
import statistics
import subprocess
import sys
import time

# A torch timing run: --torch KIND TORCH_THREADS BLAS_THREADS; OpenBLAS reads its count at load.
if len(sys.argv) == 6 and sys.argv[1] == "--torch":
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = sys.argv[4]
    os.environ["OMP_NUM_THREADS"] = sys.argv[3]

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "gpu"))
from gpt_vs_torch import Gpt  # noqa: E402

STEPS = 10
ROUNDS = int(sys.argv[3]) if len(sys.argv) == 4 and sys.argv[1] != "--torch" else 5


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


def torch_times(kind, with_bf16=True):
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
    times = {"fp32": torch_step_ms(model, make(), inputs, targets, False)}
    if with_bf16:
        times["bf16"] = torch_step_ms(model, make(), inputs, targets, True)
    return times


def torch_rounds(kind, threads):
    """One round of torch timings: every pairing of torch and OpenBLAS threads, fp32 and bf16
    autocast (bf16 autocast takes seconds a step on processors without AVX-512 BF16)."""
    def run(torch_threads, blas_threads):
        out = subprocess.run([sys.executable, __file__, "--torch", kind, str(torch_threads), str(blas_threads), "bf16"],
                             check=True, capture_output=True, text=True).stdout
        return {name: float(ms) for name, ms in (line.split() for line in out.splitlines())}
    pairings = [(t, b) for t in sorted({1, threads}) for b in sorted({1, threads})]
    return {pairing: run(*pairing) for pairing in pairings}


def fastest_torch(rounds):
    """torch's pairing with the lowest median over the rounds, for fp32 and separately for bf16, and
    that median: the fastest pairing by its typical time, not by its luckiest (a minimum over four
    noisy runs would sit below any one of them)."""
    best = {}
    for name in ("fp32", "bf16"):
        medians = {pairing: statistics.median(r[pairing][name] for r in rounds) for pairing in rounds[0]}
        fastest = min(medians, key=medians.get)
        best[name] = (medians[fastest], f"torch {fastest[0]} / OpenBLAS {fastest[1]} threads", [r[fastest][name] for r in rounds])
    return best


def fpscope_times(build, model, batch, threads):
    out = subprocess.run([os.path.join(build, "bench", "bench_train_step"), model, str(batch), str(threads), str(STEPS)],
                         check=True, capture_output=True, text=True).stdout
    return {name: float(ms) for name, ms in (line.split() for line in out.splitlines())}


def load_average():
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def main():
    if sys.argv[1:2] == ["--torch"]:
        torch.set_num_threads(int(sys.argv[3]))
        for name, ms in torch_times(sys.argv[2], sys.argv[5] == "bf16").items():
            print(name, f"{ms:.3f}")
        return
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores; fpscope on {threads} threads, torch {torch.__version__} "
          f"at its fastest pairing of torch and OpenBLAS threads from {{1, {threads}}}; each side's median over {ROUNDS} "
          f"alternating rounds of a median of {STEPS} steps")
    for kind, model, batch in (("mlp", "784-1024-1024-10", 256), ("gpt", "gpt:layers=4,width=256,heads=4,context=128", 8)):
        # Rounds alternate fpscope and torch, so that the machine's drift falls on both; each side
        # is its median over the rounds, each ratio the median of the rounds' ratios.
        load_before = load_average()
        our_rounds, their_rounds = [], []
        for round_index in range(ROUNDS):
            # Each side first in every other round: a steady drift within rounds falls on both.
            if round_index % 2 == 0:
                our_rounds.append(fpscope_times(build, model, batch, threads))
                their_rounds.append(torch_rounds(kind, threads))
            else:
                their_rounds.append(torch_rounds(kind, threads))
                our_rounds.append(fpscope_times(build, model, batch, threads))
        ours = {name: statistics.median(r[name] for r in our_rounds) for name in our_rounds[0]}
        best = fastest_torch(their_rounds)
        theirs = {name: ms for name, (ms, _, _) in best.items()}
        spread = {name: [o[name] / t for o, t in zip(our_rounds, best[name][2])] for name in ("fp32", "bf16")}
        spread["fp16"] = [o["fp16"] / t for o, t in zip(our_rounds, best["fp32"][2])]
        paired = {name: statistics.median(ratios) for name, ratios in spread.items()}
        print(f"\n{model} at batch {batch} (ratio: the median of the rounds' ratios; the ratio of the medians in brackets; "
              f"before its rounds {load_before}, after them {load_average()}):")
        print(f"  fp32 step          fpscope {ours['fp32']:8.2f} ms   torch fp32 {theirs['fp32']:8.2f} ms ({best['fp32'][1]})   "
              f"{paired['fp32']:.2f}x ({ours['fp32'] / theirs['fp32']:.2f}x)")
        print(f"  bf16 mixed step    fpscope {ours['bf16']:8.2f} ms   torch bf16 autocast {theirs['bf16']:8.2f} ms ({best['bf16'][1]})   "
              f"{paired['bf16']:.2f}x ({ours['bf16'] / theirs['bf16']:.2f}x)")
        print(f"  fp16 mixed step    fpscope {ours['fp16']:8.2f} ms   torch fp32 {theirs['fp32']:8.2f} ms   "
              f"{paired['fp16']:.2f}x ({ours['fp16'] / theirs['fp32']:.2f}x)")
        print("  round by round: " + ", ".join(name + " " + " ".join(f"{x:.2f}x" for x in spread[name]) for name in ("fp32", "bf16", "fp16")))
        print(f"  bf16 products in oneDNN's bf16 kernels: {100 * ours['bf16_kernel_share']:.0f}%; float32 products in "
              + ("oneDNN's sgemm" if ours["float32_in_onednn"] else "OpenBLAS")
              + (f" (the fp32 step in OpenBLAS: {ours['fp32_openblas']:.2f} ms, {ours['fp32_openblas'] / theirs['fp32']:.2f}x torch fp32)"
                 if "fp32_openblas" in ours else ""))
        # The recording costs: the median over the rounds of each round's median window ratio
        # (bench_train_step: windows of one step, and of ten with the first recorded).
        print(f"  recording every tensor every step: {ours['fp16_recording']:8.2f} ms against {ours['fp16_beside_recording']:8.2f} ms "
              f"unrecorded (means), {100 * (ours['fp16_recording_ratio'] - 1):+.1f}% (rounds "
              + " ".join(f"{100 * (r['fp16_recording_ratio'] - 1):+.1f}%" for r in our_rounds) + "); every 10th step: "
              f"{ours['fp16_recording_every_10']:8.2f} ms against {ours['fp16_beside_every_10']:8.2f} ms, "
              f"{100 * (ours['fp16_recording_every_10_ratio'] - 1):+.1f}% (rounds "
              + " ".join(f"{100 * (r['fp16_recording_every_10_ratio'] - 1):+.1f}%" for r in our_rounds)
              + "; medians of the ratios of windows of ten steps, the two trainers stepping in turns)")


if __name__ == "__main__":
    main()
