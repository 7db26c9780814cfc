#!/usr/bin/env python3
"""The PyTorch bridge's cost beside the training it observes, in the same run: one training step of
a GPT-style transformer without fpscope, recording every step, recording every 10 steps, and every
10 with the fp32 shadow. Medians over 9 interleaved repetitions of 20 steps, each after 2 untimed
ones (each configuration measured between the others, so a slow minute on a shared machine touches
all of them, and each repetition in an order rotated one further, so that none always follows the
same one); prints the ratios and each configuration's spread. A Recorder is made with scaler=False:
its search for a GradScaler it was not given, once a Recorder, is not what a step costs.

On the CPU (default): ~1M parameters, float32, one thread. With --gpt2: HuggingFace transformers'
GPT2LMHeadModel from a config of about 3M parameters (width 192, 6 layers, vocabulary 2048, batch
8 x 128 tokens) under bf16 CPU autocast, one thread, eager and again under torch.compile (compiled
once before the timings). With --cuda: a larger model (width 512, 6 layers, batch 32 x 256 tokens,
~19M parameters) under fp16 autocast with torch.amp.GradScaler, as a GPU job trains, each timing
closed by a device synchronisation. Beside them, unrecorded steps with the step sentinel on and off
(a Recorder that records none of the timed steps): what the culprit report costs every step. With
--host: a stack of 100 Linear(8, 8) at batch 4 on one CPU thread, whose step computes next to
nothing, so that what recording adds is the bridge's own work per tensor on the host -- what a GPU
job's host pays per module -- each configuration also with the tensors held and read together
(FPSCOPE_TORCH_HOLD=1, an accelerator's path), and the cost per tensor read. Beside each
configuration, Python's full garbage collections a hundred steps (each costs a few hundred
milliseconds in a process holding torch). The machine's load average is printed beside the numbers.

    /usr/bin/python3 bench/bench_bridge.py            # Debian's torch
    ~/.cache/fpscope/venv-torch/bin/python bench/bench_bridge.py   # torch 2.x (scripts/test-torch makes it)
    ~/.cache/fpscope/venv-torch/bin/python bench/bench_bridge.py --gpt2
    ~/.cache/fpscope/venv-torch/bin/python bench/bench_bridge.py --host
    python3 bench/bench_bridge.py --cuda              # on a machine with a CUDA device
"""

import os
import gc
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
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(context), persistent=False)

    def forward(self, tokens):
        h = self.embed(tokens) + self.position[: tokens.shape[1]]
        h = self.blocks(h, mask=self.mask[: tokens.shape[1], : tokens.shape[1]])
        return self.norm(h) @ self.embed.weight.t()


REPETITIONS, STEPS = 9, 20
WARM_UP = 2  # untimed steps of each configuration before its timed ones (a Recorder records step 0)
NEVER = 10 ** 9  # `every` of a Recorder that starts at step 1: it records none of the timed steps


def rotated(names, repetition):
    """The configurations in the order repetition `repetition` runs them: each repetition starts one
    further on, so that no configuration always follows the same one (a configuration run right
    after a compiled one, or after a recorded one, pays for what its predecessor left in the
    caches and the allocator)."""
    k = repetition % len(names)
    return names[k:] + names[:k]


