"""Module outputs and gradients held by reference and read together (held.py), the accelerator's
path forced here on the CPU (FPSCOPE_TORCH_HOLD=1, against =0): the log and the culprits are those of reading each tensor at its
hook, with the tensors a later in-place op rewrites (ReLU(inplace=True) after a BatchNorm) read at
their hook; a tensor rewritten only from some step on is left out of that step, said in a warning,
never read as the values it became; and after the first step the forward's and the backward's
tensors go to one histogram call each."""

import importlib.util
import json
import os
import sys
import tempfile
import unittest
import warnings

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from fpscope_torch import recorder as recorder_module  # noqa: E402


class Rewriting(torch.nn.Module):
    """BatchNorm's output rewritten by an in-place ReLU at every step; fc2's output rewritten in
    place (element 0 set to `value`) from step `rewrite_from` on."""

    def __init__(self, rewrite_from=None, value=float("nan")):
        super().__init__()
        self.fc1, self.norm, self.act = torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(inplace=True)
        self.fc2, self.fc3 = torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)
        self.rewrite_from, self.value, self.forwards = rewrite_from, value, 0

    def forward(self, x):
        h = self.fc2(self.act(self.norm(self.fc1(x))))
        if self.rewrite_from is not None and self.forwards >= self.rewrite_from:
            h[0, 0] = self.value
        self.forwards += 1
        return self.fc3(h)


class HoldSetting:
    """FPSCOPE_TORCH_HOLD set to `value` (None: unset) while in the block, then as it was."""

    def __init__(self, value):
        self.value = value

    def __enter__(self):
        self.saved = os.environ.get("FPSCOPE_TORCH_HOLD")
        self._set(self.value)

    def __exit__(self, *exc):
        self._set(self.saved)

    @staticmethod
    def _set(value):
        if value is None:
            os.environ.pop("FPSCOPE_TORCH_HOLD", None)
        else:
            os.environ["FPSCOPE_TORCH_HOLD"] = value


def train(held, steps=4, budget=None, every=1, device="cpu", **model_arguments):
    """The run log's step lines of `steps` steps of Rewriting, recorded every `every`, each marked
    skipped (so that each gets its culprit; its update made only where the loss is finite), module
    outputs and gradients held where `held`, on `device`; and the sizes of the histogram calls each step made
    (a step's own from its forward on, and the next step's weights, read when it ends)."""
    saved_histograms = recorder_module.partial_histograms
    calls = [[]]
    recorder_module.partial_histograms = lambda tensors: calls[-1].append(len(tensors)) or saved_histograms(tensors)
    try:
        torch.manual_seed(0)
        model = Rewriting(**model_arguments).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with HoldSetting("1" if held else "0"), tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path, every=every, scaler=False) as recorder:
                if budget is not None:
                    recorder._held.budget = budget
                for _ in range(steps):
                    x, y = torch.randn(32, 8).to(device), torch.randint(0, 4, (32,)).to(device)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    if torch.isfinite(loss):  # as a scaler would skip it
                        optimizer.step()
                    optimizer.zero_grad()
                    recorder.step(loss, skipped=True)
                    calls.append([])
            with open(path) as f:
                return [json.loads(line) for line in f][1:], calls[:-1]
    finally:
        recorder_module.partial_histograms = saved_histograms


def by_name(line):
    return {(t["name"], t["kind"]): t for t in line.get("tensors", [])}


