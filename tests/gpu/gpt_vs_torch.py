"""The engine's GPT against the same model written in PyTorch: `fpscope train --export-inputs` gives
the starting parameters and every step's batch; PyTorch trains from them with the same optimizer,
and every step's float32 loss must agree within 1e-4 relative over 20 steps (float32 sums in other
orders drift apart by a few ulps a step; a wrong layer is off by far more at step 0 or 1).

Usage: gpt_vs_torch.py FPSCOPE_BINARY"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

STEPS = 20
TOLERANCE = 1e-4


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, 4 * width)
        self.mlp_proj = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        batch, context, width = x.shape
        head = width // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        q, k, v = (t.view(batch, context, self.heads, head).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head))
        causal = torch.ones(context, context, dtype=torch.bool, device=x.device).tril()
        probabilities = F.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        context_ = (probabilities @ v).transpose(1, 2).reshape(batch, context, width)
        x = x + self.proj(context_)
        return x + self.mlp_proj(F.gelu(self.fc(self.ln2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, layers, width, heads, context, vocab):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, width)
        self.positions = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(width)

    def forward(self, ids):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.tokens.weight.t()  # the tied head

    def named_as_fpscope(self):
        """fpscope's parameter names (gpt_parameters) to this model's tensors."""
        names = {"embed.tokens": self.tokens.weight, "embed.positions": self.positions.weight,
                 "ln_f.weight": self.ln_f.weight, "ln_f.bias": self.ln_f.bias}
        for l, block in enumerate(self.blocks):
            for ours, module in (("ln1", block.ln1), ("attn.qkv", block.qkv), ("attn.proj", block.proj), ("ln2", block.ln2),
                                 ("mlp.fc", block.fc), ("mlp.proj", block.mlp_proj)):
                names[f"h{l}.{ours}.weight"] = module.weight
                names[f"h{l}.{ours}.bias"] = module.bias
        return names


def run(binary, folder, shape, extra):
    out = os.path.join(folder, "run.jsonl")
    exported = os.path.join(folder, "exported")
    subprocess.run([binary, "train", "--model", shape, "--precision", "fp32", "--steps", str(STEPS), "--batch", "4",
                    "--record-every", "1000", "--out", out, "--export-inputs", exported, "--threads", "1"] + extra,
                   check=True, stdout=subprocess.DEVNULL)
    losses = [json.loads(line)["loss"] for line in open(out) if '"loss"' in line and '"step"' in line]
    return exported, losses


def torch_losses(exported, dims, optimizer_of):
    torch.manual_seed(0)
    model = Gpt(*dims)
    with torch.no_grad():
        for name, tensor in model.named_as_fpscope().items():
            tensor.copy_(torch.from_numpy(np.load(os.path.join(exported, name + ".npy"))))
    optimizer, clip = optimizer_of(model.parameters())
    losses = []
    for step in range(STEPS):
        ids = torch.from_numpy(np.load(os.path.join(exported, f"inputs-{step:06}.npy")).astype(np.int64))
        targets = torch.from_numpy(np.load(os.path.join(exported, f"targets-{step:06}.npy")).astype(np.int64))
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    binary = sys.argv[1]
    torch.set_num_threads(1)
    dims = (2, 32, 4, 16, 64)
    shape = "gpt:layers={},width={},heads={},context={},vocab={}".format(*dims)
    cases = [
        ("adamw", ["--optimizer", "adamw", "--lr", "1e-2", "--weight-decay", "0.01"],
         lambda p: (torch.optim.AdamW(p, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), 0)),
        ("momentum, clipped", ["--optimizer", "momentum", "--lr", "0.5", "--clip-grad-norm", "0.5"],
         lambda p: (torch.optim.SGD(p, lr=0.5, momentum=0.9), 0.5)),
    ]
    failures = 0
    for name, extra, optimizer_of in cases:
        with tempfile.TemporaryDirectory() as folder:
            exported, ours = run(binary, folder, shape, extra)
            theirs = torch_losses(exported, dims, optimizer_of)
        if len(ours) != STEPS:
            print(f"{name}: the run log has {len(ours)} step losses, not {STEPS}")
            failures += 1
            continue
        worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
        print(f"{name}: step 0 loss fpscope {ours[0]:.7f} torch {theirs[0]:.7f}; step {STEPS - 1} fpscope {ours[-1]:.7f} "
              f"torch {theirs[-1]:.7f}; worst relative difference {worst:.2e} (tolerance {TOLERANCE:g})")
        if not worst <= TOLERANCE:
            failures += 1
    if failures:
        print(f"FAILED: {failures} case(s) disagree with PyTorch")
        return 1
    print(f"OK: the GPT's losses agree with PyTorch {torch.__version__} over {STEPS} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
