"""The bridge in the loops users run: gradient accumulation and activation checkpointing (one
optimizer step is one record), torch.compile (nothing of the recorder in the graph), HuggingFace
transformers models built from tiny configs (random init, nothing downloaded), and misuse, each
case its one sentence. Parts that need torch 2.x or transformers say so when they skip."""

import contextlib
import gc
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from fpscope_torch.log_file import RunLogError  # noqa: E402
from test_recorder import numpy_histogram, read_log, record_histogram, records_of, snapshots_of  # noqa: E402

FPSCOPE = os.environ.get("FPSCOPE_BIN", "fpscope")

TORCH_2 = int(torch.__version__.split(".")[0]) >= 2
try:
    import transformers  # noqa: F401
    HAVE_TRANSFORMERS = True
except ImportError:
    HAVE_TRANSFORMERS = False


def add_histograms(a, b):
    bins = dict(a[0])
    for binade, count in b[0].items():
        bins[binade] = bins.get(binade, 0) + count
    return bins, a[1] + b[1], a[2] + b[2], a[3] + b[3]


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = torch.nn.Linear(width, width)
        self.act = torch.nn.Tanh()

    def forward(self, x):
        return x + self.act(self.fc(x))


class Net(torch.nn.Module):
    """Two residual blocks, optionally under activation checkpointing, and a head."""

    def __init__(self, checkpoint=None):
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Linear(6, 8)
        self.blocks = torch.nn.ModuleList([Block(8), Block(8)])
        self.head = torch.nn.Linear(8, 3)
        self.checkpoint = checkpoint  # None, "reentrant" or "non-reentrant"

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            if self.checkpoint is None:
                h = block(h)
            else:
                h = torch.utils.checkpoint.checkpoint(block, h, use_reentrant=self.checkpoint == "reentrant")
        return self.head(h)


def batch(seed, rows=8):
    torch.manual_seed(seed)
    return torch.randn(rows, 6), torch.randint(0, 3, (rows,))


def train_step(path, model, micro_batches, **recorder_arguments):
    """One optimizer step over `micro_batches` (x, y) pairs, the loss averaged as accumulation does."""
    with fpscope_torch.Recorder(model, path, **recorder_arguments) as recorder:
        for x, y in micro_batches:
            loss = torch.nn.functional.cross_entropy(model(x), y) / len(micro_batches)
            loss.backward()
        recorder.step(loss)
    return records_of(snapshots_of(read_log(path)[1])[0])


