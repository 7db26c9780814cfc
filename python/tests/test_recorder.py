"""The PyTorch bridge on tiny models: its histograms against a direct NumPy computation, its log
read by `fpscope analyze`, autocast, and a 2-process gloo run against a single process."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402

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


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def read_log(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    return lines[0], lines[1:]


class HistogramTest(unittest.TestCase):
    def test_every_kind_of_float32(self):
        values = np.array([0.0, -0.0, 1.0, -1.5, 0.75, 1e-40, -1e-45, 3e38, np.inf, -np.inf, np.nan, 2.0 ** -126], dtype=np.float32)
        counts = fpscope_torch.exponent_histogram(torch.from_numpy(values)).tolist()
        record = fpscope_torch._tensor_record("t", "other", torch.tensor(counts))
        self.assertEqual(record_histogram(record), numpy_histogram(values))

    def test_random_tensors_and_dtypes(self):
        rng = np.random.default_rng(1)
        for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            values = torch.from_numpy(rng.normal(0, 1, 10000) * 2.0 ** rng.integers(-30, 10, 10000)).to(dtype)
            record = fpscope_torch._tensor_record("t", "other", fpscope_torch.exponent_histogram(values))
            self.assertEqual(record_histogram(record), numpy_histogram(values.float().numpy()), str(dtype))


class RecorderTest(unittest.TestCase):
    def train(self, path, steps=3, every=1, autocast=False):
        model = tiny_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(1)
        x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
        expected_weights = []
        with fpscope_torch.Recorder(model, path, every=every, model_name="tiny") as recorder:
            for _ in range(steps):
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
                expected_weights.append({n: p.detach().numpy().copy() for n, p in model.named_parameters()})
                recorder.step(loss)
                optimizer.zero_grad()
        return expected_weights

    def test_log_matches_direct_computation_and_fpscope_reads_it(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            weights = self.train(path, steps=4, every=2)
            header, snapshots = read_log(path)
            self.assertEqual(header["schema_version"], 1)
            self.assertEqual([s["step"] for s in snapshots], [0, 2])
            for snapshot in snapshots:
                records = {(t["name"], t["kind"]): t for t in snapshot["tensors"]}
                kinds = {k for _, k in records}
                self.assertEqual(kinds, {"activation", "activation_gradient", "weight", "weight_gradient"})
                for name, value in weights[snapshot["step"]].items():
                    self.assertEqual(record_histogram(records[(name, "weight")]), numpy_histogram(value), name)
                self.assertEqual(sum(records[("0", "activation")]["bins"][i][1] for i in range(len(records[("0", "activation")]["bins"])))
                                 + records[("0", "activation")]["zero"], 32 * 16)
            result = subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            analysis = json.loads(result.stdout)
            names = {t["tensor"] + " " + t["kind"] for t in analysis["tensors"]}
            self.assertIn("0 activation", names)
            self.assertIn("2.weight weight_gradient", names)

    def test_scaler_scale_and_skipped_steps(self):
        class StepScaler:
            """Stands in for GradScaler (CUDA-only in this torch): the scale after each update()."""
            def __init__(self, scales):
                self.scales, self.index = scales, -1
            def is_enabled(self):
                return True
            def get_scale(self):
                return self.scales[self.index]
            def update(self):
                self.index += 1
        scaler = StepScaler([65536.0, 65536.0, 32768.0, 32768.0, 65536.0])
        model = tiny_model()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path, scaler=scaler) as recorder:
                for _ in range(5):
                    model(torch.randn(4, 6)).sum().backward()
                    scaler.update()
                    recorder.step()
            header, snapshots = read_log(path)
            self.assertEqual(header["scaler"], "dynamic")
            self.assertEqual([s["loss_scale"] for s in snapshots], [65536.0, 65536.0, 32768.0, 32768.0, 65536.0])
            self.assertEqual([s["skipped"] for s in snapshots], [False, False, True, False, False])

    def test_autocast_bf16(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            self.train(path, steps=2, autocast=True)
            _, snapshots = read_log(path)
            self.assertEqual(len(snapshots), 2)
            result = subprocess.run([FPSCOPE, "analyze", path, "--format", "bf16"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)


class NpyTest(unittest.TestCase):
    """.npy files written by NumPy itself, read by `fpscope analyze`, against NumPy's histogram."""

    def analyze(self, path, *extra):
        result = subprocess.run([FPSCOPE, "analyze", path, "--json", *extra], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        return json.loads(result.stdout)["tensors"]

    def test_numpy_written_files(self):
        rng = np.random.default_rng(2)
        values = (rng.normal(0, 1, (50, 40)) * 2.0 ** rng.integers(-40, 20, (50, 40))).astype(np.float32)
        values[0, :5] = 0
        values[1, 0], values[1, 1] = np.inf, np.nan
        with tempfile.TemporaryDirectory() as d:
            cases = {"f4": values, "f4_fortran": np.asfortranarray(values), "f2": values.astype(np.float16),
                     "f8": values.astype(np.float64), "f4_big_endian": values.astype(">f4")}
            for name, array in cases.items():
                path = os.path.join(d, name + ".npy")
                np.save(path, array)
                [tensor] = self.analyze(path)
                self.assertEqual(record_histogram(tensor), numpy_histogram(array.astype(np.float32)), name)
            # bfloat16 as raw uint16 bits: the upper halves of float32 values.
            bits = (values.view(np.uint32) >> 16).astype(np.uint16)
            path = os.path.join(d, "bf16_bits.npy")
            np.save(path, bits)
            [tensor] = self.analyze(path, "--as", "bf16")
            widened = (bits.astype(np.uint32) << 16).view(np.float32)
            self.assertEqual(record_histogram(tensor), numpy_histogram(widened))
            # An object array is refused with one sentence naming the file.
            path = os.path.join(d, "objects.npy")
            np.save(path, np.array([1, "a"], dtype=object), allow_pickle=True)
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertNotEqual(result.returncode, 0)
            self.assertIn("objects.npy", result.stderr)
            self.assertEqual(result.stdout, "")


def distributed_worker(rank, world, path, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    run_shards(path, rank, world)
    dist.destroy_process_group()


def run_shards(path, rank, world):
    """One step on shard `rank` of a fixed batch; summed losses make the sharded activation
    gradients equal to the single-process ones."""
    model = tiny_model()
    torch.manual_seed(1)
    x, y = torch.randn(32, 6), torch.randint(0, 3, (32,))
    shard = slice(rank * 32 // world, (rank + 1) * 32 // world)
    with fpscope_torch.Recorder(model, path) as recorder:
        loss = torch.nn.functional.cross_entropy(model(x[shard]), y[shard], reduction="sum")
        loss.backward()
        recorder.step(loss)


class DistributedTest(unittest.TestCase):
    def test_two_gloo_ranks_sum_to_one_process(self):
        with tempfile.TemporaryDirectory() as d:
            single, sharded = os.path.join(d, "single.jsonl"), os.path.join(d, "sharded.jsonl")
            run_shards(single, 0, 1)
            mp.spawn(distributed_worker, args=(2, sharded, 29500 + os.getpid() % 1000), nprocs=2, join=True)
            _, one = read_log(single)
            _, two = read_log(sharded)
            compare = lambda snapshot: {(t["name"], t["kind"]): record_histogram(t) for t in snapshot["tensors"]
                                        if t["kind"] in ("activation", "activation_gradient", "weight")}
            self.assertEqual(compare(two[0]), compare(one[0]))
            self.assertGreater(len(compare(one[0])), 5)


if __name__ == "__main__":
    unittest.main()
