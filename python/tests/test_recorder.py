"""The PyTorch bridge: histograms against NumPy, run log v2 (a record for every step, the scale each
backward used, skipped steps from step 0), gradients carrying their scale, awkward modules
(in-place ReLU, MultiheadAttention, LSTM, a block called twice, tied weights, an evaluation
forward), hooks only on recorded steps, appending, and gloo runs against one process."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from fpscope_torch.log_file import RunLogError  # noqa: E402

FPSCOPE = os.environ.get("FPSCOPE_BIN", "fpscope")


def numpy_histogram(array):
    """The reference: binades by np.frexp on float32 values, as a {binade: count} dict plus specials."""
    x = np.asarray(array, dtype=np.float32).ravel()
    bins = {}
    finite = np.isfinite(x) & (x != 0)
    _, exponents = np.frexp(np.abs(x[finite]))
    for e, c in zip(*np.unique(exponents - 1, return_counts=True)):
        bins[int(e)] = int(c)
    return bins, int(np.sum(x == 0)), int(np.sum(np.isinf(x))), int(np.sum(np.isnan(x)))


def record_histogram(record):
    return {b: c for b, c in record["bins"]}, record["zero"], record["inf"], record["nan"]


def read_log(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    return lines[0], lines[1:]


def snapshots_of(lines):
    return [line for line in lines if "tensors" in line]


def records_of(snapshot):
    return {(t["name"], t["kind"]): t for t in snapshot["tensors"]}


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


class ScriptedScaler:
    """GradScaler's rule and API on the CPU for any torch (1.13's GradScaler is CUDA-only):
    scale(), step() unscales in place and skips on inf/NaN, update() halves on a skip and doubles
    after `growth_interval` finite steps. `poison` lists steps whose loss is made infinite."""

    def __init__(self, init_scale=2.0 ** 10, growth_interval=3, poison=()):
        self._scale = torch.tensor(float(init_scale))
        self.growth_interval = growth_interval
        self.poison = set(poison)
        self.calls = 0
        self.good = 0
        self.found_inf = False
        self.used = []  # the scale each backward used

    def is_enabled(self):
        return True

    def get_scale(self):
        return float(self._scale)

    def scale(self, loss):
        self.used.append(float(self._scale))
        if self.calls in self.poison:
            loss = loss * float("inf")
        return loss * self._scale

    def step(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        self.found_inf = any(not torch.isfinite(g).all() for g in grads)
        for g in grads:
            g.div_(self._scale)
        if not self.found_inf:
            optimizer.step()

    def update(self):
        if self.found_inf:
            self._scale = self._scale * 0.5
            self.good = 0
        else:
            self.good += 1
            if self.good == self.growth_interval:
                self._scale = self._scale * 2.0
                self.good = 0
        self.calls += 1


class HistogramTest(unittest.TestCase):
    def test_every_kind_of_float32(self):
        tiny = np.array([1, 2, 3, 2 ** 22, 2 ** 23 - 1, 2 ** 23 - 2], dtype=np.uint32).view(np.float32)  # subnormals
        values = np.concatenate([np.array([0.0, -0.0, 1.0, -1.5, 0.75, 1e-40, -1e-45, 3e38, np.inf, -np.inf, np.nan, 2.0 ** -126],
                                          dtype=np.float32), tiny, -tiny])
        counts = fpscope_torch.exponent_histogram(torch.from_numpy(values))
        self.assertEqual(record_histogram(fpscope_torch.tensor_record("t", "other", counts)), numpy_histogram(values))

    def test_random_tensors_and_dtypes(self):
        rng = np.random.default_rng(1)
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            values = torch.from_numpy(rng.normal(0, 1, 10000) * 2.0 ** rng.integers(-30, 10, 10000)).to(dtype)
            record = fpscope_torch.tensor_record("t", "other", fpscope_torch.exponent_histogram(values))
            self.assertEqual(record_histogram(record), numpy_histogram(values.float().numpy()), str(dtype))

    def test_both_cpu_paths_on_every_dtype(self):
        """The one-pass C histogram and PyTorch's ops (the path without a C compiler): tensors of
        every dtype and several lengths, with zeros of both signs, subnormals of each format,
        infinities and NaNs among them, against NumPy, bin for bin."""
        from fpscope_torch import exponent_counts, histogram
        self.assertIn("the one-pass C histogram", exponent_counts.why_not())  # a C compiler is here
        rng = np.random.default_rng(4)
        for n in (1, 3, 4, 7, 100003):
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                values = torch.from_numpy(rng.normal(0, 1, n) * 2.0 ** rng.integers(-150, 20, n)).to(torch.float32)
                for value in (0.0, -0.0, float("inf"), -float("inf"), float("nan"), 2.0 ** -135, 2.0 ** -20, -3.0, 1e38):
                    values[rng.integers(0, n, 3)] = value
                values = values.to(dtype)
                expected = numpy_histogram(values.float().numpy())
                by_c = exponent_counts.counts_of(values, histogram.COUNTS)
                by_torch = histogram.torch_partial(values)
                for path, partial in (("C", by_c), ("torch", by_torch)):
                    record = fpscope_torch.tensor_record("t", "other", histogram.assemble([partial])[0])
                    self.assertEqual(record_histogram(record), expected, (path, n, str(dtype)))

    def test_without_a_compiler_the_torch_path_runs(self):
        code = ("import torch, fpscope_torch; from fpscope_torch import exponent_counts as e; "
                "print(e.why_not()); print(fpscope_torch.exponent_histogram(torch.tensor([0.0, 1.0, 3.0]))[149:151].tolist())")
        for environment, says in (({"FPSCOPE_TORCH_PURE": "1"}, "FPSCOPE_TORCH_PURE is set"),
                                  ({"CC": "/nonexistent/cc", "XDG_CACHE_HOME": tempfile.mkdtemp()}, "no C compiler")):
            result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    env=dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."), **environment))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn(says, result.stdout)
            self.assertIn("[1, 1]", result.stdout)  # binades 0 and 1: one value each

    def test_the_accelerator_path_run_here(self):
        """The path CUDA tensors take (float64 exponent field, histc, nothing read back), run on the
        CPU: the same counts as NumPy, also split into chunks and assembled beside CPU partials."""
        from fpscope_torch import histogram
        rng = np.random.default_rng(3)
        tiny = np.array([1, 2, 3, 2 ** 22, 2 ** 23 - 1], dtype=np.uint32).view(np.float32)
        special = np.array([0.0, -0.0, 1.0, 3e38, np.inf, -np.inf, np.nan, -np.nan, 2.0 ** -126], dtype=np.float32)
        arrays = [np.concatenate([special, tiny, -tiny]), (rng.normal(0, 1, 5000) * 2.0 ** rng.integers(-150, 127, 5000)).astype(np.float32),
                  np.zeros(0, dtype=np.float32)]
        chunk = histogram._DEVICE_CHUNK
        try:
            for size in (chunk, 7):
                histogram._DEVICE_CHUNK = size
                partials = [histogram._device_partial(torch.from_numpy(a)) for a in arrays]
                partials.insert(1, histogram.partial_histogram(torch.from_numpy(arrays[0])))  # a host partial between them
                matrix = histogram.assemble(partials)
                for row, a in zip(matrix, [arrays[0], arrays[0], arrays[1], arrays[2]]):
                    self.assertEqual(record_histogram(fpscope_torch.tensor_record("t", "other", row)), numpy_histogram(a), size)
        finally:
            histogram._DEVICE_CHUNK = chunk


    @unittest.skipUnless(importlib.util.find_spec("triton") is not None, "Triton is not installed with this torch")
    @unittest.skipIf(torch.cuda.is_available(), "a CUDA device is here: test_cuda runs the kernel itself (Triton 3.6's "
                     "interpreter, on the H100 machine, failed on it with a NumPy TypeError)")
    def test_the_triton_kernel_in_triton_s_interpreter(self):
        """histogram_triton's kernel, run on the CPU by TRITON_INTERPRET=1 (set before triton is
        imported, so in a child process): float32 from its bits, float16 and bfloat16 widened, a
        length that leaves a partial tile, against NumPy."""
        script = """