class AccumulationTest(unittest.TestCase):
    def test_four_micro_batches_are_one_record_summing_their_histograms(self):
        micro = [batch(seed) for seed in range(4)]
        with tempfile.TemporaryDirectory() as d:
            accumulated = train_step(os.path.join(d, "four.jsonl"), Net(), micro)
            plain = train_step(os.path.join(d, "one.jsonl"), Net(), micro[:1])
        self.assertEqual(sorted(accumulated), sorted(plain))  # no "#2": the tensors of one plain step
        # The reference: each micro-batch's activations and activation gradients by np.frexp, summed;
        # the weight gradient the four backwards leave.
        model = Net()
        expected = {}
        for x, y in micro:
            outputs = {}

            def keep(module, inputs, output, name):
                output.retain_grad()
                outputs[name] = output

            hooks = [m.register_forward_hook(lambda m, i, o, n=n: keep(m, i, o, n))
                     for n, m in model.named_modules() if n in ("inp", "blocks.0.fc", "blocks.1.act", "head")]
            (torch.nn.functional.cross_entropy(model(x), y) / 4).backward()
            for hook in hooks:
                hook.remove()
            for name, output in outputs.items():
                for kind, values in (("activation", output), ("activation_gradient", output.grad)):
                    h = numpy_histogram(values.detach().numpy())
                    expected[(name, kind)] = add_histograms(expected[(name, kind)], h) if (name, kind) in expected else h
        for key, h in expected.items():
            self.assertEqual(record_histogram(accumulated[key]), h, key)
        self.assertEqual(sum(c for _, c in accumulated[("inp", "activation")]["bins"]), 4 * 8 * 8)
        for name, parameter in model.named_parameters():
            self.assertEqual(record_histogram(accumulated[(name, "weight_gradient")]), numpy_histogram(parameter.grad.numpy()), name)

    def test_a_module_called_twice_keeps_its_second_name_across_micro_batches(self):
        class Twice(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.fc = torch.nn.Linear(6, 6)
                self.out = torch.nn.Linear(6, 3)

            def forward(self, x):
                return self.out(self.fc(self.fc(x)))

        with tempfile.TemporaryDirectory() as d:
            records = train_step(os.path.join(d, "twice.jsonl"), Twice(), [batch(s) for s in range(3)])
        names = sorted({name for name, kind in records if kind == "activation"})
        self.assertEqual(names, ["fc", "fc#2", "out"])
        self.assertEqual(sum(c for _, c in records[("fc#2", "activation")]["bins"]), 3 * 8 * 6)


@unittest.skipUnless(TORCH_2, "activation checkpointing's recomputation is told from the forward by torch >= 2 only")
class CheckpointingTest(unittest.TestCase):
    def test_recomputed_forwards_are_not_recorded_twice(self):
        micro = [batch(seed) for seed in range(2)]
        with tempfile.TemporaryDirectory() as d:
            plain = train_step(os.path.join(d, "plain.jsonl"), Net(), micro)
            for how in ("non-reentrant", "reentrant"):
                checkpointed = train_step(os.path.join(d, f"{how}.jsonl"), Net(checkpoint=how), micro)
                self.assertEqual(sorted(checkpointed), sorted(plain), how)
                for key in plain:
                    self.assertEqual(record_histogram(checkpointed[key]), record_histogram(plain[key]), (how, key))

    def test_checkpoint_wrapped_blocks_keep_the_model_s_names(self):
        """apply_activation_checkpointing's CheckpointWrapper (as FSDP and Accelerate apply it): the
        same records under the same names as the plain model, no `_checkpoint_wrapped_module`."""
        try:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
        except ImportError:
            self.skipTest("torch.distributed.algorithms' checkpoint_wrapper is not here")
        micro = [batch(seed) for seed in range(2)]
        with tempfile.TemporaryDirectory() as d:
            wrapped = Net()
            wrapped.blocks = torch.nn.ModuleList([checkpoint_wrapper(block) for block in wrapped.blocks])
            checkpointed = train_step(os.path.join(d, "wrapped.jsonl"), wrapped, micro, include=["blocks.0", "blocks.1", "head"])
            included = train_step(os.path.join(d, "included.jsonl"), Net(), micro, include=["blocks.0", "blocks.1", "head"])
        self.assertEqual(sorted(checkpointed), sorted(included))
        self.assertIn(("blocks.1", "activation_gradient"), included)  # the residual stream, by its own name
        for key in included:
            self.assertEqual(record_histogram(checkpointed[key]), record_histogram(included[key]), key)


class GradientPenaltyTest(unittest.TestCase):
    def test_a_penalty_s_autograd_grad_pass_adds_its_activation_gradients_to_the_step_s(self):
        """A gradient penalty (WGAN-GP, R1): torch.autograd.grad of the output with respect to the
        input, create_graph=True, then backward() of the loss plus the penalty. Both passes run the
        modules' backward, so each module's activation gradients are both passes' (as two
        micro-batches' would be: docs/bridge.md); the weight gradients are the .grad that backward()
        leaves. The reference: each module output's gradient in the first pass (asked of
        autograd.grad) and its .grad after the second (retain_grad), which holds the penalty's
        part too: through Tanh's backward, which reads Tanh's output, the penalty reaches it.
        (Module full backward hooks miss that part: they see the gradient of a wrapper of the output.)"""
        x, y = batch(0)
        names = ("inp", "blocks.0.fc", "blocks.1.act", "head")

        def penalised_step(model, outputs=None):
            """The step; where `outputs` is a dict, the named modules' outputs are kept in it and
            the first pass's gradients of them returned."""
            hooks = [] if outputs is None else [
                m.register_forward_hook(lambda m, i, o, n=n: outputs.__setitem__(n, o)) for n, m in model.named_modules() if n in names]
            inputs = x.clone().requires_grad_(True)
            out = model(inputs)
            for hook in hooks:
                hook.remove()
            kept = [] if outputs is None else [outputs[n] for n in names]
            for o in kept:
                o.retain_grad()
            gradient, *first = torch.autograd.grad(out.sum(), [inputs] + kept, create_graph=True)
            for o in kept:
                o.grad = None  # (torch 2.x's retain_grad keeps this pass's too)
            loss = torch.nn.functional.cross_entropy(out, y) + (gradient.norm(2, dim=1) - 1).pow(2).mean()
            loss.backward()
            return loss if outputs is None else first

        model = Net()
        outputs = {}
        first = penalised_step(model, outputs)
        expected = {n: add_histograms(numpy_histogram(g.detach().numpy()), numpy_histogram(outputs[n].grad.numpy())) for n, g in zip(names, first)}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "penalty.jsonl")
            recorded_model = Net()
            with fpscope_torch.Recorder(recorded_model, path) as recorder:
                recorder.step(penalised_step(recorded_model))
            records = records_of(snapshots_of(read_log(path)[1])[0])
        for name in names:
            self.assertEqual(record_histogram(records[(name, "activation_gradient")]), expected[name], name)
        head = records[("head", "activation_gradient")]
        self.assertEqual(sum(c for _, c in head["bins"]) + head["zero"], 2 * 8 * 3)  # two passes of a batch of 8 through 3 outputs
        for name, parameter in recorded_model.named_parameters():
            self.assertEqual(record_histogram(records[(name, "weight_gradient")]), numpy_histogram(parameter.grad.numpy()), name)
        self.assertEqual(record_histogram(records[("blocks.1.fc.weight", "weight_gradient")]),
                         numpy_histogram(dict(model.named_parameters())["blocks.1.fc.weight"].grad.numpy()))


