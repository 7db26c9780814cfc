"""Block statistics from the bridge (fpscope_torch.blocks) against fpscope's own quantizer
(`fpscope quantize --json`), count for count and bin for bin, on random and adversarial tensors in
every OCP MX format and scale rule; and a Recorder with blocks= writing a run log that `fpscope
analyze -f FORMAT` reads."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from fpscope_torch.blocks import RULES, block_statistics  # noqa: E402

FPSCOPE = os.environ.get("FPSCOPE_BIN", "fpscope")
FORMATS = ("mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp4", "mxint8")


def tensors():
    """Shapes whose last dimension the blocks do not fill, 1-D and 3-D, magnitudes over float32's
    whole range, zeros, subnormals, and blocks holding a NaN or an infinity."""
    g = torch.Generator().manual_seed(7)
    wide = torch.randn(48, 70, generator=g) * torch.exp2(torch.randint(-40, 40, (48, 70), generator=g).float())
    wide[3, :5] = 0.0
    wide[5, 10] = float("nan")
    wide[7, 40] = float("-inf")
    wide[9, :] = torch.randn(70, generator=g) * 1e-40  # float32 subnormals
    wide[11, 0] = 3.0e38
    tiny = torch.randn(300, generator=g) * torch.exp2(torch.randint(-140, -100, (300,), generator=g).float())
    # Each element format's edges, scaled into one block with its largest at 1: values at and near
    # the thresholds of flushing, subnormal and saturation.
    edges = torch.tensor([2.0 ** k * m for k in range(-20, 2) for m in (1.0, 1.25, 1.5, 1.75, 1.9375)], dtype=torch.float32)
    deep = torch.randn(2, 3, 40, generator=g) * torch.exp2(torch.randint(-10, 10, (2, 3, 40), generator=g).float())
    # Ties, one row per element format: its largest value plus half an ulp (the block's largest, so
    # the scale is 2^0 under the floor rule), half its smallest subnormal, and the midpoint between
    # its largest subnormal and its smallest normal.
    ties = []
    for emax, emin, mbits, largest in ((8, -6, 3, 448.0), (15, -14, 2, 57344.0), (2, 0, 3, 7.5), (4, -2, 2, 28.0), (2, 0, 1, 6.0),
                                       (0, -6, 6, 127 / 64)):
        half_smallest = 2.0 ** (emin - mbits - 1)
        row = [largest + 2.0 ** (emax - mbits - 1), largest, half_smallest, -half_smallest, 2.0 ** emin - half_smallest,
               2.0 ** emin, 3 * half_smallest, 1.5 * half_smallest]
        ties.append(row + [0.0] * (32 - len(row)))
    return [wide, tiny, edges, deep, torch.tensor(ties, dtype=torch.float32)]


def fpscope_quantize(array, fmt, rule, work):
    """`fpscope quantize --json` of `array` (rule None: the format's own, as nvfp4 has)."""
    path = os.path.join(work, "x.npy")
    np.save(path, array)
    rule_options = ["--scale-rule", rule] if rule is not None else []
    result = subprocess.run([FPSCOPE, "quantize", path, "-f", fmt, *rule_options, "--json"], capture_output=True, text=True)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


_KEYS = (("elements", "elements"), ("blocks", "blocks"), ("nan_blocks", "nan_blocks"), ("zeros", "zeros"),
         ("flushed_to_zero", "flushed_to_zero"), ("subnormal", "subnormal"), ("saturated", "saturated"), ("scales", "scales"),
         ("relative", "relative"))


def assert_like_fpscope_quantize(test, ours, theirs, keys=_KEYS):
    """The bridge's block record against `fpscope quantize --json`'s, key for key."""
    for key, their_key in keys:
        test.assertEqual(ours[key], theirs[their_key], key)


def nvfp4_tensors():
    """NVFP4's own edges besides tensors(): block scales at E4M3's subnormals (a small block in a
    tensor whose amax is huge), block scales at ties between E4M3 codes, and elements at E2M1's
    thresholds under a block scale of exactly 1 (the tensor amax 2688, a block amax 6)."""
    g = torch.Generator().manual_seed(11)
    spread = torch.randn(8, 64, generator=g) * torch.exp2(torch.randint(-30, 30, (8, 64), generator=g).float())
    spread[0, :16] *= 2.0 ** -40  # this block's scale falls among E4M3's subnormals, or to 0
    ties = torch.zeros(4, 16)
    ties[0, 0] = 2688.0
    ties[1, :8] = torch.tensor([6.0, 0.25, 0.75, 1.25, 5.0, 1.75, 2.5, 3.5])  # block amax 6, scale 1: ties of E2M1
    ties[2, 0] = 6.0 * 1.0625  # (amax / 6) * 1 between E4M3's 1 and 1.125: a tie, to the even 1
    ties[3, 0] = 6.0 * 0.0029296875  # 1.5 * 2^-9: a tie between E4M3's smallest subnormals
    return [spread, ties]


def check_every_format_and_rule(test, device):
    """block_statistics of tensors() moved to `device`, every MX format and rule and NVFP4, against fpscope."""
    with tempfile.TemporaryDirectory() as work:
        cases = [(t, tensor, fmt, rule) for t, tensor in enumerate(tensors()) for fmt in FORMATS for rule in RULES]
        cases += [(t, tensor, "nvfp4", None) for t, tensor in enumerate(tensors() + nvfp4_tensors())]
        for t, tensor, fmt, rule in cases:
            with test.subTest(tensor=t, fmt=fmt, rule=rule):
                ours = block_statistics(tensor.to(device), fmt, rule or "floor")
                assert_like_fpscope_quantize(test, ours, fpscope_quantize(tensor.numpy().astype(np.float32), fmt, rule, work))


class BlockStatisticsTest(unittest.TestCase):
    def test_bridge_counts_equal_fpscope_quantize(self):
        check_every_format_and_rule(self, "cpu")

    def test_recorder_writes_block_statistics_that_fpscope_reads(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(40, 70), torch.nn.ReLU(), torch.nn.Linear(70, 5))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(16, 40), torch.randint(0, 5, (16,))
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "run.jsonl")
            with fpscope_torch.Recorder(model, path, every=2, blocks="mxfp4:even") as recorder:
                for _ in range(4):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
                    recorder.step(loss)
            with open(path) as log:
                lines = [json.loads(line) for line in log]
            recorded = [line for line in lines if "tensors" in line]
            self.assertEqual(len(recorded), 2)
            for tensor in recorded[0]["tensors"]:
                self.assertEqual(tensor["blocks"]["format"], "mxfp4")
                self.assertEqual(tensor["blocks"]["rule"], "even")
            weight = next(t for t in recorded[0]["tensors"] if t["name"] == "0.weight" and t["kind"] == "weight")
            self.assertEqual(weight["blocks"]["elements"], 70 * 40)
            self.assertEqual(weight["blocks"]["blocks"], 70 * 2)  # 40 = a block of 32 and one of 8, per row
            result = subprocess.run([FPSCOPE, "analyze", path, "-f", "mxfp4", "--json"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            report = json.loads(result.stdout)
            summed = next(t for t in report["tensors"] if t["tensor"] == "0.weight weight")
            self.assertEqual(summed["recorded_steps"], 2)
            self.assertEqual(summed["elements"], 2 * 70 * 40)
            self.assertEqual(summed["scale_rule"], "even")

    def test_recorder_with_nvfp4_blocks_of_16(self):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(40, 24), torch.nn.ReLU(), torch.nn.Linear(24, 5))
        x, y = torch.randn(8, 40), torch.randint(0, 5, (8,))
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "run.jsonl")
            with fpscope_torch.Recorder(model, path, blocks="nvfp4") as recorder:
                weight = model[0].weight.detach().numpy().copy()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                recorder.step()
            with open(path) as log:
                recorded = [json.loads(line) for line in log][1]
            record = next(t for t in recorded["tensors"] if t["name"] == "0.weight" and t["kind"] == "weight")["blocks"]
            self.assertEqual((record["format"], record["block"], record["blocks"]), ("nvfp4", 16, 24 * 3))  # 40 = 16 + 16 + 8
            assert_like_fpscope_quantize(self, record, fpscope_quantize(weight, "nvfp4", None, work))
            result = subprocess.run([FPSCOPE, "analyze", path, "-f", "nvfp4", "--json"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            with self.assertRaisesRegex(ValueError, "16 elements"):
                fpscope_torch.Recorder(model, os.path.join(work, "never.jsonl"), blocks="nvfp4", block_size=32)

    def test_bad_blocks_are_one_sentence(self):
        model = torch.nn.Linear(4, 2)
        with tempfile.TemporaryDirectory() as work:
            for text, says in (("mxfp5", "unknown block-scaled format"), ("mxfp4:nearest", "unknown scale rule"),
                               ("nvfp4:even", "nvfp4's E4M3 block scale has one rule")):
                with self.subTest(text=text), self.assertRaisesRegex(ValueError, says):
                    fpscope_torch.Recorder(model, os.path.join(work, "never.jsonl"), blocks=text)
            self.assertFalse(os.path.exists(os.path.join(work, "never.jsonl")))


if __name__ == "__main__":
    unittest.main()