import json, sys, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from fpscope_torch import histogram_triton, tensor_record
histogram_triton._working["cpu"] = True  # an error in the interpreter is raised, not taken as "cannot run here"
rng = np.random.default_rng(5)
tiny = np.array([1, 2, 3, 2 ** 22, 2 ** 23 - 1], dtype=np.uint32).view(np.float32)
special = np.array([0.0, -0.0, 1.0, 3e38, np.inf, -np.inf, np.nan, 2.0 ** -126], dtype=np.float32)
wide = (rng.normal(0, 1, 7001) * 2.0 ** rng.integers(-150, 127, 7001)).astype(np.float32)
out = []
for values in (np.concatenate([special, tiny, -tiny, wide]), np.zeros(0, np.float32)):
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.from_numpy(values).to(dtype)
        record = tensor_record("t", "other", histogram_triton.device_counts(x))
        out.append([str(dtype), x.float().numpy().tolist(), record])
print(json.dumps(out))
"""
        env = dict(os.environ, TRITON_INTERPRET="1")
        result = subprocess.run([sys.executable, "-c", script, os.path.join(os.path.dirname(__file__), "..")], capture_output=True, text=True, env=env)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        cases = json.loads(result.stdout)
        self.assertEqual(len(cases), 6)
        for dtype, values, record in cases:
            self.assertEqual(record_histogram(record), numpy_histogram(np.array(values, dtype=np.float32)), dtype)


    @unittest.skipUnless(importlib.util.find_spec("triton") is not None, "Triton is not installed with this torch")
    @unittest.skipIf(torch.cuda.is_available(), "a CUDA device is here: test_cuda runs the kernels themselves")
    def test_many_tensors_in_one_triton_launch_in_triton_s_interpreter(self):
        """partial_histograms as on an accelerator (its grouping forced on the CPU, the kernel run by
        TRITON_INTERPRET=1): tensors of one dtype go to one launch of the many-tensor kernel, each
        cut into runs of tiles (several runs for the larger ones, a partial last tile, an empty
        tensor, a float64 one converted, a transposed one read in place, one with gaps copied), and
        each gets NumPy's counts."""
        script = """
import json, sys, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from fpscope_torch import histogram, histogram_triton, tensor_record
histogram_triton._working["cpu"] = True  # an error in the interpreter is raised, not taken as "cannot run here"
histogram._batched_on = lambda device: True  # the accelerator's path, on the CPU
launches = []
many = histogram_triton.device_counts_many
histogram_triton.device_counts_many = lambda tensors: launches.append([str(t.dtype) for t in tensors]) or many(tensors)
rng = np.random.default_rng(7)
tiny = np.array([1, 2, 3, 2 ** 22, 2 ** 23 - 1], dtype=np.uint32).view(np.float32)
special = np.array([0.0, -0.0, 1.0, 3e38, np.inf, -np.inf, np.nan, 2.0 ** -126], dtype=np.float32)
wide = lambda n: (rng.normal(0, 1, n) * 2.0 ** rng.integers(-150, 127, n)).astype(np.float32)
values = [np.concatenate([special, tiny, -tiny, wide(9001)]), wide(5000), np.zeros(0, np.float32), wide(3000), wide(2049), wide(100)]
tensors = [torch.from_numpy(values[0]), torch.from_numpy(values[1]).half(), torch.from_numpy(values[2]), torch.from_numpy(values[3]).bfloat16(),
           torch.from_numpy(values[4]), torch.from_numpy(values[5]).double(), torch.from_numpy(wide(3000)).reshape(60, 50).t(),
           torch.from_numpy(wide(4000)).reshape(40, 100)[:, ::2]]
rows = histogram.assemble(histogram.partial_histograms(tensors))
out = [[str(t.dtype), t.float().numpy().tolist(), tensor_record("t", "other", row)] for t, row in zip(tensors, rows)]
print(json.dumps({"launches": launches, "cases": out}))
"""
        env = dict(os.environ, TRITON_INTERPRET="1")
        result = subprocess.run([sys.executable, "-c", script, os.path.join(os.path.dirname(__file__), "..")], capture_output=True, text=True, env=env)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        answer = json.loads(result.stdout)
        self.assertEqual(sorted(map(tuple, answer["launches"])),
                         sorted([("torch.float32",) * 6, ("torch.float16",), ("torch.bfloat16",)]))
        self.assertEqual(len(answer["cases"]), 8)
        for dtype, values, record in answer["cases"]:
            self.assertEqual(record_histogram(record), numpy_histogram(np.array(values, dtype=np.float32)), dtype)


class CollectingEvents:
    """Stands in for the TensorBoard writer: takes the step lines as dicts, as it does."""

    def __init__(self):
        self.lines = []

    def line(self, line):
        self.lines.append(json.loads(json.dumps(line)))

    def flush(self):
        pass

    def close(self):
        pass


def check_sparse_gradients_and_outputs(test, device):
    """An embedding's sparse weight gradient and a CSR output histogrammed as their dense forms on
    `device`, a meta tensor among the outputs passed over."""
    class ToCsr(torch.nn.Module):
        def forward(self, h):
            return h.relu().to_sparse_csr()  # stores the positive values only

    class Placeholder(torch.nn.Module):
        def forward(self, h):
            return torch.empty(3, device="meta"), h  # a meta tensor: no values to read

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(50, 4, sparse=True)  # its weight gradient: sparse COO
            self.fc = torch.nn.Linear(4, 6)
            self.to_csr, self.placeholder = ToCsr(), Placeholder()

        def forward(self, tokens):
            h = self.fc(self.embed(tokens).mean(1))
            self.to_csr(h.detach())
            return h

    torch.manual_seed(0)
    net = Net().to(device)
    tokens, targets = torch.randint(0, 50, (4, 3), device=device), torch.randint(0, 6, (4,), device=device)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.jsonl")
        with fpscope_torch.Recorder(net, path) as recorder:
            _, logits = net.placeholder(net(tokens))
            loss = torch.nn.functional.cross_entropy(logits, targets)
            loss.backward()
            gradient, h = net.embed.weight.grad, net.fc(net.embed(tokens).mean(1)).detach()
            recorder.step(loss)
        records = records_of(snapshots_of(read_log(path)[1])[0])
    test.assertTrue(gradient.is_sparse)
    test.assertEqual(record_histogram(records[("embed.weight", "weight_gradient")]), numpy_histogram(gradient.to_dense().cpu().numpy()))
    test.assertGreater(records[("embed.weight", "weight_gradient")]["zero"], 50 * 4 - 12 * 4 - 1)  # rows no token touched
    test.assertEqual(record_histogram(records[("to_csr", "activation")]), numpy_histogram(h.relu().cpu().numpy()))
    test.assertEqual(sorted(name for name, kind in records if name.startswith("placeholder")), ["placeholder[1]", "placeholder[1]"])


