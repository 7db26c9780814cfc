"""fpscope's CUDA backend beside PyTorch on the same GPU, in one run.

Runs build/bench/bench_cuda (Google Benchmark, JSON) and times the same MLP training step in
PyTorch: torch.autocast(float16) + GradScaler + SGD, the batch copied from host memory every step
as fpscope's step does, relu, cross-entropy in float32; and the same GPT step (the model of
tests/gpu/gpt_vs_torch.py, AdamW). Prints every row's median, and the ratios
the CUDA issue asks for: the recorded cast over a device-to-device copy's bandwidth, fpscope's
step over PyTorch's, what recording every tensor every step adds, and the unrecorded step launched
as it comes beside the same step replayed as a CUDA Graph (fpscope's default).

Usage: python3 bench/bench_cuda_torch.py [path/to/bench_cuda] [--repetitions N] [--filter REGEX]
(--filter: only bench_cuda's benchmarks whose names match, as --benchmark_filter; the tables
leave out the rows not run, and PyTorch is timed only for the rows that are.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def torch_step_time(width, batch, repetitions):
    import torch

    torch.manual_seed(1)
    device = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(784, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cuda")
    batches = [(torch.randn(batch, 784), torch.randint(0, 10, (batch,))) for _ in range(8)]

    def step(x_host, y_host):
        x = x_host.to(device)
        y = y_host.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float(), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return timed_steps(step, batches, repetitions, torch.cuda.synchronize)


def timed_steps(step, batches, repetitions, synchronize):
    """The median over `repetitions` of a step's mean time over rounds of 20 steps that fill about
    0.2 s (Google Benchmark's MinTime), after 10 warm-up steps."""
    for i in range(10):
        step(*batches[i % len(batches)])
    synchronize()
    times = []
    steps = 20
    for _ in range(repetitions):
        rounds, elapsed = 0, 0.0
        while elapsed < 0.2:
            start = time.perf_counter()
            for i in range(steps):
                step(*batches[i % len(batches)])
            synchronize()
            elapsed += time.perf_counter() - start
            rounds += 1
        times.append(elapsed / (rounds * steps))
    return statistics.median(times)


def torch_gpt_step_time(batch, repetitions, device="cuda"):
    """The GPT of tests/gpu/gpt_vs_torch.py (bench_cuda's BM_gpt_step: 4 layers x 256, 4 heads,
    context 128, vocab 256) under torch.autocast(float16) + GradScaler + AdamW, the batch copied
    from host memory every step."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
    from gpt_vs_torch import Gpt

    torch.manual_seed(1)
    model = Gpt(4, 256, 4, 128, 256).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0)
    scaler = torch.amp.GradScaler(device)
    batches = [(torch.randint(0, 256, (batch, 128)), torch.randint(0, 256, (batch, 128))) for _ in range(8)]

    def step(ids_host, targets_host):
        ids, targets = ids_host.to(device), targets_host.to(device)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.float16):
            logits = model(ids)
        loss = F.cross_entropy(logits.float().reshape(-1, 256), targets.reshape(-1))
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return timed_steps(step, batches, repetitions, synchronize)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", nargs="?", default="build/bench/bench_cuda")
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--filter", default=".", help="bench_cuda's benchmarks to run (a regular expression)")
    args = parser.parse_args()

    import torch
    if not torch.cuda.is_available():
        print("bench_cuda_torch: PyTorch sees no CUDA device; nothing to measure here")
        return 0
    # bench_cuda's own table streams as it runs (so a slow or stuck row shows where it is); its JSON
    # goes to a file beside it.
    with tempfile.TemporaryDirectory() as folder:
        json_path = os.path.join(folder, "bench_cuda.json")
        print(f"bench_cuda_torch: running {args.bench} (filter {args.filter!r})", flush=True)
        subprocess.run([args.bench, f"--benchmark_out={json_path}", "--benchmark_out_format=json",
                        f"--benchmark_repetitions={args.repetitions}", "--benchmark_report_aggregates_only=true",
                        f"--benchmark_filter={args.filter}"], check=True)
        with open(json_path) as f:
            benchmarks = json.load(f)["benchmarks"]
    # Names without Google Benchmark's "/min_time:..." part.
    rows = {"/".join(part for part in b["run_name"].split("/") if not part.startswith("min_time:")): b
            for b in benchmarks if b.get("aggregate_name") == "median"}

    def seconds(name):
        b = rows[name]
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        return b["real_time"] * scale

    device = torch.cuda.get_device_name(0)
    print(f"device: {device}; PyTorch {torch.__version__}; medians of {args.repetitions} repetitions")
    copy = seconds("BM_device_copy_256MiB/manual_time") if "BM_device_copy_256MiB/manual_time" in rows else float("nan")
    print(f"\n{'operation on 256 MiB of float32':44} {'ms':>8} {'GB/s (read+write)':>18} {'share of copy':>14}")
    for name, label, bytes_moved in [("BM_device_copy_256MiB/manual_time", "device-to-device copy (baseline)", 2 << 28),
                                     ("BM_cast_record_fp16_256MiB/0/manual_time", "recorded cast fp16, nearest even", 2 << 28),
                                     ("BM_cast_record_fp16_256MiB/6/manual_time", "recorded cast fp16, stochastic", 2 << 28),
                                     ("BM_histogram_256MiB/manual_time", "histogram alone (reads only)", 1 << 28)]:
        if name not in rows:
            continue
        t = seconds(name)
        share = (copy * bytes_moved / (2 << 28)) / t
        print(f"{label:44} {t * 1e3:8.3f} {bytes_moved / t / 1e9:18.0f} {share:13.0%}")

    print(f"\n{'MLP step, fp16 mixed, dynamic scaling':38} {'fpscope us':>10} {'+loss read':>10} {'recording':>10} {'PyTorch us':>10} "
          f"{'fpscope/torch':>13} {'recording adds':>15} {'no graphs us':>12} {'graphs':>7}")
    for width, batch in [(1024, 256), (4096, 1024), (8192, 4096)]:
        if f"BM_mlp_step/{width}/{batch}/0/manual_time" not in rows:
            continue
        plain = seconds(f"BM_mlp_step/{width}/{batch}/0/manual_time")
        recorded = seconds(f"BM_mlp_step/{width}/{batch}/1/manual_time")
        read_back = seconds(f"BM_mlp_step/{width}/{batch}/2/manual_time")
        no_graphs = seconds(f"BM_mlp_step/{width}/{batch}/3/manual_time")
        torch_time = torch_step_time(width, batch, args.repetitions)
        # Recording's cost over the unrecorded step that runs ahead, and over the one that reads
        # its loss back every step (what `fpscope train` does when it writes a run log); the graph's
        # step over the one launched as it comes.
        print(f"{f'784-{width}-{width}-10, batch {batch}':38} {plain * 1e6:10.1f} {read_back * 1e6:10.1f} {recorded * 1e6:10.1f} "
              f"{torch_time * 1e6:10.1f} {plain / torch_time:12.2f}x {recorded / plain - 1:7.1%} / {recorded / read_back - 1:5.1%} "
              f"{no_graphs * 1e6:12.1f} {plain / no_graphs:6.2f}x")

    print(f"\n{'GPT step, fp16 mixed, dynamic scaling, AdamW':46} {'fpscope us':>10} {'+loss read':>10} {'recording':>10} {'PyTorch us':>10} "
          f"{'fpscope/torch':>13} {'recording adds':>15} {'no graphs us':>12} {'graphs':>7}")
    for batch in (8, 32):
        if f"BM_gpt_step/{batch}/0/manual_time" not in rows:
            continue
        plain = seconds(f"BM_gpt_step/{batch}/0/manual_time")
        recorded = seconds(f"BM_gpt_step/{batch}/1/manual_time")
        read_back = seconds(f"BM_gpt_step/{batch}/2/manual_time")
        no_graphs = seconds(f"BM_gpt_step/{batch}/3/manual_time")
        torch_time = torch_gpt_step_time(batch, args.repetitions)
        print(f"{f'4 layers x 256, context 128, batch {batch}':46} {plain * 1e6:10.1f} {read_back * 1e6:10.1f} {recorded * 1e6:10.1f} "
              f"{torch_time * 1e6:10.1f} {plain / torch_time:12.2f}x {recorded / plain - 1:7.1%} / {recorded / read_back - 1:5.1%} "
              f"{no_graphs * 1e6:12.1f} {plain / no_graphs:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