class DataParallelWrapperTest(unittest.TestCase):
    def test_a_wrapped_model_is_recorded_under_its_own_names(self):
        # Without GPUs, DataParallel runs its module as it is: the same step, the same records.
        micro = [batch(0)]
        with tempfile.TemporaryDirectory() as d:
            plain = train_step(os.path.join(d, "plain.jsonl"), Net(), micro)
            wrapped = train_step(os.path.join(d, "wrapped.jsonl"), torch.nn.DataParallel(Net(), device_ids=[]), micro)
            self.assertEqual(read_log(os.path.join(d, "wrapped.jsonl"))[0]["model"], "Net")
        self.assertIn(("blocks.0.fc.weight", "weight_gradient"), plain)
        self.assertEqual(sorted(wrapped), sorted(plain))
        for key in plain:
            self.assertEqual(record_histogram(wrapped[key]), record_histogram(plain[key]), key)


@unittest.skipUnless(TORCH_2 and hasattr(torch, "compile"), "torch.compile needs torch >= 2")
class CompileTest(unittest.TestCase):
    def train(self, record, d, steps=20, record_the_wrapper=True):
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        model = Net()
        compiled = torch.compile(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        recorded = compiled if record_the_wrapper else model
        recorder = fpscope_torch.Recorder(recorded, os.path.join(d, "compiled.jsonl"), every=1) if record else None
        messages = io.StringIO()
        handler = logging.StreamHandler(messages)
        logging.getLogger("torch._dynamo").addHandler(handler)
        torch._logging.set_logs(recompiles=True)
        try:
            for step in range(steps):
                x, y = batch(step)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(compiled(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                if recorder is not None:
                    recorder.step(loss)
        finally:
            torch._logging.set_logs()
            logging.getLogger("torch._dynamo").removeHandler(handler)
            if recorder is not None:
                recorder.close()
        return [p.detach().clone() for p in model.parameters()], dict(counters["graph_break"]), dict(counters["stats"]), messages.getvalue()

    def test_recorded_compiled_steps_are_the_unrecorded_ones(self):
        with tempfile.TemporaryDirectory() as d:
            plain, _, _, _ = self.train(False, d)
            recorded, breaks, stats, messages = self.train(True, d)
            self.assertEqual(breaks, {})
            self.assertEqual(stats.get("unique_graphs"), 1, stats)
            self.assertNotIn("ecompil", messages)  # no "Recompiling", no recompile_limit warning
            for a, b in zip(plain, recorded):
                self.assertTrue(torch.equal(a, b))
            header, lines = read_log(os.path.join(d, "compiled.jsonl"))
            self.assertEqual(header["model"], "Net")
            self.assertEqual(len(snapshots_of(lines)), 20)
            names = {name for name, _ in records_of(snapshots_of(lines)[0])}
            self.assertIn("blocks.0.fc.weight", names)
            self.assertFalse(any("_orig_mod" in name for name in names))
            # No activation is recorded inside compiled code: the format is the one autocast casts
            # to around the wrapper's forward (its pre-hook runs eagerly, outside the graph).
            self.assertEqual(header["format"], "bf16")
            self.assertNotIn("format_assumed", header)

    def test_a_model_compiled_apart_from_the_one_recorded_has_its_format_assumed(self):
        """The Recorder given the model, the loop calling a torch.compile of it: every hook of the
        model runs inside the graph, so nothing tells the bf16 autocast around it. The header says
        its fp16 is assumed, and analyze asks about fp16 as the default, saying the log does not
        say what the run cast to -- not as the run's own."""
        with tempfile.TemporaryDirectory() as d:
            with self.assertWarnsRegex(RuntimeWarning, r"nothing in the first recorded step says what format .*compiled\.jsonl's run "
                                                       r"casts to .* pass fmt="):
                self.train(True, d, steps=2, record_the_wrapper=False)
            path = os.path.join(d, "compiled.jsonl")
            header, lines = read_log(path)
            self.assertEqual((header["format"], header.get("format_assumed")), ("fp16", True))
            self.assertEqual(len(snapshots_of(lines)), 2)
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("format fp16 (the default: the run log does not say what the run cast to", result.stdout)


@unittest.skipUnless(HAVE_TRANSFORMERS, "HuggingFace transformers is not installed (scripts/test-torch installs it)")
class TransformersTest(unittest.TestCase):
    def gpt2(self):
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)
        return GPT2LMHeadModel(config)

    def step(self, path, micro_batches, checkpointing):
        model = self.gpt2()
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with fpscope_torch.Recorder(model, path, scaler=scaler) as recorder:
            for tokens in micro_batches:
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = model(tokens, labels=tokens).loss / len(micro_batches)
                scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            recorder.step(loss)
        return records_of(snapshots_of(read_log(path)[1])[0])

    def test_gpt2_accumulated_and_checkpointed_is_one_plain_step(self):
        torch.manual_seed(3)
        micro = [torch.randint(0, 64, (2, 16)) for _ in range(4)]
        with tempfile.TemporaryDirectory() as d:
            plain = self.step(os.path.join(d, "plain.jsonl"), micro[:1], False)
            both = self.step(os.path.join(d, "both.jsonl"), micro, True)
        self.assertFalse([key for key in both if "#" in key[0]])
        self.assertEqual(sorted(both), sorted(plain))
        self.assertEqual(sum(c for _, c in both[("transformer.h.0.mlp.c_fc", "activation")]["bins"]),
                         4 * sum(c for _, c in plain[("transformer.h.0.mlp.c_fc", "activation")]["bins"]))


def dyadic_model():
    """Weights, inputs and loss weights with few significant bits: every sum the data-parallel
    runs make is exact in any order, so two ranks and one process agree bit for bit."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randint(-4, 5, parameter.shape) / 8)
    return model


def dyadic_batch():
    torch.manual_seed(1)
    return torch.randint(-4, 5, (8, 4)) / 4, torch.randint(-2, 3, (8, 2)) / 2


def data_parallel_step(path, rank, world, wrap):
    """One recorded step over rank `rank`'s half of the batch (all of it when world is 1); the loss
    is a sum, so a rank's activation gradients are the whole batch's rows."""
    model = dyadic_model()
    if wrap == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif wrap == "fsdp2":
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    elif wrap in ("fsdp1", "fsdp1-flat"):  # FullyShardedDataParallel, a unit per layer and the root's
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        model = FullyShardedDataParallel(model, device_id=torch.device("cpu"), use_orig_params=wrap == "fsdp1",
                                         auto_wrap_policy=ModuleWrapPolicy({torch.nn.Linear}))
    elif wrap == "fsdp1-no-shard":  # every rank holds the whole parameters, as DDP does
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        model = FullyShardedDataParallel(model, device_id=torch.device("cpu"), use_orig_params=True,
                                         sharding_strategy=ShardingStrategy.NO_SHARD)
    trained = model
    if wrap == "fsdp1-root-only":  # one unit, the root's, trained; the Recorder given the module inside it
        from torch.distributed.fsdp import FullyShardedDataParallel
        trained = FullyShardedDataParallel(model, device_id=torch.device("cpu"), use_orig_params=True)
    x, weights = dyadic_batch()
    rows = slice(0, 8) if world == 1 else slice(rank * 4, rank * 4 + 4)
    with fpscope_torch.Recorder(model, path, overwrite=True) as recorder:
        loss = (trained(x[rows]) * weights[rows]).sum()
        loss.backward()
        recorder.step(loss)


def placements_worker(rank, world, path, port):
    """_local's rule on a 2-rank mesh: a sharded DTensor gives its shard (summed), a replicated one
    its copy (rank 0's); written to `path` by rank 0."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Replicate, Shard, distribute_tensor
        from fpscope_torch.recorder import _local
        mesh = init_device_mesh("cpu", (world,))
        whole = torch.arange(8, dtype=torch.float32).reshape(4, 2)
        shard, shard_summed = _local(distribute_tensor(whole, mesh, [Shard(0)]))
        copy, copy_summed = _local(distribute_tensor(whole, mesh, [Replicate()]))
        if rank == 0:
            with open(path, "w") as f:
                json.dump({"shard": shard.tolist(), "shard_summed": shard_summed, "copy": copy.tolist(), "copy_summed": copy_summed}, f)
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def data_parallel_worker(rank, world, path, port, wrap):
    import faulthandler
    faulthandler.enable()  # a rank that aborts says where
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        data_parallel_step(path, rank, world, wrap)
        torch.distributed.barrier()  # both ranks done before either tears the group down
    finally:
        torch.distributed.destroy_process_group()
    # After FSDP2 over gloo, about one exit in ten aborts in C++ teardown with no Python frame left
    # ("terminate called without an active exception", torch 2.15): the log is closed and the
    # group destroyed by now, so the rank leaves without running the process's destructors.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def free_port():
    """A TCP port nobody listens on now (the kernel's pick): a fixed or pid-derived one can still be
    held by an earlier run's socket, and a rank that cannot rendezvous aborts."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fsdp2_available():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
        return torch.distributed.is_available()
    except Exception:  # ImportError, or torch 1.13's fsdp package failing to import
        return False


@unittest.skipUnless(torch.distributed.is_available(), "torch.distributed is not here")
class DataParallelTest(unittest.TestCase):
    def compare(self, wrap, kinds=("activation", "activation_gradient", "weight", "weight_gradient")):
        """One process's records against two ranks' under `wrap`, of `kinds` (the two ranks' have
        no others)."""
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as d:
            data_parallel_step(os.path.join(d, "one.jsonl"), 0, 1, None)
            one = records_of(snapshots_of(read_log(os.path.join(d, "one.jsonl"))[1])[0])
            one = {key: record for key, record in one.items() if key[1] in kinds}
            port = free_port()
            mp.spawn(data_parallel_worker, args=(2, os.path.join(d, "two.jsonl"), port, wrap), nprocs=2, join=True)
            header, lines = read_log(os.path.join(d, "two.jsonl"))
            two = records_of(snapshots_of(lines)[0])
        self.assertEqual(header["model"], "Sequential")
        self.assertEqual(sorted(two), sorted(one))
        for key, record in one.items():
            expected = record_histogram(record)
            if key[1] == "weight_gradient":
                # The averaged gradient the optimizer sees: the sum over both halves, halved.
                expected = ({binade - 1: count for binade, count in expected[0].items()},) + expected[1:]
            self.assertEqual(record_histogram(two[key]), expected, key)
        return one

    def test_ddp_weight_gradients_are_the_averaged_ones(self):
        one = self.compare("ddp")
        self.assertIn(("0.weight", "weight_gradient"), one)

    @unittest.skipUnless(fsdp2_available(), "DTensor placements need torch >= 2.6")
    def test_a_shard_is_summed_and_a_replica_is_not(self):
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "placements.json")
            mp.spawn(placements_worker, args=(2, path, free_port()), nprocs=2, join=True)
            with open(path) as f:
                seen = json.load(f)
        self.assertEqual((seen["shard"], seen["shard_summed"]), ([[0.0, 1.0], [2.0, 3.0]], True))  # rank 0's rows
        self.assertEqual((seen["copy"], seen["copy_summed"]), ([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]], False))

    @unittest.skipUnless(fsdp2_available(), "FSDP2 (torch.distributed.fsdp.fully_shard) needs torch >= 2.6")
    def test_fsdp2_shards_sum_to_the_whole_tensors(self):
        self.compare("fsdp2")

    @unittest.skipUnless(fsdp2_available(), "FSDP1 on the CPU is tested with torch >= 2.6")
    def test_fsdp1_pieces_sum_to_the_whole_tensors_under_the_model_s_names(self):
        self.compare("fsdp1")

    @unittest.skipUnless(fsdp2_available(), "FSDP1 on the CPU is tested with torch >= 2.6")
    def test_fsdp1_unsharded_parameters_are_rank_0_s(self):
        self.compare("fsdp1-no-shard")

    @unittest.skipUnless(fsdp2_available(), "FSDP1 on the CPU is tested with torch >= 2.6")
    def test_fsdp1_flat_shards_are_left_out_of_the_weights(self):
        """use_orig_params=False: the flat shards' pieces cannot be named, so no weight record is
        made of them (the activations' are whole)."""
        self.compare("fsdp1-flat", kinds=("activation", "activation_gradient"))

    @unittest.skipUnless(fsdp2_available(), "FSDP1 on the CPU is tested with torch >= 2.6")
    def test_fsdp1_pieces_of_a_unit_outside_the_model_given_are_left_out(self):
        """The Recorder given the module inside the root FSDP1 unit: how the unit holds its
        parameters is not in sight, so no weight record is made of their pieces."""
        self.compare("fsdp1-root-only", kinds=("activation", "activation_gradient"))


@unittest.skipUnless(HAVE_TRANSFORMERS, "HuggingFace transformers is not installed (scripts/test-torch installs it)")
class LongNamesTest(unittest.TestCase):
    def test_analyze_shows_every_long_name_whole_with_its_kind(self):
        import subprocess
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=12, n_head=2))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path, include=["transformer.h.10", "transformer.h.11"]) as recorder:
                tokens = torch.randint(0, 64, (2, 16))
                loss = model(tokens, labels=tokens).loss
                loss.backward()
                recorder.step(loss)
            names = {(t["name"], t["kind"]) for t in snapshots_of(read_log(path)[1])[0]["tensors"]}
            shown = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True, check=True).stdout
        self.assertIn(("transformer.h.11.attn.resid_dropout", "activation_gradient"), names)
        for name, kind in names:
            self.assertRegex(shown, f"\\n{name} {kind} +[0-9]", (name, kind))


