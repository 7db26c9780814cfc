#!/usr/bin/env python3
"""A small PyTorch training that records an fpscope run log as it goes.

    /usr/bin/python3 samples/pytorch_recorder.py --out run.jsonl --steps 300
    build/cli/fpscope analyze run.jsonl --format fp16
    build/cli/fpscope export run.jsonl --svg grads.svg --plot heatmap

A 3-layer MLP on a synthetic classification task (no download), trained on the CPU under
torch.autocast in bfloat16, with fpscope_torch.Recorder writing every --every steps. The log
can be read while it grows (another process may follow it).
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fpscope_torch  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="run.jsonl", help="run log to write")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=5, help="record every N steps")
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()
    if args.steps < 1 or args.every < 1 or args.batch < 1:
        parser.error("--steps, --every and --batch must be positive")

    torch.manual_seed(0)
    # Synthetic task: 10 Gaussian clusters in 64 dimensions.
    centers = torch.randn(10, 64) * 2
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 256), torch.nn.GELU(),
                                torch.nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with fpscope_torch.Recorder(model, args.out, every=args.every, model_name="64-256-256-10 gelu",
                                precision="bf16 autocast", fmt="bf16", overwrite=True) as recorder:
        for step in range(args.steps):
            labels = torch.randint(0, 10, (args.batch,))
            inputs = centers[labels] + 3 * torch.randn(args.batch, 64)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            recorder.step(loss)
            optimizer.zero_grad()
            if step % 50 == 0 or step == args.steps - 1:
                print(f"step {step:5d}  loss {loss.item():.4f}", flush=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