def check_float8_fp4_and_complex_outputs(test, device):
    """Module outputs in float8, packed FP4 and complex on `device`, histogrammed as their values."""
    # OCP FP4 (E2M1) codes by value, from the OCP MX spec's table: the packed tensor's values
    # are known here without fpscope's decoding. Two a byte, the first in the low four bits.
    e2m1_code = {0.0: 0x0, 0.5: 0x1, 1.0: 0x2, 1.5: 0x3, 2.0: 0x4, 3.0: 0x5, 4.0: 0x6, 6.0: 0x7,
                 -0.0: 0x8, -0.5: 0x9, -1.0: 0xA, -1.5: 0xB, -2.0: 0xC, -3.0: 0xD, -4.0: 0xE, -6.0: 0xF}
    fp4_values = [0.5, 1.0, 6.0, -6.0, -0.0, 0.0, -1.5, -0.5, 3.0, 4.0]
    float4 = getattr(torch, "float4_e2m1fn_x2", None)

    class Cast(torch.nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.dtype = dtype

        def forward(self, x):
            return x.to(self.dtype)

    class PackedFp4(torch.nn.Module):
        def forward(self, x):
            codes = [e2m1_code[v] for v in fp4_values]
            packed = [codes[i] | codes[i + 1] << 4 for i in range(0, len(codes), 2)]
            return torch.tensor(packed, dtype=torch.uint8, device=x.device).view(float4)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)
            self.e4m3 = Cast(torch.float8_e4m3fn)
            self.e5m2 = Cast(torch.float8_e5m2)
            self.rotate = Cast(torch.complex64)
            self.fp4 = PackedFp4()

        def forward(self, x):
            h = self.fc(x)
            if float4 is not None:
                self.fp4(h)
            return self.e4m3(h).float() + self.e5m2(2000 * h).float() + self.rotate(h * 1j).imag

    torch.manual_seed(0)
    net = Net().to(device)
    x, y = torch.randn(4, 8, device=device), torch.randint(0, 8, (4,), device=device)
    h = net.fc(x).detach()
    expected = {"e4m3": h.to(torch.float8_e4m3fn).float(), "e5m2": (2000 * h).to(torch.float8_e5m2).float(),
                "rotate": torch.view_as_real(h * 1j)}
    if float4 is not None:
        expected["fp4"] = torch.tensor(fp4_values)
    # With block statistics every tensor is read at its hook; without, an accelerator's (and the
    # CPU's under FPSCOPE_TORCH_HOLD=1) are held and read together from step 2 on (held.py).
    for blocks in ("mxfp4", None):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            # fmt: outputs in float8, float32 and complex say no one format the run casts to.
            with fpscope_torch.Recorder(net, path, blocks=blocks, fmt="fp32") as recorder:
                for _ in range(3):
                    loss = torch.nn.functional.cross_entropy(net(x), y)
                    loss.backward()
                    recorder.step(loss)
            snapshots = snapshots_of(read_log(path)[1])
        for step in (0, 2):
            records = records_of(snapshots[step])
            for name, values in expected.items():
                record = records[(name, "activation")]
                test.assertEqual(record_histogram(record), numpy_histogram(values.cpu().numpy()), (name, blocks, step))
                test.assertEqual(record["captured"], "before_cast" if name == "rotate" else "as_stored", name)
                test.assertEqual("blocks" in record, blocks is not None, name)
            # Their gradients come back in the outputs' own dtypes.
            test.assertEqual(records[("e4m3", "activation_gradient")]["captured"], "as_stored")
            test.assertEqual(records[("rotate", "activation_gradient")]["captured"], "before_cast")