# A training of 8 steps whose log fills its disk at step 2 or 3: under RLIMIT_FSIZE ("limit"), room
# made again by lifting the limit; on a 256 KiB tmpfs ("tmpfs"), filled with ballast but for 8 KiB,
# room made by deleting the ballast. Prints what was refused and the log as it ended.
FULL_DISK_CHILD = r"""
import json, os, resource, signal, sys
import torch, fpscope_torch
from fpscope_torch.log_file import RunLogError
path, mode = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), not the process
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
recorder = fpscope_torch.Recorder(model, path, scaler=False)
ballast = os.path.join(os.path.dirname(path), "ballast")
refused = []
for step in range(8):
    if step == 1:  # the log's lines are a few KiB: step 1 fits, a later one does not
        if mode == "limit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 2 * (os.path.getsize(path)), resource.RLIM_INFINITY))
        else:
            fd = os.open(ballast, os.O_WRONLY | os.O_CREAT)
            try:
                while True:
                    os.write(fd, b"0" * 4096)
            except OSError:
                os.close(fd)
            os.truncate(ballast, max(0, os.path.getsize(ballast) - 8192 - 4096))
    x, y = torch.randn(16, 6), torch.randint(0, 3, (16,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    before = os.path.getsize(path)
    try:
        recorder.step(loss)
    except RunLogError as error:
        refused.append({"step": step, "error": str(error), "size_before": before, "size_after": os.path.getsize(path)})
        if mode == "limit":
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        else:
            os.unlink(ballast)
recorder.close()
with open(path) as f:
    print(json.dumps({"refused": refused, "log": f.read()}))
"""


