"""The bridge on a CUDA device, as GPU jobs run it: histograms computed on the device against NumPy,
torch.amp.GradScaler("cuda") under fp16 CUDA autocast (the scale each backward used, skips from
step 0 and between recorded steps, gradients read with their scale, activations as stored in
fp16, each skip's culprit), module outputs and gradients held and read together, sparse, float8,
FP4 and complex tensors, the fp32 shadow, and block statistics of CUDA tensors against
`fpscope quantize`. Every test skips, saying so, where torch sees no CUDA device."""

import os
import sys
import tempfile
import unittest

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from test_blocks import assert_like_fpscope_quantize, check_every_format_and_rule, fpscope_quantize  # noqa: E402
from test_held import check_held_against_hooks, check_rewritten_from_step_2  # noqa: E402
from test_recorder import (check_float8_fp4_and_complex_outputs, check_sparse_gradients_and_outputs, numpy_histogram, read_log,  # noqa: E402
                           record_histogram, records_of, snapshots_of)

CUDA = torch.cuda.is_available()
NO_CUDA = "torch sees no CUDA device here: the bridge's CUDA path runs only where one answers"


def grad_scaler(**kwargs):
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", **kwargs)
    return torch.cuda.amp.GradScaler(**kwargs)


def cuda_model(seed=0):
    """Non-square layers, so a swapped or transposed tensor changes a record's size."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(48, 160), torch.nn.ReLU(), torch.nn.Linear(160, 96), torch.nn.GELU(),
                               torch.nn.Linear(96, 10)).cuda()


@unittest.skipUnless(CUDA, NO_CUDA)
class CudaHistogramTest(unittest.TestCase):
    def test_every_kind_of_float32_on_the_device(self):
        tiny = np.array([1, 2, 3, 2 ** 22, 2 ** 23 - 1], dtype=np.uint32).view(np.float32)
        values = np.concatenate([np.array([0.0, -0.0, 1.0, -1.5, 1e-40, 3e38, np.inf, -np.inf, np.nan, 2.0 ** -126], dtype=np.float32),
                                 tiny, -tiny])
        counts = fpscope_torch.exponent_histogram(torch.from_numpy(values).cuda())
        self.assertEqual(record_histogram(fpscope_torch.tensor_record("t", "other", counts)), numpy_histogram(values))

    def test_random_tensors_and_dtypes_on_the_device(self):
        rng = np.random.default_rng(2)
        for n in (1, 1000, 3 * 2 ** 20 + 7):
            for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
                values = torch.from_numpy(rng.normal(0, 1, n) * 2.0 ** rng.integers(-140, 120, n)).to(dtype)
                on_device = fpscope_torch.exponent_histogram(values.cuda())
                record = fpscope_torch.tensor_record("t", "other", on_device)
                self.assertEqual(record_histogram(record), numpy_histogram(values.float().numpy()), f"{dtype} n={n}")


    def test_both_device_paths(self):
        """The Triton kernel (where Triton runs; it must have run here if it is installed) and the
        PyTorch-ops path each give NumPy's counts on the device."""
        from fpscope_torch import histogram, histogram_triton
        rng = np.random.default_rng(6)
        for n in (5, 2049, 1 << 22):
            values = (rng.normal(0, 1, n) * 2.0 ** rng.integers(-150, 127, n)).astype(np.float32)
            values[:3] = [np.nan, -np.inf, -0.0]
            expected = numpy_histogram(values)
            x = torch.from_numpy(values).cuda()
            by_ops = histogram.assemble([histogram._device_partial(x)])[0]
            self.assertEqual(record_histogram(fpscope_torch.tensor_record("t", "other", by_ops)), expected, n)
            if histogram_triton.triton is not None:
                by_kernel = histogram_triton.device_counts(x)
                self.assertIsNotNone(by_kernel, "Triton is installed but its kernel did not run on this device")
                self.assertEqual(record_histogram(fpscope_torch.tensor_record("t", "other", by_kernel)), expected, n)


    def test_many_tensors_in_one_launch_on_the_device(self):
        """partial_histograms on the device: tensors of one dtype in one launch of the many-tensor
        kernel (several runs for the large ones, an empty one), each with NumPy's counts."""
        from fpscope_torch import histogram, histogram_triton
        if histogram_triton.triton is None:
            self.skipTest("Triton is not installed with this torch")
        rng = np.random.default_rng(8)
        tensors = []
        for n, dtype in ((5, torch.float32), (1 << 21, torch.float32), (0, torch.float32), (70001, torch.float16), (3000, torch.bfloat16),
                         (1 << 20, torch.bfloat16), (999, torch.float64)):
            values = torch.from_numpy(rng.normal(0, 1, n) * 2.0 ** rng.integers(-140, 120, n)).to(dtype)
            if n > 3:
                values[:3] = torch.tensor([float("nan"), float("-inf"), -0.0]).to(dtype)
            tensors.append(values.cuda())
        rows = histogram.assemble(histogram.partial_histograms(tensors))
        for t, row in zip(tensors, rows):
            record = fpscope_torch.tensor_record("t", "other", row)
            self.assertEqual(record_histogram(record), numpy_histogram(t.float().cpu().numpy()), f"{t.dtype} n={t.numel()}")