@unittest.skipUnless(hasattr(torch, "_foreach_norm"), "this torch has no _foreach_norm")
class HeldTensorsTest(unittest.TestCase):
    def test_held_tensors_give_the_log_of_reading_each_at_its_hook(self):
        check_held_against_hooks(self, "cpu")

    def test_a_hold_setting_that_is_neither_0_nor_1_is_refused_naming_it(self):
        with HoldSetting("yes"), tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(ValueError, "FPSCOPE_TORCH_HOLD is 'yes': 0 reads"):
                fpscope_torch.Recorder(Rewriting(), os.path.join(d, "run.jsonl"), scaler=False)
            self.assertEqual(os.listdir(d), [])  # no log left behind

    @unittest.skipUnless(importlib.util.find_spec("transformers") is not None, "transformers is not installed")
    def test_a_huggingface_gpt2_held_logs_what_its_hooks_see(self):
        """HF GPT-2 under bf16 autocast, two micro-batches a step, with and without activation
        checkpointing: held, the same log as reading at the hooks, and nothing left out."""
        from transformers import GPT2Config, GPT2LMHeadModel

        def log(hold, checkpointing):
            torch.manual_seed(0)
            model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2))
            if checkpointing:
                model.gradient_checkpointing_enable()
            model.train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            torch.manual_seed(1)
            with HoldSetting(hold), tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with fpscope_torch.Recorder(model, path, every=1, scaler=False) as recorder:
                    for _ in range(4):
                        for _ in range(2):
                            tokens = torch.randint(0, 64, (2, 16))
                            with torch.autocast("cpu", dtype=torch.bfloat16):
                                loss = model(tokens, labels=tokens).loss / 2
                            loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                        recorder.step(loss)
                with open(path) as f:
                    return [json.loads(line) for line in f][1:]

        for checkpointing in (False, True):
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message="fpscope_torch")
                held, at_hooks = log("1", checkpointing), log("0", checkpointing)
            self.assertEqual(held, at_hooks, checkpointing)
            self.assertGreater(len(held[3]["tensors"]), 90)

    def test_a_tensor_rewritten_from_some_step_on_is_left_out_of_that_step_and_said(self):
        for every in (1, 3):  # step 2 recorded, or only read by the sentinel
            with self.subTest(every=every):
                check_rewritten_from_step_2(self, every, "cpu")


def check_held_against_hooks(test, device):
    """Held (the accelerator's path) and read at the hooks, on `device`: the same log."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left out: the rewritten tensor is known from step 0
        at_hooks, _ = train(held=False, device=device)
        held, calls = train(held=True, device=device)
        small_budget, _ = train(held=True, budget=1, device=device)
    test.assertEqual(held, at_hooks)
    test.assertEqual(small_budget, at_hooks)
    test.assertIn(("norm", "activation"), by_name(held[1]))
    # Step 0 learns: every module output and gradient at its hook, one call each. From step 1 the
    # forward's outputs but BatchNorm's (fc1, the ReLU, fc2, fc3) go to one call, the backward's
    # five gradients to another, beside BatchNorm's output at its hook and the calls of the 8
    # parameters' gradients and of the next step's weights.
    parameters = len(list(Rewriting().parameters()))
    test.assertEqual(calls[0].count(1), 10, calls[0])
    for step_calls in calls[1:]:
        test.assertEqual(sorted(step_calls), [1, 4, 5, parameters, parameters], step_calls)
        test.assertEqual(sum(step_calls), len(held[1]["tensors"]))


def check_rewritten_from_step_2(test, every, device):
    """fc2's output rewritten from step 2 on, on `device`: left out of step 2, and said."""
    at_hooks, _ = train(held=False, rewrite_from=2, every=every, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        held, _ = train(held=True, rewrite_from=2, every=every, device=device)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    test.assertEqual(len(said), 1, said)
    test.assertIn("fc2 (activation) was changed in place after its hook in step 2", said[0])
    for step in range(4):
        want = by_name(at_hooks[step])
        if step == 2 and every == 1:  # left out, not read as the NaN it became; everything else as at the hooks
            del want[("fc2", "activation")]
        test.assertEqual(by_name(held[step]), want, step)
        # The culprit: fc3's output, the first reading with the NaN, in both (fc2's held reading
        # never saw it; read at its hook it was clean), at the same place in the order but for
        # the reading left out before it.
        culprit, culprit_at_hooks = held[step].get("culprit"), at_hooks[step].get("culprit")
        if step < 2:
            test.assertIsNone(culprit)
            test.assertIsNone(culprit_at_hooks)
            continue
        test.assertEqual((culprit["name"], culprit["kind"], culprit["fault"]), ("fc3", "activation", "nan"))
        culprit_at_hooks["position"] -= 1 if step == 2 else 0
        test.assertEqual(culprit, culprit_at_hooks, step)


if __name__ == "__main__":
    unittest.main()