class MisuseTest(unittest.TestCase):
    def model(self):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))

    def test_a_step_between_forward_and_backward(self):
        model = self.model()
        with tempfile.TemporaryDirectory() as d:
            recorder = fpscope_torch.Recorder(model, os.path.join(d, "run.jsonl"))
            x, y = batch(0)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            with self.assertRaisesRegex(RuntimeError, r"^Recorder.step\(\) came after a forward pass whose backward has not run"):
                recorder.step(loss)
            recorder.close()

    def test_step_after_close(self):
        with tempfile.TemporaryDirectory() as d:
            recorder = fpscope_torch.Recorder(self.model(), os.path.join(d, "run.jsonl"))
            recorder.close()
            recorder.close()  # twice: nothing
            with self.assertRaisesRegex(RuntimeError, r"^Recorder.step\(\) after close\(\): the run log .*run.jsonl is closed"):
                recorder.step(1.0)

    def test_a_loop_that_never_calls_step_is_told_at_close(self):
        """Forward and backward passes and no step(): the log holds its header alone, and close()
        says why in one warning. A Recorder closed without training, or after a step, says nothing."""
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))

        def warnings_of(steps, train_after=0):
            model = self.model()
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    recorder = fpscope_torch.Recorder(model, path)
                    for k in range(steps + train_after):
                        torch.nn.functional.cross_entropy(model(x), y).backward()
                        if k < steps:
                            recorder.step(1.0)
                    recorder.close()
                    recorder.close()
                lines = read_log(path)[1]
            return [str(w.message) for w in said if issubclass(w.category, RuntimeWarning)], len(lines)

        said, lines = warnings_of(0, train_after=3)
        self.assertEqual(lines, 0)
        self.assertEqual(len(said), 1)
        self.assertRegex(said[0], r"^fpscope_torch: .*run.jsonl: the model ran backward passes but Recorder.step\(\) was never called, "
                                  r"so the log holds no step: call recorder.step\(loss\) once per optimizer step")
        self.assertEqual(warnings_of(0), ([], 0))
        self.assertEqual(warnings_of(1, train_after=1), ([], 1))

    def test_an_existing_log_is_neither_truncated_nor_shared(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with open(path, "w") as f:
                f.write("what the user had\n")
            with self.assertRaisesRegex(RunLogError, r"run.jsonl exists: pass append=True to go on with it, or overwrite=True"):
                fpscope_torch.Recorder(self.model(), path)
            with open(path) as f:
                self.assertEqual(f.read(), "what the user had\n")
            # Another process's Recorder holds the log until it closes (one of this process's is
            # closed by a new one asked to take the log: test_recorder.py).
            holder = """
import sys, torch, fpscope_torch
recorder = fpscope_torch.Recorder(torch.nn.Linear(2, 2), sys.argv[1], overwrite=True)
print("open", flush=True)
sys.stdin.readline()
recorder.close()
"""
            env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
            with subprocess.Popen([sys.executable, "-c", holder, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  env=env) as other:
                self.assertEqual(other.stdout.readline(), "open\n")
                with open(path, "rb") as f:
                    held = f.read()
                for arguments in ({"overwrite": True}, {"append": True}):
                    with self.assertRaisesRegex(RunLogError, r"another writer .* is writing it"):
                        fpscope_torch.Recorder(self.model(), path, **arguments)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), held)
                other.communicate("\n", timeout=60)
            self.assertEqual(other.returncode, 0)
            fpscope_torch.Recorder(self.model(), path, append=True).close()  # free again once closed

    def test_a_full_disk_leaves_the_log_whole_and_the_run_goes_on(self):
        """A step whose lines do not fit is refused in one sentence naming the log, the log cut back
        to its last whole line (a torn line would make every later line unreadable); once there is
        room the next steps are written. Twice: under a file size limit (RLIMIT_FSIZE, anywhere),
        and on a tmpfs that fills, in a private mount namespace where this user may make one."""
        with tempfile.TemporaryDirectory() as d:
            runs = [("limit", d)]
            probe = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$0"', d]
            if shutil.which("unshare") and subprocess.run(probe, capture_output=True).returncode == 0:
                runs.append(("tmpfs", d))
            else:
                print("test_a_full_disk: no private mount namespace with a tmpfs here (unshare -m, mount): the tmpfs half is not run",
                      file=sys.stderr)
            for mode, folder in runs:
                path = os.path.join(folder, f"{mode}.jsonl")
                command = [sys.executable, "-c", FULL_DISK_CHILD, path, mode]
                if mode == "tmpfs":
                    room = os.path.join(folder, "room")
                    os.mkdir(room)
                    path = os.path.join(room, "run.jsonl")
                    command = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=256k tmpfs "$0" && exec "$@"', room,
                               sys.executable, "-c", FULL_DISK_CHILD, path, mode]
                    # The log lives in the namespace's tmpfs: the child copies it out for reading.
                env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                self.assertEqual(done.returncode, 0, done.stderr)
                report = json.loads(done.stdout.splitlines()[-1])
                (refused,) = report["refused"]
                self.assertRegex(refused["error"], r"^" + re.escape(path) + r": cannot write to it \((File too large|No space left on device)\); "
                                 r"it is left as it was, its lines whole$", mode)
                self.assertEqual(refused["size_after"], refused["size_before"], mode)
                lines = [json.loads(line) for line in report["log"].splitlines()]  # every line whole
                self.assertEqual([line["step"] for line in lines[1:]], [k for k in range(8) if k != refused["step"]], mode)
                copy = os.path.join(d, f"{mode}-copy.jsonl")
                with open(copy, "w") as f:
                    f.write(report["log"])
                analyzed = subprocess.run([FPSCOPE, "analyze", copy, "--json"], capture_output=True, text=True)
                self.assertEqual(analyzed.returncode, 0, analyzed.stderr)
                self.assertNotIn("incomplete", analyzed.stdout + analyzed.stderr)

    def test_a_loop_that_raises_without_close_loses_no_step(self):
        """Recording every 10th step, a loop raises at step 7, on the NaN loss its forward made, and
        never calls close(): steps 0..6 are in the log (the culprit of the skip at step 5, a NaN
        put into the first layer's output, with them; a CPU training writes each step's line at
        once, an accelerator's holds them for the next recorded step), and at the interpreter's
        exit the Recorder writes step 7 as unfinished, with its culprit."""
        child = """
import sys, torch, fpscope_torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
model[0].register_forward_hook(lambda m, i, out: out.index_fill(1, torch.tensor([2]), float("nan")) if step in (5, 7) else None)
recorder = fpscope_torch.Recorder(model, sys.argv[1], every=10, scaler=False)
for step in range(8):
    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,)))
    if step == 7:
        raise RuntimeError("the loop stops here")
    loss.backward()
    recorder.step(loss, skipped=step == 5)
    model.zero_grad()
"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
            done = subprocess.run([sys.executable, "-c", child, path], capture_output=True, text=True, env=env)
            self.assertEqual(done.returncode, 1)
            self.assertIn("RuntimeError: the loop stops here", done.stderr)
            lines = read_log(path)[1]
        self.assertEqual([line["step"] for line in lines], list(range(8)))
        self.assertEqual([line["step"] for line in lines if line.get("culprit")], [5, 7])
        self.assertEqual([line["step"] for line in lines if line.get("finished") is False], [7])
        for k in (5, 7):
            self.assertEqual((lines[k]["culprit"]["name"], lines[k]["culprit"]["fault"]), ("0", "nan"))

    def test_a_terminated_loop_loses_no_step(self):
        """SIGTERM (a scheduler preempting the job, torchrun ending the other ranks) ends a process
        without running atexit. Recording every 10th step, a loop terminated in step 6, after a
        forward that made a NaN, still writes step 6 as unfinished with its culprit after steps
        0..5, and the process ends by the signal as it would have. A DataLoader worker forked from
        it and terminated writes nothing of its parent's; a handler the program set is left in
        place."""
        child = """