@unittest.skipUnless(CUDA, NO_CUDA)
class CudaRecorderTest(unittest.TestCase):
    def test_held_module_outputs_and_gradients_on_the_device(self):
        """A CUDA model's module outputs and gradients held and read together (the device's own
        path) give the log of reading each at its hook, and one rewritten in place from step 2 on is
        left out of that step and said (test_held.py's checks, on the device)."""
        check_held_against_hooks(self, "cuda")
        check_rewritten_from_step_2(self, 1, "cuda")

    def test_sparse_gradients_and_outputs_on_the_device(self):
        """An embedding's sparse weight gradient and a CSR output on the device, histogrammed as
        their dense forms (test_recorder.py's check)."""
        check_sparse_gradients_and_outputs(self, "cuda")

    @unittest.skipUnless(hasattr(torch, "float8_e4m3fn"), "torch's float8 dtypes (torch >= 2.1) are not here")
    def test_float8_fp4_and_complex_outputs_on_the_device(self):
        """Module outputs in float8, packed FP4 and complex on the device, read as their values
        (test_recorder.py's check): the batched readings and the Triton histograms widen them."""
        check_float8_fp4_and_complex_outputs(self, "cuda")

    def test_grad_scaler_under_fp16_cuda_autocast(self):
        """Skips at step 0 (recorded) and step 4 (not recorded, every=3); the logged scale is the one
        each backward used through growths and back-offs; weight gradients carry that scale and
        equal, bin for bin, the gradients the backward left; activations are fp16 as stored and
        equal a second autocast forward; weights are the ones the step's forward used."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = cuda_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            scaler = grad_scaler(init_scale=2.0 ** 16, growth_interval=2)
            torch.manual_seed(1)
            x, y = torch.randn(256, 48, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
            used, skipped, grads, weights, first_outputs = [], [], {}, {}, {}
            with fpscope_torch.Recorder(model, path, every=3, scaler=scaler) as recorder:
                for step in range(10):
                    inputs = x * (6e4 if step in (0, 4) else 1)  # fp16 overflows: inf gradients, a skipped step
                    used.append(scaler.get_scale())
                    weights[step] = {n: p.detach().cpu().numpy().copy() for n, p in model.named_parameters()}
                    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
                        first_outputs[step] = model[0](inputs).float().cpu().numpy()
                    with torch.autocast("cuda", dtype=torch.float16):
                        loss = torch.nn.functional.cross_entropy(model(inputs).float(), y)
                    scaler.scale(loss).backward()
                    grads[step] = {n: p.grad.detach().cpu().numpy().copy() for n, p in model.named_parameters()}  # still scaled
                    scaler.step(optimizer)
                    scaler.update()
                    skipped.append(scaler.get_scale() < used[-1])
                    recorder.step(loss)
                    optimizer.zero_grad(set_to_none=True)
            header, lines = read_log(path)
            self.assertEqual(header["schema_version"], 2)
            self.assertEqual([line["step"] for line in lines], list(range(10)))
            self.assertEqual([line["loss_scale"] for line in lines], used)
            self.assertEqual([line["skipped"] for line in lines], skipped)
            self.assertEqual([line["step"] for line in lines if line["skipped"]], [0, 4])
            self.assertEqual([s["step"] for s in snapshots_of(lines)], [0, 3, 6, 9])
            # Each skip's culprit, from the sentinel's readings on the device (torch.aminmax): the
            # first layer's fp16 output, which the scaled-up inputs overflowed; counted where recorded.
            for line in lines:
                culprit = line.get("culprit")
                self.assertEqual(culprit is not None, line["skipped"], line["step"])
                if culprit is not None:
                    self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["captured"]),
                                     ("0", "activation", "inf", "as_stored"), line["step"])
                    self.assertEqual("inf" in culprit, "tensors" in line)
            for snapshot in snapshots_of(lines):
                step, records = snapshot["step"], records_of(snapshot)
                self.assertEqual(records[("0", "activation")]["captured"], "as_stored")
                self.assertEqual(records[("0", "activation")]["scale"], 1.0)
                self.assertEqual(record_histogram(records[("0", "activation")]), numpy_histogram(first_outputs[step]), step)
                self.assertEqual(records[("2", "activation_gradient")]["scale"], snapshot["loss_scale"])
                activation_gradient = records[("2", "activation_gradient")]
                self.assertEqual(sum(c for _, c in activation_gradient["bins"]) + activation_gradient["zero"]
                                 + activation_gradient["inf"] + activation_gradient["nan"], 256 * 96)
                for name, value in weights[step].items():
                    self.assertEqual(record_histogram(records[(name, "weight")]), numpy_histogram(value), name)
                    record = records[(name, "weight_gradient")]
                    self.assertEqual(record["scale"], snapshot["loss_scale"], name)
                    self.assertEqual(record_histogram(record), numpy_histogram(grads[step][name]), f"step {step} {name}")
                if snapshot["skipped"]:
                    self.assertGreater(sum(records[(n, "weight_gradient")]["inf"] + records[(n, "weight_gradient")]["nan"]
                                           for n in weights[step]), 0)

    def test_fp32_shadow_on_the_device(self):
        """The shadow's activations and gradients equal a separate float32 run of the same weights on
        the device (TF32 off, as PyTorch's default for matmuls), the training's gradients untouched."""
        torch.backends.cuda.matmul.allow_tf32 = False
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = cuda_model(3)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            scaler = grad_scaler(init_scale=2.0 ** 10)
            torch.manual_seed(4)
            x, y = torch.randn(128, 48, device="cuda"), torch.randint(0, 10, (128,), device="cuda")
            reference = cuda_model(3)
            reference.load_state_dict(model.state_dict())
            first = reference[0](x)
            first.retain_grad()
            (torch.nn.functional.cross_entropy(reference[1:](first), y) * 2.0 ** 10).backward()
            compute_loss = lambda: torch.nn.functional.cross_entropy(model(x).float(), y)  # noqa: E731
            with fpscope_torch.Recorder(model, path, scaler=scaler) as recorder:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = compute_loss()
                scaler.scale(loss).backward()
                before = [p.grad.clone() for p in model.parameters()]
                recorder.shadow(compute_loss)
                for grad, p in zip(before, model.parameters()):
                    self.assertTrue(torch.equal(grad, p.grad))
                scaler.step(optimizer)
                scaler.update()
                recorder.step(loss)
            _, lines = read_log(path)
            records = records_of(snapshots_of(lines)[0])
            shadow = lambda name, kind: records[(name + " (fp32 shadow)", kind)]  # noqa: E731
            self.assertEqual(record_histogram(shadow("0", "activation")), numpy_histogram(first.detach().cpu().numpy()))
            self.assertEqual(record_histogram(shadow("0", "activation_gradient")), numpy_histogram(first.grad.cpu().numpy()))
            self.assertEqual(record_histogram(shadow("4.weight", "weight_gradient")), numpy_histogram(reference[4].weight.grad.cpu().numpy()))
            self.assertEqual(shadow("0", "activation_gradient")["scale"], 2.0 ** 10)
            self.assertEqual(shadow("0", "activation")["captured"], "before_cast")
            self.assertEqual(records[("0", "activation")]["captured"], "as_stored")


@unittest.skipUnless(CUDA, NO_CUDA)
class CudaBlockStatisticsTest(unittest.TestCase):
    def test_device_counts_equal_fpscope_quantize(self):
        check_every_format_and_rule(self, "cuda")

    def test_recorder_with_blocks_on_a_cuda_model(self):
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "run.jsonl")
            model = cuda_model(5)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
            scaler = grad_scaler()
            x, y = torch.randn(64, 48, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
            with fpscope_torch.Recorder(model, path, every=1, scaler=scaler, blocks="mxfp8-e4m3") as recorder:
                weight = model[2].weight.detach().cpu().numpy().copy()
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = torch.nn.functional.cross_entropy(model(x).float(), y)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                recorder.step(loss)
            _, lines = read_log(path)
            record = records_of(snapshots_of(lines)[0])[("2.weight", "weight")]["blocks"]
            theirs = fpscope_quantize(weight, "mxfp8-e4m3", "floor", work)
            self.assertEqual(record["format"], "mxfp8-e4m3")
            assert_like_fpscope_quantize(self, record, theirs)


if __name__ == "__main__":
    unittest.main()
