#!/usr/bin/env python3
"""The PyTorch bridge's cost beside the training it observes, in the same run: one training step of
a small GPT-style transformer (~1M parameters, CPU) without fpscope, recording every step,
recording every 10 steps, and every 10 with the fp32 shadow. Medians over 9 interleaved
repetitions of 20 steps (each configuration measured between the others, so a slow minute on a
shared machine touches all of them); prints the ratios and each configuration's spread.

    /usr/bin/python3 bench/bench_bridge.py            # Debian's torch
    ~/.cache/fpscope/venv-torch/bin/python bench/bench_bridge.py   # torch 2.x (scripts/test-torch makes it)
"""

import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import fpscope_torch  # noqa: E402


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab=256, width=128, layers=4, heads=4, context=64):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Parameter(torch.zeros(context, width))
        layer = torch.nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.norm = torch.nn.LayerNorm(width)
        self.mask = torch.nn.Transformer.generate_square_subsequent_mask(context)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position[: tokens.shape[1]]
        h = self.blocks(h, mask=self.mask[: tokens.shape[1], : tokens.shape[1]])
        return self.norm(h) @ self.embed.weight.t()


REPETITIONS, STEPS = 9, 20


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TinyGPT()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 256, (16, 65))

    def compute_loss():
        return torch.nn.functional.cross_entropy(model(tokens[:, :-1]).reshape(-1, 256), tokens[:, 1:].reshape(-1))

    def train_step(recorder, shadow=False):
        loss = compute_loss()
        loss.backward()
        if shadow:
            recorder.shadow(compute_loss)
        optimizer.step()
        if recorder is not None:
            recorder.step(loss)
        optimizer.zero_grad(set_to_none=True)

    with tempfile.TemporaryDirectory() as d:
        every_step = fpscope_torch.Recorder(model, os.path.join(d, "every1.jsonl"), every=1)
        every_step.close()  # made once to warm up, then reopened per measurement
        times = {"without fpscope": [], "recording every step": [], "recording every 10 steps": [],
                 "every 10, fp32 shadow": []}
        for _ in range(3):
            train_step(None)  # warm-up
        for repetition in range(REPETITIONS):
            for name in times:
                every = 1 if name == "recording every step" else 10
                shadow = "shadow" in name
                recorder = None if name == "without fpscope" else fpscope_torch.Recorder(model, os.path.join(d, f"r{repetition}.jsonl"), every=every)
                steps = STEPS
                start = time.perf_counter()
                for _ in range(steps):
                    train_step(recorder, shadow)
                times[name].append((time.perf_counter() - start) / steps)
                if recorder is not None:
                    recorder.close()
    base = statistics.median(times["without fpscope"])
    print(f"torch {torch.__version__}, {parameters} parameters, batch 16 x 64 tokens, one CPU thread; medians of {REPETITIONS} x {STEPS} steps")
    for name, samples in times.items():
        m = statistics.median(samples)
        print(f"{name:<26} {1000 * m:8.2f} ms/step   {m / base:5.2f}x   (repetitions {1000 * min(samples):.1f} .. {1000 * max(samples):.1f} ms)")


if __name__ == "__main__":
    main()