class RecorderTest(unittest.TestCase):
    def test_a_recorded_line_written_record_by_record_is_the_line_json_writes(self):
        """With no TensorBoard writer, a recorded step's records are encoded one at a time into its
        line; with one, made all and the line encoded whole (the writer reads them): the same bytes
        in the log, every step, with a culprit's counts and block statistics; and the writer got
        those lines."""
        logs = []
        for events in (None, CollectingEvents()):
            torch.manual_seed(0)
            model = tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                step = 0  # a NaN put into the first layer's output at step 2: a culprit, with its counts, on a recorded step
                model[0].register_forward_hook(lambda m, i, out: out.index_fill(1, torch.tensor([0]), float("nan")) if step == 2 else None)
                with fpscope_torch.Recorder(model, path, every=2, scaler=False, blocks="mxfp8-e4m3") as recorder:
                    recorder._events = events
                    for step in range(5):
                        torch.manual_seed(step)
                        x = torch.randn(16, model[0].in_features)
                        loss = model(x).square().mean()
                        loss.backward()
                        if torch.isfinite(loss):
                            optimizer.step()
                        optimizer.zero_grad()
                        recorder.step(loss, skipped=not bool(torch.isfinite(loss)))
                with open(path, "rb") as f:
                    logs.append(f.read().split(b"\n", 1)[1])  # past the header and its run id
        self.assertEqual(logs[0], logs[1])
        lines = [json.loads(line) for line in logs[0].decode().splitlines()]
        self.assertEqual(events.lines, lines)
        self.assertIn("nan", lines[2]["culprit"])
        self.assertIn("blocks", lines[2]["tensors"][0])

    def test_a_cpu_training_writes_each_step_as_it_ends(self):
        """On the CPU a step's values are in host memory when it ends: its line is written then,
        recorded or not, so a log followed live shows every step and a killed process loses none
        before the one it was in. (On an accelerator they wait for the next recorded step, whose
        read-back they share.)"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            written = []
            with fpscope_torch.Recorder(model, path, every=10) as recorder:
                for step in range(4):
                    loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 3, (8,)))
                    loss.backward()
                    recorder.step(loss)
                    model.zero_grad()
                    written.append([line["step"] for line in read_log(path)[1]])
                    self.assertEqual(read_log(path)[1][-1]["loss"], loss.item())
        self.assertEqual(written, [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]])

    def test_a_record_for_every_step_and_histograms_every_n_read_by_fpscope(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.manual_seed(1)
            x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
            weights_before, output_grads = {}, {}
            with fpscope_torch.Recorder(model, path, every=2, model_name="tiny") as recorder:
                for step in range(5):
                    weights_before[step] = {n: p.detach().numpy().copy() for n, p in model.named_parameters()}
                    # The reference activation gradient: d loss / d (first layer's output), on a copy.
                    copy = tiny_model()
                    copy.load_state_dict(model.state_dict())
                    first = copy[0](x)
                    first.retain_grad()
                    torch.nn.functional.cross_entropy(copy[2](copy[1](first)), y).backward()
                    output_grads[step] = first.grad.numpy().copy()
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    recorder.step(loss)
                    optimizer.zero_grad()
            header, lines = read_log(path)
            self.assertEqual(header["schema_version"], 2)
            self.assertEqual(len(header["run_id"]), 32)
            self.assertEqual(header["products"], f"PyTorch {torch.__version__} (cpu)")
            self.assertEqual([line["step"] for line in lines], [0, 1, 2, 3, 4])
            self.assertEqual([line["step"] for line in snapshots_of(lines)], [0, 2, 4])
            for snapshot in snapshots_of(lines):
                records = records_of(snapshot)
                self.assertEqual({k for _, k in records}, {"activation", "activation_gradient", "weight", "weight_gradient"})
                for name, value in weights_before[snapshot["step"]].items():  # the weights the step's forward used
                    self.assertEqual(record_histogram(records[(name, "weight")]), numpy_histogram(value), name)
                self.assertEqual(record_histogram(records[("0", "activation_gradient")]), numpy_histogram(output_grads[snapshot["step"]]))
                self.assertEqual(records[("0", "activation")]["captured"], "before_cast")
                self.assertEqual(sum(c for _, c in records[("0", "activation")]["bins"]) + records[("0", "activation")]["zero"], 32 * 16)
            result = subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            names = {t["tensor"] + " " + t["kind"] for t in json.loads(result.stdout)["tensors"]}
            self.assertIn("0 activation", names)
            self.assertIn("2.weight weight_gradient", names)

    def test_the_header_names_the_format_cast_to_given_or_read_from_precision(self):
        """A precision that names no format ("64-true", none) leaves it to the first recorded step:
        a Recorder closed before one keeps fp16, marked as assumed."""
        cases = [({}, "fp16?"), ({"precision": "bf16 autocast"}, "bf16"), ({"precision": "torch.bfloat16"}, "bf16"),
                 ({"precision": "fp16 autocast"}, "fp16"), ({"precision": "fp32"}, "fp32"),
                 ({"precision": "bf16", "fmt": "e4m3"}, "e4m3"),
                 # Lightning's names for its precisions
                 ({"precision": "16-mixed"}, "fp16"), ({"precision": "bf16-mixed"}, "bf16"), ({"precision": "32-true"}, "fp32"),
                 ({"precision": "16-true"}, "fp16"), ({"precision": "64-true"}, "fp64"), ({"precision": "transformer-engine"}, "fp16?")]
        with tempfile.TemporaryDirectory() as d:
            for i, (arguments, expected) in enumerate(cases):
                with self.subTest(**arguments):
                    path = os.path.join(d, f"run{i}.jsonl")
                    fpscope_torch.Recorder(tiny_model(), path, **arguments).close()
                    header, _ = read_log(path)
                    self.assertEqual(header["format"] + ("?" if header.get("format_assumed") else ""), expected)
                    self.assertEqual(header["precision"], arguments.get("precision", ""))

    def test_the_scale_each_backward_used_and_every_skip_from_step_0(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = ScriptedScaler(poison={0, 4})  # skips at step 0 and at an unrecorded step
            torch.manual_seed(1)
            x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
            expected_grads = {}
            with fpscope_torch.Recorder(model, path, every=3, scaler=scaler) as recorder:
                for step in range(8):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    scaler.scale(loss).backward()
                    expected_grads[step] = {n: p.grad.detach().numpy().copy() for n, p in model.named_parameters()}  # still scaled
                    scaler.step(optimizer)
                    scaler.update()
                    recorder.step(loss)
                    optimizer.zero_grad()
            _, lines = read_log(path)
            self.assertEqual([line["loss_scale"] for line in lines], scaler.used)
            self.assertEqual([line["step"] for line in lines if line["skipped"]], [0, 4])
            for snapshot in snapshots_of(lines):
                records = records_of(snapshot)
                for name, grad in expected_grads[snapshot["step"]].items():
                    record = records[(name, "weight_gradient")]
                    self.assertEqual(record["scale"], snapshot["loss_scale"])  # read before step() unscaled it
                    if snapshot["skipped"]:
                        continue  # inf * 0 gradients: NaNs, counted, not compared by value
                    self.assertEqual(record_histogram(record), numpy_histogram(grad), name)
                self.assertEqual(records[("1", "activation_gradient")]["scale"], snapshot["loss_scale"])
                self.assertEqual(records[("0", "activation")]["scale"], 1.0)

    @unittest.skipUnless(hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"), "torch.amp.GradScaler (torch >= 2.3) is not here")
    def test_real_grad_scaler_under_fp16_autocast(self):
        """PyTorch's own GradScaler on the CPU: the logged scale is the one the backward used, also
        after growths and back-offs, and each skip is where GradScaler skipped."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 24, growth_interval=2)
            torch.manual_seed(1)
            x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
            used, skipped = [], []
            with fpscope_torch.Recorder(model, path, every=3, scaler=scaler) as recorder:
                for step in range(9):
                    used.append(scaler.get_scale())
                    with torch.autocast("cpu", dtype=torch.float16):
                        loss = torch.nn.functional.cross_entropy(model(x * (1e4 if step == 4 else 1)), y)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    skipped.append(scaler.get_scale() < used[-1])
                    recorder.step(loss)
                    optimizer.zero_grad()
            _, lines = read_log(path)
            self.assertEqual([line["loss_scale"] for line in lines], used)
            self.assertEqual([line["skipped"] for line in lines], skipped)
            self.assertTrue(any(skipped))
            for snapshot in snapshots_of(lines):
                records = records_of(snapshot)
                self.assertEqual(records[("0.weight", "weight_gradient")]["scale"], snapshot["loss_scale"])
                self.assertEqual(records[("0", "activation")]["captured"], "as_stored")  # fp16 under autocast

    def test_the_format_is_the_one_the_activations_are_in_where_none_is_given(self):
        """Neither fmt nor precision: the header's format, and the culprit rule's, is what the first
        recorded step's activations are in -- bf16 under bf16 autocast, fp32 for a float32 model
        (analyze then asks about fp16, saying why) -- rewritten in place, the header's other fields
        and length kept, its mark that the format is assumed taken out. Given, it stays; without
        activations, autocast around the model's forward says bf16, and else bf16 parameters do;
        where nothing says, the header goes on saying its fp16 is assumed; a log appended to
        without either goes on in its own, or, where its own was assumed, the resumed run settles it."""
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

        def run(path, autocast, steps=2, **arguments):
            model = tiny_model()
            with fpscope_torch.Recorder(model, path, **arguments) as recorder:
                with open(path, "rb") as f:
                    made = f.read()
                for _ in range(steps):
                    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    recorder.step(loss)
                    model.zero_grad()
            return made, read_log(path)

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "bf16.jsonl")
            made, (header, lines) = run(path, True)
            made = json.loads(made)
            self.assertEqual((made["format"], made["format_assumed"]), ("fp16", True))  # before the first step: cast_format's
            self.assertEqual(header, dict({k: v for k, v in made.items() if k != "format_assumed"}, format="bf16"))
            with open(path, "rb") as f:
                self.assertEqual(len(f.readline()), len(json.dumps(made)) + 1)  # padded with spaces
            self.assertEqual([line["step"] for line in lines], [0, 1])
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("format bf16 (the run's own", result.stdout)

            path = os.path.join(d, "fp32.jsonl")
            self.assertEqual(run(path, False)[1][0]["format"], "fp32")
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertIn("format fp16 (the default: the run trained in float32", result.stdout)
            # A model in float64 (.double()): fp64, said as such.
            path = os.path.join(d, "fp64.jsonl")
            model = tiny_model().double()
            with fpscope_torch.Recorder(model, path) as recorder:
                torch.nn.functional.cross_entropy(model(x.double()), y).backward()
                recorder.step(torch.tensor(0.0))
            self.assertEqual(read_log(path)[0]["format"], "fp64")
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertIn("format fp16 (the default: the run trained in float64", result.stdout)

            self.assertEqual(run(os.path.join(d, "given.jsonl"), True, fmt="fp16")[1][0]["format"], "fp16")
            self.assertEqual(run(os.path.join(d, "precision.jsonl"), True, precision="fp16 autocast")[1][0]["format"], "fp16")
            self.assertEqual(run(os.path.join(d, "weights.jsonl"), True, kinds=("weight", "weight_gradient"))[1][0]["format"], "bf16")
            path = os.path.join(d, "nothing-says.jsonl")
            with self.assertWarnsRegex(RuntimeWarning, "the log names fp16 as an assumption"):
                header = run(path, False, kinds=("weight", "weight_gradient"))[1][0]
            self.assertEqual((header["format"], header["format_assumed"]), ("fp16", True))
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertIn("format fp16 (the default: the run log does not say what the run cast to", result.stdout)
            # Without activations, a model converted to bf16 says it through its parameters.
            path = os.path.join(d, "bf16-model.jsonl")
            model = tiny_model().to(torch.bfloat16)
            with fpscope_torch.Recorder(model, path, kinds=("weight", "weight_gradient")) as recorder:
                torch.nn.functional.cross_entropy(model(x.to(torch.bfloat16)).float(), y).backward()
                recorder.step(torch.tensor(0.0))
            self.assertEqual(read_log(path)[0]["format"], "bf16")

            # Appended to without fmt or precision: the run goes on in its log's format.
            path = os.path.join(d, "bf16.jsonl")
            with open(path, "rb") as f:
                header_line = f.readline()
            _, (header, lines) = run(path, False, append=True)
            self.assertEqual(header["format"], "bf16")
            with open(path, "rb") as f:
                self.assertEqual(f.readline(), header_line)
            self.assertEqual([line["step"] for line in lines], [0, 1, 2, 3])
            # Appended to a log whose format was only assumed: the resumed run settles it (bf16
            # under autocast, from its activations) and rewrites the header in place.
            path = os.path.join(d, "nothing-says.jsonl")
            with open(path, "rb") as f:
                assumed_line = f.readline()
            _, (header, lines) = run(path, True, append=True)
            self.assertEqual(header["format"], "bf16")
            self.assertNotIn("format_assumed", header)
            with open(path, "rb") as f:
                self.assertEqual(len(f.readline()), len(assumed_line))  # in place, padded with spaces
            self.assertEqual([line["step"] for line in lines], [0, 1, 2, 3])

    def test_fp32_shadow_equals_a_separate_fp32_run_and_changes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            scaler = ScriptedScaler(init_scale=2.0 ** 10)
            torch.manual_seed(1)
            x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
            # The reference: the same weights in float32, a separate run, the loss scaled by 2^10.
            reference = tiny_model()
            reference.load_state_dict(model.state_dict())
            first = reference[0](x)
            first.retain_grad()
            (torch.nn.functional.cross_entropy(reference[2](reference[1](first)), y) * 2.0 ** 10).backward()
            with fpscope_torch.Recorder(model, path, scaler=scaler) as recorder:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                scaler.scale(loss).backward()
                before = [p.grad.clone() for p in model.parameters()]
                recorder.shadow(lambda: torch.nn.functional.cross_entropy(model(x), y))
                for grad, p in zip(before, model.parameters()):
                    self.assertTrue(torch.equal(grad, p.grad))  # the training's gradients, untouched
                scaler.step(optimizer)
                scaler.update()
                recorder.step(loss)
            header, lines = read_log(path)
            self.assertEqual(header["format"], "bf16")  # neither fmt nor precision given: bf16 autocast's activations say it
            records = records_of(snapshots_of(lines)[0])
            shadow = lambda name, kind: records[(name + " (fp32 shadow)", kind)]
            self.assertEqual(record_histogram(shadow("0", "activation")), numpy_histogram(first.detach().numpy()))
            self.assertEqual(record_histogram(shadow("0", "activation_gradient")), numpy_histogram(first.grad.numpy()))
            self.assertEqual(record_histogram(shadow("0.weight", "weight_gradient")), numpy_histogram(reference[0].weight.grad.numpy()))
            self.assertEqual(shadow("0", "activation_gradient")["scale"], 2.0 ** 10)
            self.assertEqual(shadow("0", "activation_gradient")["captured"], "before_cast")
            self.assertEqual(records[("0", "activation")]["captured"], "as_stored")  # the bf16 pass itself
            self.assertNotIn(("0#2", "activation"), records)  # the shadow forward is not a second call
            # fpscope's advice from the shadow gradients equals the hand computation: the largest
            # 2^k keeping the largest gradient (at scale 1) one binade under fp16's top, 2^15.
            gradients = [t for t in snapshots_of(lines)[0]["tensors"] if t["name"].endswith("(fp32 shadow)") and "gradient" in t["kind"]]
            highest = max(max(b for b, _ in t["bins"]) - 10 for t in gradients)  # recorded at 2^10
            result = subprocess.run([FPSCOPE, "analyze", path, "--json", "--scale", "auto", "--tensor", "* (fp32 shadow)", "--format", "fp16"],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            analysis = json.loads(result.stdout)
            self.assertEqual(analysis["advice"], f"2^{15 - 1 - highest}")
            self.assertEqual(analysis["scale_log2"], 15 - 1 - highest)

    @unittest.skipUnless(hasattr(torch, "_dynamo") and hasattr(getattr(torch, "_dynamo", None), "explain"), "torch.compile is not here")
    def test_steps_compile_without_graph_breaks(self):
        """torch.compile's tracer over the model, on unrecorded steps (no hooks) and on recorded
        ones (hooks that return at once while Dynamo traces): no graph break (test_real_loops'
        CompileTest trains a compiled model)."""
        with tempfile.TemporaryDirectory() as d:
            model = tiny_model()
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            breaks = []
            with fpscope_torch.Recorder(model, os.path.join(d, "run.jsonl"), every=2) as recorder:
                for step in range(4):
                    torch._dynamo.reset()
                    breaks.append(torch._dynamo.explain(model)(x).graph_break_count)
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    recorder.step(loss)
                    model.zero_grad()
            self.assertEqual(breaks, [0, 0, 0, 0])

    def test_awkward_modules_and_hooks_only_on_recorded_steps(self):
        class Block(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
                self.act = torch.nn.ReLU(inplace=True)

            def forward(self, x):
                return self.act(self.fc(x))

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = torch.nn.Embedding(10, 8)
                self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
                self.lstm = torch.nn.LSTM(8, 8, batch_first=True)
                self.norm = torch.nn.BatchNorm1d(8)
                self.conv = torch.nn.Conv1d(8, 8, 3, padding=1)
                self.drop = torch.nn.Dropout(0.0)  # returns its input tensor itself
                self.block = Block()
                self.head = torch.nn.Linear(8, 10, bias=False)
                self.head.weight = self.embed.weight  # tied

            def forward(self, tokens):
                h = self.embed(tokens)
                h, _ = self.attn(h, h, h)
                h, _ = self.lstm(h)
                h = self.block(self.block(self.drop(h)))  # one block, called twice
                h = torch.relu(self.conv(self.norm(h.transpose(1, 2)))).transpose(1, 2)
                return self.head(h)

        torch.manual_seed(0)
        net = Net()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        tokens = torch.randint(0, 10, (4, 5))
        with tempfile.TemporaryDirectory() as d:
            # Without the sentinel, hooks only on the steps recorded; with it (the default), its
            # hooks on every step.
            path = os.path.join(d, "plain.jsonl")
            hooked = []
            with fpscope_torch.Recorder(net, path, every=2, sentinel=False) as recorder:
                for step in range(4):
                    hooked.append(len(net.block.fc._forward_hooks))
                    loss = torch.nn.functional.cross_entropy(net(tokens).reshape(-1, 10), tokens.reshape(-1))
                    loss.backward()
                    optimizer.step()
                    recorder.step(loss)
                    optimizer.zero_grad(set_to_none=True)
            self.assertEqual(hooked, [1, 0, 1, 0])
            self.assertEqual(len(net.block.fc._forward_hooks), 0)
            path = os.path.join(d, "run.jsonl")
            hooked = []
            with fpscope_torch.Recorder(net, path, every=2) as recorder:
                for step in range(4):
                    hooked.append(tuple(net.block.fc._forward_hooks))
                    out = net(tokens)
                    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 10), tokens.reshape(-1))
                    loss.backward()
                    net.eval()
                    with torch.no_grad():
                        net(tokens)  # an evaluation forward on a recording step: not training
                    net.train()
                    optimizer.step()
                    recorder.step(loss)
                    optimizer.zero_grad(set_to_none=True)
            # The sentinel's on the unrecorded steps: the same hook all along, installed once.
            self.assertEqual(len(hooked[0]), 1)
            self.assertEqual(hooked, [hooked[0]] * 4)
            self.assertEqual(len(net.block.fc._forward_hooks), 0)  # and none left after close()
            _, lines = read_log(path)
            records = records_of(snapshots_of(lines)[0])
            names = {name for name, _ in records}
            for expected in ("attn[0]", "attn[1]", "lstm[0]", "lstm[1][0]", "block.fc", "block.fc#2", "block.act", "block.act#2",
                             "norm", "conv", "conv.weight", "head", "embed.weight"):
                self.assertIn(expected, names)
            self.assertIn(("block.act#2", "activation_gradient"), records)  # in-place ReLU's gradient
            # One training forward of 4 x 5 tokens x 8 features: the evaluation forward added nothing.
            act = records[("block.fc", "activation")]
            self.assertEqual(sum(c for _, c in act["bins"]) + act["zero"], 4 * 5 * 8)
            self.assertIn(("embed.weight", "weight_gradient"), records)  # tied: one parameter, one record
            # A histogram is computed once per tensor and step, but an in-place op makes it another:
            # fc's output has no zeros, the ReLU that overwrote it half of them.
            self.assertEqual(act["zero"], 0)
            self.assertGreater(records[("block.act", "activation")]["zero"], 0)
            # The identity's output is lstm's output tensor: the same histograms, values and gradients.
            for kind in ("activation", "activation_gradient"):
                self.assertEqual(records[("drop", kind)]["bins"], records[("lstm[0]", kind)]["bins"])
                self.assertTrue(records[("drop", kind)]["bins"])

    def test_a_recorder_made_again_on_its_log_takes_it_over(self):
        """A notebook's cell run again: the Recorder before, no longer held but alive through its
        hooks, is closed when a new one on the same log appends or overwrites, not left holding it."""
        model = tiny_model()
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

        def train_step(recorder):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            recorder.step(loss)

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            first = fpscope_torch.Recorder(model, path)
            train_step(first)
            with self.assertRaisesRegex(RunLogError, r"run\.jsonl: a Recorder of this process is writing it \(at step 1\): close\(\) it, "
                                                     "or pass append=True or overwrite=True"):  # neither asked: the first keeps it
                fpscope_torch.Recorder(model, os.path.join(d, ".", "run.jsonl"))
            train_step(first)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                second = fpscope_torch.Recorder(model, os.path.join(d, ".", "run.jsonl"), append=True)
            self.assertEqual([str(w.message) for w in caught if "closed the Recorder" in str(w.message)],
                             [f"fpscope_torch: closed the Recorder this process had open on {os.path.join(d, '.', 'run.jsonl')} (at step 2) "
                              "so that this one can take its log"])
            with self.assertRaisesRegex(RuntimeError, "after close"):
                train_step(first)
            self.assertEqual(len(model._forward_hooks), 2)  # the second's alone: its forward's end and its backward's watch
            train_step(second)
            second.close()
            self.assertEqual(len(model._forward_hooks), 0)
            _, lines = read_log(path)
        self.assertEqual([line["step"] for line in lines], [0, 1, 2])

    def test_a_recorder_that_fails_to_start_leaves_no_log_and_the_old_one_as_it_was(self):
        from unittest import mock
        model = tiny_model()
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
        with tempfile.TemporaryDirectory() as d:
            path, old = os.path.join(d, "new.jsonl"), os.path.join(d, "old.jsonl")
            with fpscope_torch.Recorder(model, old) as recorder:
                for _ in range(3):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    recorder.step(loss)
            with open(old, "rb") as f:
                before = f.read()
            errors = []  # kept: their tracebacks hold the Recorders that raised
            with mock.patch.object(fpscope_torch.Recorder, "_arm_if_recording", side_effect=RuntimeError("hooks refused")):
                for target, kwargs in ((path, {}), (old, {"append": True})):
                    try:
                        fpscope_torch.Recorder(model, target, **kwargs)
                    except RuntimeError as error:  # (assertRaises would let its traceback go)
                        errors.append(error)
                    self.assertEqual([str(e) for e in errors][-1:], ["hooks refused"])
            self.assertFalse(os.path.exists(path))
            with open(old, "rb") as f:
                self.assertEqual(f.read(), before)
            self.assertEqual(sorted(os.listdir(d)), ["old.jsonl"])
            fpscope_torch.Recorder(model, old, append=True).close()  # its lock was let go, the Recorder still alive

    def test_a_model_without_python_hooks_is_refused_or_said_what_is_left_out(self):
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(6, 6)
                self.inner = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU()))

            def forward(self, x):
                return self.inner(self.fc(x))

        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            for model, says in ((lambda x: x, "model=<function"), (None, "model=None: the Recorder records a torch.nn.Module"),
                                (torch.jit.script(tiny_model()), "model is a TorchScript module")):
                with self.assertRaisesRegex(TypeError, "^" + re.escape(says)):
                    fpscope_torch.Recorder(model, path)
                self.assertFalse(os.path.exists(path))
            net = Net()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with fpscope_torch.Recorder(net, path) as recorder:
                    loss = net(torch.randn(4, 6)).sum()
                    loss.backward()
                    recorder.step(loss)
            said = [str(w.message) for w in caught if "TorchScript" in str(w.message)]
            self.assertEqual(len(said), 1, [str(w.message) for w in caught])
            self.assertTrue(said[0].startswith("fpscope_torch: inner is a TorchScript module"), said[0])
            records = records_of(snapshots_of(read_log(path)[1])[0])
        self.assertIn(("fc", "activation_gradient"), records)
        self.assertIn(("inner.0.weight", "weight_gradient"), records)  # its parameters are recorded
        self.assertFalse([name for name, kind in records if name.startswith("inner") and kind.startswith("activation")])

    def test_formats_are_fpscope_s_own_names_with_their_largest_values(self):
        from fpscope_torch.formats import _TORCH_NAMES, LARGEST, format_name

        def table(name):
            """`fpscope table --exact NAME`: the name it gives the format, and its largest finite value."""
            result = subprocess.run([FPSCOPE, "table", "--exact", name], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            lines = result.stdout.splitlines()
            largest = next(line for line in lines if line.split()[:1] == ["max"]).split("=")[-1]
            return lines[0].split(":")[0], float(largest)

        for name, largest in LARGEST.items():
            self.assertEqual(table(name), (name, largest))
        for torch_name, name in _TORCH_NAMES.items():
            # fpscope reads torch's dtype names too; float4_e2m1fn_x2 is two of its float4_e2m1fn.
            self.assertEqual(table("torch." + torch_name.removesuffix("_x2"))[0], name, torch_name)
            if hasattr(torch, torch_name):
                self.assertEqual(format_name(getattr(torch, torch_name)), name)
        self.assertEqual(format_name(" Torch.BFloat16"), "bf16")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            for bad, says in ((dict(fmt="fp17"), "fmt='fp17' is not a format"), (dict(fmt="mxfp4"), "fmt='mxfp4' is a block-scaled format: pass blocks='mxfp4'"),
                              (dict(fmt=8), "fmt=8: name the format"), (dict(every=1.5), "every=1.5: "), (dict(every="10"), "every='10': "),
                              (dict(every=True), "every=True: "), (dict(scaler="yes"), "scaler='yes': give the GradScaler")):
                with self.assertRaisesRegex(ValueError, "^" + re.escape(says)):
                    fpscope_torch.Recorder(tiny_model(), path, **bad)
                self.assertFalse(os.path.exists(path))

    def test_sparse_gradients_and_outputs_count_the_zeros_they_do_not_store(self):
        check_sparse_gradients_and_outputs(self, "cpu")

    @unittest.skipUnless(hasattr(torch, "float8_e4m3fn"), "torch's float8 dtypes (torch >= 2.1) are not here")
    def test_float8_fp4_and_complex_outputs_are_read_as_their_values(self):
        check_float8_fp4_and_complex_outputs(self, "cpu")

    def test_append_goes_on_with_the_same_log(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
            for first in (True, False):
                with fpscope_torch.Recorder(model, path, append=not first) as recorder:
                    for _ in range(3):
                        loss = torch.nn.functional.cross_entropy(model(x), y)
                        loss.backward()
                        recorder.step(loss)
                        model.zero_grad()
            header, lines = read_log(path)
            self.assertEqual([line["step"] for line in lines], [0, 1, 2, 3, 4, 5])
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)


    def test_append_after_a_crash_and_from_a_checkpoint(self):
        """A run killed while writing a line leaves it torn: appending cuts it (joined to the next
        line, no reader could parse either). A run resumed from its checkpoint at step 4 after the
        log reached step 6 writes steps 4.. again: their old lines are cut (a log's steps
        increase). Each cut is said in a warning naming the log; the log stays readable."""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            model = tiny_model()
            x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

            def train(steps, **arguments):
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    with fpscope_torch.Recorder(model, path, **arguments) as recorder:
                        for _ in range(steps):
                            loss = torch.nn.functional.cross_entropy(model(x), y)
                            loss.backward()
                            recorder.step(loss)
                            model.zero_grad()
                return [str(w.message) for w in said if issubclass(w.category, RuntimeWarning)]

            self.assertEqual(train(5), [])
            with open(path, "rb") as f:
                whole = f.read()
            with open(path, "ab") as f:
                f.write(b'{"step": 5, "loss": 1.2, "loss_sc')  # killed mid-line
            self.assertEqual(train(2, append=True), [f"{path}: cut before appending: a torn last line (33 bytes, from a run stopped while writing it)"])
            with open(path, "rb") as f:
                self.assertTrue(f.read().startswith(whole))  # what was whole is kept, byte for byte
            self.assertEqual([line["step"] for line in read_log(path)[1]], [0, 1, 2, 3, 4, 5, 6])
            self.assertEqual(train(3, append=True, global_step=4),
                             [f"{path}: cut before appending: the lines of steps 4..6 (3), which the run resumed at step 4 writes again"])
            self.assertEqual([line["step"] for line in read_log(path)[1]], [0, 1, 2, 3, 4, 5, 6])
            self.assertEqual(train(1, append=True, global_step=7), [])  # nothing to cut: nothing said
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertNotIn("incomplete", result.stderr)
            with self.assertRaisesRegex(ValueError, r"^global_step must not be negative, not -1$"):
                fpscope_torch.Recorder(model, path, append=True, global_step=-1)
            # A step line is found by its number first, and parsed whole where another writer put
            # its keys in another order.
            from fpscope_torch.log_file import _step_of
            self.assertEqual([_step_of(line) for line in (b'{"step": 7, "loss": 1.0}\n', b'{"step": 12}\n', b'{"loss": 1.0, "step": 9}\n',
                                                          b'{"fpscope_run_log": true, "schema_version": 2}\n', b'{"step": true}\n')],
                             [7, 12, 9, None, None])
            self.assertEqual([line["step"] for line in read_log(path)[1]], [0, 1, 2, 3, 4, 5, 6, 7])
            # A log of another format, or another writer's, is not appended to: its header would
            # have the new steps read as what they are not. Nothing changes, and the lock is let go.
            with open(path, "rb") as f:
                before = f.read()
            with self.assertRaisesRegex(RunLogError, r"run.jsonl holds a run in fp32 and this Recorder's format is bf16: its steps "
                                        r"would be read as fp32; pass fmt='fp32' \(or the precision the log was written with\), or name a new log$"):
                fpscope_torch.Recorder(model, path, append=True, precision="bf16 autocast")
            engine = os.path.join(d, "engine.jsonl")
            subprocess.run([FPSCOPE, "train", "--steps", "1", "--out", engine], capture_output=True, check=True)
            with open(engine, "rb") as f:
                engine_before = f.read()
            with self.assertRaisesRegex(RunLogError, r"engine.jsonl was written by fpscope train, not by a Recorder: its steps are that "
                                        r"run's; name a new log$"):
                fpscope_torch.Recorder(model, engine, append=True)
            for name, was in ((path, before), (engine, engine_before)):
                with open(name, "rb") as f:
                    self.assertEqual(f.read(), was)
            self.assertEqual(train(1, append=True), [])  # free again: the refusals let the lock go


def distributed_worker(rank, world, path, port, uneven, blocks=None):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    run_shards(path, rank, world, uneven, blocks)
    dist.destroy_process_group()


class Experts(torch.nn.Module):
    """Two experts; with `uneven`, rank 1's shard goes through expert b as well."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(6, 3)
        self.b = torch.nn.Linear(6, 3)

    def forward(self, x, use_b):
        return self.a(x) + (self.b(x) if use_b else 0)


def shards_batch():
    torch.manual_seed(1)
    return torch.randn(32, 6), torch.randint(0, 3, (32,))


def run_shards(path, rank, world, uneven=False, blocks=None):
    """One step on shard `rank` of a fixed batch, its loss scaled by 2^10; summed losses make the
    sharded activation gradients equal to the single-process ones. `uneven`: under bf16 autocast,
    so that a record only rank 1 makes is as_stored and its activation unscaled, neither of
    which the other ranks could guess."""
    model = Experts()
    x, y = shards_batch()
    scaler = ScriptedScaler()
    with fpscope_torch.Recorder(model, path, blocks=blocks, scaler=scaler) as recorder, \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=uneven):
        losses = []
        for r in range(world) if world == 1 else [rank]:
            shard = slice(r * 32 // 2, (r + 1) * 32 // 2) if (world == 2 or uneven) else slice(0, 32)
            losses.append(torch.nn.functional.cross_entropy(model(x[shard], uneven and r == 1).float(), y[shard], reduction="sum"))
        loss = sum(losses)
        scaler.scale(loss).backward()
        recorder.step(loss)


class DistributedTest(unittest.TestCase):
    def sharded_log(self, d, uneven, blocks=None, port_offset=0):
        """The log two gloo ranks write, each over its half of the batch."""
        sharded = os.path.join(d, "sharded.jsonl")
        port = 29500 + os.getpid() % 1000 + (7 if uneven else 0) + port_offset
        mp.spawn(distributed_worker, args=(2, sharded, port, uneven, blocks), nprocs=2, join=True)
        return read_log(sharded)[1]

    def compare(self, uneven, blocks=None, port_offset=0):
        with tempfile.TemporaryDirectory() as d:
            single = os.path.join(d, "single.jsonl")
            # One process over both halves.
            if uneven:
                run_shards_single_uneven(single, blocks)
            else:
                run_shards(single, 0, 1, blocks=blocks)
            _, one = read_log(single)
            two = self.sharded_log(d, uneven, blocks, port_offset)
            keep = lambda s: {(t["name"], t["kind"]): (record_histogram(t), t["scale"], t["captured"])
                              for t in s["tensors"] if t["kind"] in ("activation", "activation_gradient")}
            self.assertEqual(keep(snapshots_of(two)[0]), keep(snapshots_of(one)[0]))
            if blocks is not None:
                # Block statistics: sharded kinds summed, weights rank 0's (the same here; the
                # weight gradients differ without DDP's averaging, so they are left out).
                blocks_of = lambda s: {(t["name"], t["kind"]): t.get("blocks") for t in s["tensors"] if t["kind"] != "weight_gradient"}
                self.assertEqual(blocks_of(snapshots_of(two)[0]), blocks_of(snapshots_of(one)[0]))
                self.assertTrue(all(t.get("blocks") is not None for t in snapshots_of(two)[0]["tensors"]))
            return keep(snapshots_of(one)[0])

    def test_two_gloo_ranks_sum_to_one_process(self):
        self.assertGreater(len(self.compare(uneven=False)), 1)

    def test_ranks_that_run_different_modules_agree_on_keys(self):
        kept = self.compare(uneven=True)
        # Only rank 1 ran b: recorded, not aborted, and labelled as rank 1 saw it (rank 0 writes it).
        self.assertEqual(kept[("b", "activation")][1:], (1.0, "as_stored"))
        self.assertEqual(kept[("b", "activation_gradient")][1:], (2.0 ** 10, "as_stored"))

    def test_mx_block_statistics_sum_to_one_process(self):
        # A block lies within one rank's rows: the summed counts are the whole batch's, exactly.
        self.compare(uneven=False, blocks="mxfp8-e4m3", port_offset=13)
        self.compare(uneven=True, blocks="mxfp4:round-up", port_offset=17)

    def test_nvfp4_block_statistics_take_each_ranks_own_tensor_scale(self):
        with tempfile.TemporaryDirectory() as d:
            two = records_of(snapshots_of(self.sharded_log(d, False, "nvfp4", port_offset=19))[0])
        model = Experts()
        x, _ = shards_batch()
        with torch.no_grad():
            halves = [fpscope_torch.blocks.block_statistics(model.a(x[r * 16:(r + 1) * 16]), "nvfp4") for r in range(2)]
            whole = fpscope_torch.blocks.block_statistics(model.a(x), "nvfp4")
        self.assertEqual(two[("a", "activation")]["blocks"], fpscope_torch.blocks.merge_block_statistics(*halves))
        # Not what one process over the whole batch counts: the half without the batch's largest
        # value takes a larger tensor scale.
        self.assertNotEqual(two[("a", "activation")]["blocks"], whole)


def run_shards_single_uneven(path, blocks=None):
    model = Experts()
    x, y = shards_batch()
    scaler = ScriptedScaler()
    with fpscope_torch.Recorder(model, path, blocks=blocks, scaler=scaler) as recorder, torch.autocast("cpu", dtype=torch.bfloat16):
        # Each expert called once, on the rows the ranks give it: a on all 32, b on the last 16.
        out = model.a(x) + torch.cat([torch.zeros(16, 3, dtype=torch.bfloat16), model.b(x[16:])])
        loss = torch.nn.functional.cross_entropy(out.float(), y, reduction="sum")
        scaler.scale(loss).backward()
        recorder.step(loss)


if __name__ == "__main__":
    unittest.main()