def gpt2_bench():
    """GPT2LMHeadModel (~3M parameters), bf16 CPU autocast, AdamW, one thread: the plain step,
    recording every step and every 10 steps, eager and compiled, interleaved in one run."""
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.set_num_threads(1)
    torch.manual_seed(0)
    batch, context, vocab = 8, 128, 2048
    config = GPT2Config(vocab_size=vocab, n_positions=context, n_embd=192, n_layer=6, n_head=6)
    model = GPT2LMHeadModel(config)
    model.train()
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, vocab, (batch, context))
    compiled = torch.compile(model)

    def train_step(module, recorder):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = module(tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        if recorder is not None:
            recorder.step(loss)
        optimizer.zero_grad(set_to_none=True)

    start = time.perf_counter()
    for _ in range(3):
        train_step(compiled, None)  # compiles (forward and backward) before anything is timed
    compile_seconds = time.perf_counter() - start
    for _ in range(2):
        train_step(model, None)
    # NEVER: a Recorder that records no step of the timed ones (its first step is 1): what its
    # sentinel costs, with the sentinel on and off.
    configurations = [(f"{how}{what}", module, every) for how, module in (("", model), ("compiled, ", compiled))
                      for what, every in (("without fpscope", None), ("recording every step", 1), ("recording every 10 steps", 10),
                                          ("unrecorded, sentinel on", NEVER), ("unrecorded, sentinel off", NEVER))]
    times = {name: [] for name, _, _ in configurations}
    with tempfile.TemporaryDirectory() as d:
        for repetition in range(REPETITIONS):
            for name, module, every in rotated(configurations, repetition):
                # scaler=False (there is none): the search for an undeclared GradScaler, once a
                # Recorder (a pass over Python's objects, about 100 ms with transformers loaded),
                # is not what a step costs.
                recorder = None if every is None else fpscope_torch.Recorder(
                    module, os.path.join(d, f"r{repetition}.jsonl"), every=every, scaler=False, overwrite=True,
                    precision="bf16 autocast", global_step=1 if every == NEVER else None, sentinel="sentinel off" not in name)
                for _ in range(WARM_UP):  # every 10: steps 0 and 1; the timed 2..21 record 10 and 20
                    train_step(module, recorder)
                start = time.perf_counter()
                for _ in range(STEPS):
                    train_step(module, recorder)
                times[name].append((time.perf_counter() - start) / STEPS)
                if recorder is not None:
                    recorder.close()
    print(f"torch {torch.__version__}, transformers GPT2LMHeadModel, {parameters} parameters, batch {batch} x {context} tokens, "
          f"bf16 CPU autocast, AdamW, one thread; medians of {REPETITIONS} x {STEPS} steps, interleaved; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; compiling took {compile_seconds:.0f} s")
    for name, samples in times.items():
        base = statistics.median(times["compiled, without fpscope" if name.startswith("compiled") else "without fpscope"])
        m = statistics.median(samples)
        print(f"{name:<36} {1000 * m:8.2f} ms/step   {m / base:5.3f}x   (repetitions {1000 * min(samples):.1f} .. {1000 * max(samples):.1f} ms)")


def main():
    if "--gpt2" in sys.argv[1:]:
        return gpt2_bench()
    cuda, host = "--cuda" in sys.argv[1:], "--host" in sys.argv[1:]
    if cuda and not torch.cuda.is_available():
        sys.exit("bench_bridge: --cuda, but torch sees no CUDA device")
    torch.manual_seed(0)
    if host:
        torch.set_num_threads(1)
        device, batch, context = torch.device("cpu"), 4, 8
        model, scaler = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(100)]), None
    elif cuda:
        device, batch, context = torch.device("cuda"), 32, 256
        model = TinyGPT(width=512, layers=6, heads=8, context=context).to(device)
        scaler = torch.amp.GradScaler("cuda")
    else:
        torch.set_num_threads(1)
        device, batch, context = torch.device("cpu"), 16, 64
        model, scaler = TinyGPT(), None
    parameters = sum(p.numel() for p in model.parameters())
    parameters_count = len(list(model.parameters()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 256, (batch, context + 1), device=device)

    def compute_loss():
        if host:
            return torch.nn.functional.mse_loss(model(tokens[:, :-1].float()), tokens[:, 1:].float())
        if not cuda:
            return torch.nn.functional.cross_entropy(model(tokens[:, :-1]).reshape(-1, 256), tokens[:, 1:].reshape(-1))
        with torch.autocast("cuda", dtype=torch.float16):
            return torch.nn.functional.cross_entropy(model(tokens[:, :-1]).reshape(-1, 256).float(), tokens[:, 1:].reshape(-1))

    def train_step(recorder, shadow=False):
        loss = compute_loss()
        (scaler.scale(loss) if scaler else loss).backward()
        if shadow:
            recorder.shadow(compute_loss)
        if scaler:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if recorder is not None:
            recorder.step(loss)
        optimizer.zero_grad(set_to_none=True)

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    with tempfile.TemporaryDirectory() as d:
        every_step = fpscope_torch.Recorder(model, os.path.join(d, "every1.jsonl"), every=1, scaler=scaler, overwrite=True)
        every_step.close()  # made once to warm up, then reopened per measurement
        names = ["recording every step", "recording every 10 steps", "every 10, fp32 shadow", "unrecorded, sentinel on", "unrecorded, sentinel off"]
        if host:  # and held, as on an accelerator; the shadow is the same work again
            names = [n for n in names if "shadow" not in n]
            names += [n + ", held" for n in names if "sentinel off" not in n]
        times = {name: [] for name in ["without fpscope"] + names}
        # Python's full (oldest-generation) collections in each configuration's steps: what the
        # objects a step keeps bring on, a few hundred milliseconds each in a process holding torch.
        full_collections, timing = {name: 0 for name in times}, [None]  # timing: the configuration in its steps

        def count_full_collection(phase, info):
            if phase == "stop" and info["generation"] == 2 and timing[0] is not None:
                full_collections[timing[0]] += 1

        gc.callbacks.append(count_full_collection)
        for _ in range(3):
            train_step(None)  # warm-up
        for repetition in range(REPETITIONS):
            for name in rotated(list(times), repetition):
                every = 1 if name.startswith("recording every step") else NEVER if name.startswith("unrecorded") else 10
                shadow = "shadow" in name
                if host:  # elsewhere the environment's setting, as a user's run has it
                    os.environ["FPSCOPE_TORCH_HOLD"] = "1" if name.endswith(", held") else "0"
                recorder = None if name == "without fpscope" else fpscope_torch.Recorder(
                    model, os.path.join(d, f"r{repetition}.jsonl"), every=every, scaler=scaler if scaler else False, overwrite=True,
                    global_step=1 if every == NEVER else None, sentinel="sentinel off" not in name)
                # (scaler=False without one: the search for an undeclared GradScaler, once a Recorder,
                # is not what a step costs)
                steps = STEPS
                for _ in range(WARM_UP):  # every 10: steps 0 and 1; the timed 2..21 record 10 and 20
                    train_step(recorder, shadow)
                synchronize()
                start = time.perf_counter()
                timing[0] = name
                for _ in range(steps):
                    train_step(recorder, shadow)
                synchronize()
                timing[0] = None
                times[name].append((time.perf_counter() - start) / steps)
                if recorder is not None:
                    recorder.close()
    base = statistics.median(times["without fpscope"])
    where = f"{torch.cuda.get_device_name()}, fp16 autocast + GradScaler" if cuda else "one CPU thread, float32"
    if cuda:
        where += ", module outputs read at their hooks" if os.environ.get("FPSCOPE_TORCH_HOLD") == "0" else ", module outputs held"
    if host:
        where = "100 x Linear(8, 8), one CPU thread, float32"
    if cuda:
        from fpscope_torch import histogram_triton
        where += ", histograms by " + ("the Triton kernel" if histogram_triton._working.get("cuda") else "PyTorch's ops")
    print(f"torch {torch.__version__}, {parameters} parameters, batch {batch} x {context} tokens, {where}; medians of {REPETITIONS} x {STEPS} steps; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for name, samples in times.items():
        m = statistics.median(samples)
        # Each step reads every module output and gradient and every parameter and gradient (the
        # sentinel); a recorded one histograms them all.
        per_tensor = f"   {1e6 * (m - base) / (2 * (len(list(model.modules())) - 1) + 2 * parameters_count):5.1f} us a tensor" if host else ""
        per_tensor += f"   {full_collections[name] * 100 / (REPETITIONS * STEPS):.1f} full collections a 100 steps"
        print(f"{name:<32} {1000 * m:8.2f} ms/step   {m / base:5.2f}x   (repetitions {1000 * min(samples):.1f} .. {1000 * max(samples):.1f} ms){per_tensor}")


if __name__ == "__main__":
    main()
