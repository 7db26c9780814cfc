"""The command a user runs, `fpscope train` with its defaults (tanh MLP or GPT, the embedded
synthetic data, a snapshot recorded every step, the run log written), per step, beside a PyTorch
script doing the same training the way a user writes it: the same model and activation, its batch
drawn in the loop (torch.randn / torch.randint), the loss read every step (loss.item(), as a loop
that logs it does), on the same number of threads. Ratios fpscope / PyTorch (below 1: fpscope is
faster) on one thread and on all cores, fp32 and bf16 mixed (torch.autocast("cpu", bfloat16)),
for the MLP 784-1024-1024-10 at batch 256 and the GPT of 4 layers x 256 wide x context 128 at
its default batch of 16.

A step's time, on both sides the mean of steps 11 to 60 (the time the loop spends on them, over
50), which leaves out start-up and the first steps' warm-up: fpscope's is (the wall time of a
60-step run - that of a 10-step run) / 50; PyTorch's is the sum of its loop's steps 11 to 60
over 50 (its start-up and import outside). ROUNDS rounds alternate the two sides, each
configuration's ratio the median of the rounds' ratios. The bare steps (a fixed batch, relu, no
recording: bench/bench_train_torch.py's comparison, bench_train_step against torch_times) are
timed beside them, once a round, their ratio the median of the rounds' ratios. The machine's
load average is printed before and after. Beside the bare ratio, its floor: the bare step's
products (their multiply-adds, counted) at the cores' peak rate for the instruction they run on
(measured by bench_train_step), over torch's bare step -- no step doing those products can go
below it.

Usage: bench_train_command.py [BUILD_DIR (default build)] [ROUNDS (default 3)] [KIND:PRECISION:THREADS ...]
Configurations named (mlp:fp32:1, gpt:bf16:2, ...) are the only ones timed, without their bare
steps (on a processor without AVX512-BF16, torch's bf16 autocast takes seconds a step).
Run it with the torch users run (scripts/test-torch's venv): Debian's torch 1.13 has no fast bf16
path on CPU."""

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

MLP = ("784-1024-1024-10", 256)
GPT = ("gpt:layers=4,width=256,heads=4,context=128", 16)
LONG, SHORT = 60, 10


def torch_loop_ms(kind, precision, threads):
    """PyTorch's per-step time for the user's loop, in a fresh process on `threads` threads."""
    code = f"""
import os, sys, time, statistics
import torch, torch.nn.functional as F
torch.set_num_threads({threads})
sys.path.insert(0, {os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'gpu')!r})
torch.manual_seed(1)
if {kind!r} == "mlp":
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.Tanh(), torch.nn.Linear(1024, 1024), torch.nn.Tanh(),
                                torch.nn.Linear(1024, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=16384.0)
    weight = 2.0 ** -14  # fpscope train's default loss weight, undone by its learning rate
    def batch():
        return torch.randn(256, 784), torch.randint(0, 10, (256,))
else:
    from gpt_vs_torch import Gpt
    model = Gpt(4, 256, 4, 128, 256)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
    weight = 1.0
    def batch():
        tokens = torch.randint(0, 256, (16, 129))
        return tokens[:, :-1], tokens[:, 1:]
times = []
for step in range({LONG}):
    start = time.perf_counter()
    inputs, targets = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled={precision == 'bf16'}):
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    optimizer.zero_grad()
    (loss * weight).backward()
    optimizer.step()
    loss.item()
    if step >= {SHORT}:
        times.append(time.perf_counter() - start)
print(statistics.mean(times) * 1000)
"""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout)


def fpscope_command_ms(build, model, batch, precision, threads):
    """fpscope train's per-step time: the 60-step run's wall time less the 10-step run's, over 50."""
    def wall(steps):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            subprocess.run([os.path.join(build, "cli", "fpscope"), "train", "--model", model, "--batch", str(batch), "--precision", precision,
                            "--backend", "cpu", "--threads", str(threads), "--steps", str(steps), "--out", os.path.join(folder, "run.jsonl")],
                           check=True, capture_output=True)
            return time.perf_counter() - start
    return (wall(LONG) - wall(SHORT)) / (LONG - SHORT) * 1000