import os, signal, sys, time, torch, fpscope_torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
model[0].register_forward_hook(lambda m, i, out: out.index_fill(1, torch.tensor([2]), float("nan")) if step == 6 else None)
recorder = fpscope_torch.Recorder(model, sys.argv[1], every=10, scaler=False)
for step in range(7):
    if step == 6:  # terminated inside the step, after its forward
        model(torch.randn(4, 6))
        worker = os.fork()  # a worker forked there, terminated first
        if worker == 0:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
            os._exit(3)
        print("worker", os.waitpid(worker, 0)[1], flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        print("not terminated", flush=True)
    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 6)), torch.randint(0, 3, (4,)))
    loss.backward()
    recorder.step(loss)
    model.zero_grad()
"""
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), ".."))
            done = subprocess.run([sys.executable, "-c", child, path], capture_output=True, text=True, env=env, timeout=60)
            self.assertEqual(done.returncode, -signal.SIGTERM, done.stderr)
            self.assertEqual(done.stdout.split(), ["worker", str(signal.SIGTERM)])  # the worker ended by the signal too
            lines = read_log(path)[1]
        self.assertEqual([line["step"] for line in lines], list(range(7)))
        self.assertEqual([line["step"] for line in lines if line.get("finished") is False], [6])
        self.assertEqual((lines[6]["culprit"]["name"], lines[6]["culprit"]["fault"]), ("0", "nan"))

        def own(signum, frame):
            pass
        previous = signal.signal(signal.SIGTERM, own)
        try:
            with tempfile.TemporaryDirectory() as d:
                with fpscope_torch.Recorder(self.model(), os.path.join(d, "run.jsonl")):
                    self.assertIs(signal.getsignal(signal.SIGTERM), own)
        finally:
            signal.signal(signal.SIGTERM, previous)

    def test_a_missing_folder_is_named_as_given(self):
        with tempfile.TemporaryDirectory() as d:
            os.chdir(d)
            try:
                with self.assertRaisesRegex(RunLogError, r"^nowhere/run.jsonl: its folder nowhere does not exist$"):
                    fpscope_torch.Recorder(self.model(), "nowhere/run.jsonl")
            finally:
                os.chdir("/")

    def test_include_and_exclude_that_match_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with self.assertRaisesRegex(ValueError, r"include= names \['nosuchlayer'\], which match no module or parameter"):
                fpscope_torch.Recorder(self.model(), path, include=["nosuchlayer"])
            with self.assertRaisesRegex(ValueError, r"exclude= names \['2.wieght'\]"):
                fpscope_torch.Recorder(self.model(), path, exclude=["2.wieght"])
            with self.assertRaisesRegex(TypeError, r"include= takes a list of module names, not the string '0'"):
                fpscope_torch.Recorder(self.model(), path, include="0")
            self.assertFalse(os.path.exists(path))

    def test_a_non_leaf_module_named_in_include_is_recorded(self):
        with tempfile.TemporaryDirectory() as d:
            records = train_step(os.path.join(d, "run.jsonl"), Net(), [batch(0)], include=["blocks.0", "head"])
        self.assertEqual(sorted({name for name, kind in records if kind == "activation"}),
                         ["blocks.0", "blocks.0.act", "blocks.0.fc", "head"])
        self.assertIn(("blocks.0", "activation_gradient"), records)  # the residual stream's gradient
        self.assertNotIn(("inp.weight", "weight"), records)

    def test_complex_parameters_count_both_parts(self):
        class Complex(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.tensor([1 + 4j, 0.5 - 0j], dtype=torch.complex64))

            def forward(self, x):
                return (x * self.w).abs().sum()

        model = Complex()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path) as recorder:
                loss = model(torch.ones(2, dtype=torch.complex64))
                loss.backward()
                recorder.step(loss)
            records = records_of(snapshots_of(read_log(path)[1])[0])
        self.assertEqual(record_histogram(records[("w", "weight")]), ({0: 1, 2: 1, -1: 1}, 1, 0, 0))

    @unittest.skipUnless(TORCH_2, "GradScaler on the CPU needs torch >= 2")
    def test_a_grad_scaler_used_but_not_given_and_a_step_before_its_update(self):
        model = self.model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        with tempfile.TemporaryDirectory() as d:
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
            recorder = fpscope_torch.Recorder(model, os.path.join(d, "a.jsonl"))
            x, y = batch(0)
            scaler.scale(torch.nn.functional.cross_entropy(model(x), y)).backward()
            scaler.step(optimizer)
            scaler.update()
            with self.assertRaisesRegex(RuntimeError, r"^a GradScaler is scaling this training's losses but was not given to Recorder"):
                recorder.step()
            recorder.close()
            # scaler=False: the user says that scaler is not this model's.
            quiet = fpscope_torch.Recorder(model, os.path.join(d, "b.jsonl"), scaler=False)
            scaler.scale(torch.nn.functional.cross_entropy(model(x), y)).backward()
            quiet.step()
            quiet.close()
            recorder = fpscope_torch.Recorder(model, os.path.join(d, "c.jsonl"), scaler=scaler)
            optimizer.zero_grad()
            scaler.scale(torch.nn.functional.cross_entropy(model(x), y)).backward()
            scaler.step(optimizer)
            with self.assertRaisesRegex(RuntimeError, r"came after scaler.step\(\) but before scaler.update\(\)"):
                recorder.step()
            recorder.close()
            # A subclass of a subclass (FSDP's ShardedGradScaler and Lightning's are subclasses), the
            # only scaler left.
            del scaler
            gc.collect()
            scaled_twice = type("ScaledTwice", (type("Scaled", (torch.amp.GradScaler,), {}),), {})("cpu", init_scale=2.0 ** 12)
            for used in (False, True):
                recorder = fpscope_torch.Recorder(model, os.path.join(d, f"d{used}.jsonl"))
                loss = torch.nn.functional.cross_entropy(model(x), y)
                (scaled_twice.scale(loss) if used else loss).backward()
                if used:
                    with self.assertRaisesRegex(RuntimeError, r"^a GradScaler is scaling this training's losses but was not given to Recorder"):
                        recorder.step()
                else:
                    recorder.step()  # made, not yet used: no scale there to find
                recorder.close()


if __name__ == "__main__":
    unittest.main()