def bare_ratios(build, kind, threads):
    """The bare step (fixed batch, relu, unrecorded) beside torch's: bench_train_torch.py's pairing."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_train_torch as bare  # noqa: E402 (its helpers; importing runs nothing)
    model, batch = ("784-1024-1024-10", 256) if kind == "mlp" else ("gpt:layers=4,width=256,heads=4,context=128", 8)
    ours = bare.fpscope_times(build, model, batch, threads)
    code = (f"import sys; sys.argv = ['x']; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import torch; torch.set_num_threads({threads}); import bench_train_torch as b; t = b.torch_times({kind!r}); "
            "print(t['fp32'], t['bf16'])")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    fp32, bf16 = map(float, subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout.split())
    # The floor under any bare step: its products' multiply-adds at the cores' measured peak for the
    # instruction they run on (bench_train_step), every core busy, nothing else done.
    floor = {name: 2 * ours["multiply_adds_per_step"] / (ours[f"{name}_peak_gflops"] * 1e9 * threads) * 1e3 if ours[f"{name}_peak_gflops"] else 0.0
             for name in ("fp32", "bf16")}
    return {"fp32": (ours["fp32"], fp32, floor["fp32"]), "bf16": (ours["bf16"], bf16, floor["bf16"])}


def load():
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    named = set(sys.argv[3:])
    import torch
    cores = os.cpu_count()
    print(f"{platform.processor() or platform.machine()}, {cores} cores, torch {torch.__version__}; {rounds} alternating rounds; "
          f"{load()} before")
    print(f"{'configuration':44} {'fpscope train':>14} {'torch loop':>11} {'ratio':>6}   {'bare step':>9} {'torch':>8} {'ratio':>6} "
          f"{'floor':>6}   rounds   (floor: the bare step's products at the cores' peak, over torch's bare step)")
    for threads in sorted({1, cores}):
        for kind, (model, batch) in (("mlp", MLP), ("gpt", GPT)):
            wanted = [p for p in ("fp32", "bf16") if not named or f"{kind}:{p}:{threads}" in named]
            if not wanted:
                continue
            bare_rounds = [] if named else [bare_ratios(build, kind, threads) for _ in range(rounds)]
            for precision in wanted:
                ours, theirs, ratios = [], [], []
                for r in range(rounds):
                    pair = [lambda: fpscope_command_ms(build, model, batch, precision, threads), lambda: torch_loop_ms(kind, precision, threads)]
                    if r % 2:
                        theirs_ms, ours_ms = pair[1](), pair[0]()
                    else:
                        ours_ms, theirs_ms = pair[0](), pair[1]()
                    ours.append(ours_ms)
                    theirs.append(theirs_ms)
                    ratios.append(ours_ms / theirs_ms)
                name = f"{kind.upper()} {precision}, {threads} thread{'s' if threads > 1 else ''}, batch {batch}"
                line = f"{name:44} {statistics.median(ours):11.2f} ms {statistics.median(theirs):8.2f} ms {statistics.median(ratios):5.2f}x   "
                if bare_rounds:
                    bare_ours = statistics.median(r[precision][0] for r in bare_rounds)
                    bare_theirs = statistics.median(r[precision][1] for r in bare_rounds)
                    bare = [r[precision][0] / r[precision][1] for r in bare_rounds]
                    floor = statistics.median(r[precision][2] / r[precision][1] for r in bare_rounds)
                    line += f"{bare_ours:6.2f} ms {bare_theirs:5.2f} ms {statistics.median(bare):5.2f}x {floor:5.2f}x   "
                else:
                    line += f"{'-':>9} {'-':>8} {'-':>6} {'-':>6}   "
                print(line + " ".join(f"{x:.2f}x" for x in ratios) + ("   bare " + " ".join(f"{x:.2f}x" for x in bare) if bare_rounds else ""),
                      flush=True)
    print(f"{load()} after")


if __name__ == "__main__":
    main()
