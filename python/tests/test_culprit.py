"""The bridge's culprit report: the sentinel reads every tensor on every step, recorded or not,
and a step that skipped or lost its loss gets a culprit in its step record -- the first tensor in
execution order (the weights, the forward's activations, the backward's gradients) that held a
NaN, an infinity or a value past the run's format's largest. Injected NaNs (through a forward
hook), a GradScaler's skip at step 0 and a skip between recorded steps of a HuggingFace GPT-2 under
fp16 autocast, the micro-batch of gradient accumulation; fpscope analyze reads what was written;
the sentinel changes nothing a training computes."""

import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
import warnings

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import fpscope_torch  # noqa: E402
from fpscope_torch.recorder import find_culprit  # noqa: E402

FPSCOPE = os.environ.get("FPSCOPE_BIN", "fpscope")
TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def read_steps(path):
    with open(path) as f:
        return [json.loads(line) for line in f][1:]


def poison(module, value, when):
    """A forward hook that puts `value` into element 0 of the module's output while when() says so."""
    def hook(mod, inputs, output):
        if when():
            output = output.clone()
            output.view(-1)[0] = value
            return output
    return module.register_forward_hook(hook)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.act, self.fc2, self.fc3 = torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


def culprit_of_a_skipped_step(model):
    """The culprit the recorder names for one step of `model` (8 inputs, 4 classes) on a random
    batch, the step marked skipped."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.jsonl")
        with fpscope_torch.Recorder(model, path, every=5, scaler=False, global_step=1) as recorder:
            loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,)))
            loss.backward()
            recorder.step(loss, skipped=True)
        return read_steps(path)[0]["culprit"]


class CulpritRuleTest(unittest.TestCase):
    def test_the_first_fault_in_order_and_what_came_before(self):
        nan, inf = float("nan"), float("inf")
        readings = [("fc1.weight", "weight", None, 0.5), ("fc1", "activation", 0, 900.0), ("fc2", "activation_gradient", 0, 65504.0)]
        # What leads to a gradient is the gradients before it; to an activation, what came before that is not one.
        self.assertEqual(find_culprit(readings + [("fc2", "activation", 0, nan)], "fp16")["upstream"]["name"], "fc1")
        self.assertIsNone(find_culprit(readings, "fp16"))
        readings += [("fc2.weight", "weight_gradient", 0, 70000.0), ("fc1", "activation_gradient", 1, nan)]
        culprit = find_culprit(readings, "fp16")
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["position"]), ("fc2.weight", "weight_gradient", "overflow", 3))
        self.assertEqual(culprit["upstream"], {"name": "fc2", "kind": "activation_gradient", "largest": 65504.0})
        self.assertEqual(culprit["micro_batch"], 0)
        culprit = find_culprit(readings, "bf16")
        self.assertEqual((culprit["fault"], culprit["largest"], culprit["micro_batch"]), ("nan", None, 1))
        culprit = find_culprit([("w", "weight", None, inf)] + readings, "bf16")
        self.assertEqual((culprit["fault"], culprit["position"]), ("inf", 0))
        self.assertNotIn("upstream", culprit)
        self.assertNotIn("micro_batch", culprit)


class SentinelReadingTest(unittest.TestCase):
    def test_the_c_reading_is_the_largest_magnitude_in_every_dtype(self):
        from fpscope_torch import exponent_counts
        torch.manual_seed(0)
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for special in (None, float("inf"), float("-inf"), float("nan"), 0.0):
                for n in (1, 7, 1000, 4099):
                    x = (torch.randn(n) * 100).to(dtype)
                    if special is not None:
                        x[n // 2] = special
                    got = exponent_counts.largest_magnitude(x)
                    if got is None:  # only where no C compiler answers: a compile error is a failure
                        self.assertIn("no C compiler", exponent_counts.why_not())
                        self.skipTest(exponent_counts.why_not())
                    want = x.float().abs().max().item()
                    self.assertTrue(got == want or (math.isnan(got) and math.isnan(want)), (dtype, special, n, got, want))
        tiny = torch.tensor([0.0, -2.0 ** -149, 2.0 ** -140])
        self.assertEqual(exponent_counts.largest_magnitude(tiny), 2.0 ** -140)
        self.assertEqual(exponent_counts.largest_magnitude(torch.tensor([-6.0e-8], dtype=torch.float16)), float(torch.tensor(6.0e-8, dtype=torch.float16)))


class BridgeCulpritTest(unittest.TestCase):
    def test_the_device_path_names_the_same_culprits(self):
        """aminmax (what a GPU's tensors take) and the C pass give the same culprits."""
        from fpscope_torch import exponent_counts
        exponent_counts.largest_magnitude(torch.zeros(1))  # loads it, where it can
        saved = exponent_counts._state.get("largest")
        logs = []
        try:
            for use_c in (True, False):
                exponent_counts._state["largest"] = saved if use_c else None
                torch.manual_seed(0)
                model = Mlp()
                # fc1's largest magnitude a negative value: the device's (min, max) must give |min|.
                handles = [poison(model.fc1, -1000.0, lambda: True), poison(model.fc2, float("nan"), lambda: True)]
                logs.append(culprit_of_a_skipped_step(model))
                for handle in handles:
                    handle.remove()
        finally:
            exponent_counts._state["largest"] = saved
        self.assertEqual(logs[0], logs[1])
        self.assertEqual((logs[0]["name"], logs[0]["fault"]), ("fc2", "nan"))
        self.assertEqual(logs[0]["upstream"], {"name": "fc1", "kind": "activation", "largest": 1000.0})

    @unittest.skipUnless(hasattr(torch, "_foreach_norm"), "this torch has no _foreach_norm")
    def test_parameters_read_many_to_a_launch_name_the_same_culprits(self):
        """The parameters' readings an accelerator takes (torch._foreach_norm of order inf, one
        launch per dtype; forced here on the CPU) and the C pass give the same culprits and the
        same largest values before them: a NaN in a weight, an infinity in a weight gradient."""
        from fpscope_torch import recorder as recorder_module

        def culprit(batched, fault):
            saved = recorder_module._reads_batched
            recorder_module._reads_batched = (lambda device: True) if batched else saved
            try:
                torch.manual_seed(0)
                model = Mlp()
                if fault == "weight":
                    with torch.no_grad():
                        model.fc2.weight[3, 5] = float("nan")
                else:
                    model.fc1.weight.register_hook(lambda g: g.index_fill(0, torch.tensor([2]), float("inf")))
                return culprit_of_a_skipped_step(model)
            finally:
                recorder_module._reads_batched = saved

        for fault, named in (("weight", ("fc2.weight", "weight", "nan")), ("gradient", ("fc1.weight", "weight_gradient", "inf"))):
            batched, one_at_a_time = culprit(True, fault), culprit(False, fault)
            self.assertEqual(batched, one_at_a_time, fault)
            self.assertEqual((batched["name"], batched["kind"], batched["fault"]), named, fault)

    def test_a_permuted_output_is_read_in_place(self):
        """A batch-second output (what MultiheadAttention hands a batch_first model) is read by the
        C pass over its storage, without a copy or torch.aminmax, and named where it overflows;
        its histogram on a recorded step is its contiguous copy's."""
        from fpscope_torch import exponent_counts
        from fpscope_torch.histogram import dense_view, exponent_histogram
        if exponent_counts.largest_magnitude(torch.zeros(1)) is None:
            self.skipTest(exponent_counts.why_not())
        x = torch.randn(4, 6, 5)
        for permuted in (x.transpose(0, 1), x.permute(2, 0, 1), x.t() if x.dim() == 2 else x.transpose(1, 2)):
            view = dense_view(permuted)
            self.assertTrue(view.is_contiguous())
            self.assertEqual(view.data_ptr(), x.data_ptr())  # a view of the same storage
            self.assertTrue(torch.equal(view.reshape(-1).sort().values, permuted.reshape(-1).sort().values))
        for gaps in (x[:, ::2], x[..., 1:], x[:1].expand(3, 6, 5)):
            self.assertIsNone(dense_view(gaps))
        turned = x.transpose(0, 1) * 1e30
        self.assertTrue(torch.equal(exponent_histogram(turned), exponent_histogram(turned.contiguous())))

        class BatchSecond(torch.nn.Module):
            def forward(self, x):
                return (x * 1e4).transpose(0, 1)  # (8 inputs) -> batch second

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.turn, self.fc2 = torch.nn.Linear(8, 8), BatchSecond(), torch.nn.Linear(8, 4)

            def forward(self, x):
                return self.fc2(self.turn(self.fc1(x)).transpose(0, 1))[:, 0]  # (a sum's gradient would be expanded: not dense)

        torch.manual_seed(0)
        model = Model()
        handle = poison(model.fc1, 10.0, lambda: True)  # x 1e4 in turn: 1e5, past fp16's largest
        saved, calls = torch.aminmax, []
        torch.aminmax = lambda *a, **k: calls.append(a) or saved(*a, **k)
        try:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with fpscope_torch.Recorder(model, path, every=5, scaler=False, precision="fp16-mixed", global_step=1) as recorder:
                    loss = torch.nn.functional.cross_entropy(model(torch.randn(3, 2, 8)), torch.randint(0, 4, (3,)))
                    loss.backward()
                    recorder.step(loss, skipped=True)
                culprit = read_steps(path)[0]["culprit"]
        finally:
            torch.aminmax = saved
            handle.remove()
        self.assertEqual(calls, [])
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"]), ("turn", "activation", "overflow"))
        self.assertEqual(culprit["largest"], float(torch.tensor(10.0) * 1e4))

    def test_a_tensor_handed_on_unchanged_is_read_once_and_one_changed_in_place_again(self):
        """Dropout with p = 0 returns its input, and its gradient node is its input's: that output
        and its gradient take the readings just made. A module that doubles its input in place
        and returns it hands on the same object at a new version: read again, and named."""
        from fpscope_torch import exponent_counts

        class Doubler(torch.nn.Module):
            def forward(self, x):
                return x.mul_(2)

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1, self.drop, self.twice, self.fc2 = torch.nn.Linear(8, 8), torch.nn.Dropout(0.0), Doubler(), torch.nn.Linear(8, 4)

            def forward(self, x):
                return self.fc2(self.twice(self.drop(self.fc1(x))))

        if exponent_counts.largest_magnitude(torch.zeros(1)) is None:
            self.skipTest(exponent_counts.why_not())
        torch.manual_seed(0)
        model = Model()
        handle = poison(model.fc1, 2.0e38, lambda: True)  # doubled: an infinity in float32
        saved, read = exponent_counts.largest_magnitude, []
        exponent_counts.largest_magnitude = lambda x: read.append(x.numel()) or saved(x)
        try:
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with fpscope_torch.Recorder(model, path, every=5, scaler=False, precision="fp32", global_step=1) as recorder:
                    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,)))
                    loss.backward()
                    readings, passes = len(recorder._labels), len(read)  # before step() reads the next step's weights
                    recorder.step(loss, skipped=True)
                culprit = read_steps(path)[0]["culprit"]
        finally:
            exponent_counts.largest_magnitude = saved
            handle.remove()
        # 4 weights, the model's input, 4 outputs, 4 output gradients, 4 weight gradients; drop's
        # output and gradient are fc1's (its gradient node's one gradient given to both hooks),
        # twice's are not.
        self.assertEqual((readings, passes), (17, 15))
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"]), ("twice", "activation", "inf"))
        # The largest before it is fc1's (drop's the same, later): what twice doubled.
        self.assertEqual(culprit["upstream"], {"name": "fc1", "kind": "activation", "largest": float(torch.tensor(2.0e38))})

    def test_an_injected_nan_is_named_recorded_step_or_not(self):
        torch.manual_seed(0)
        model = Mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
        step = [0]
        handle = poison(model.fc2, float("nan"), lambda: step[0] in (2, 4))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path, every=4, scaler=False) as recorder:
                for step[0] in range(6):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    finite = bool(torch.isfinite(loss))
                    if finite:  # as a scaler would: no update from a NaN
                        optimizer.step()
                    optimizer.zero_grad()
                    recorder.step(loss, skipped=not finite)
            handle.remove()
            steps = read_steps(path)
            culprits = {s["step"]: s.get("culprit") for s in steps}
            self.assertEqual([k for k, c in culprits.items() if c is not None], [2, 4])
            for k in (2, 4):  # 2: between recorded steps; 4: recorded
                c = culprits[k]
                # A float32 model without fmt: its format is fp32, as its first recorded step's activations say.
                self.assertEqual((c["name"], c["kind"], c["fault"], c["format"]), ("fc2", "activation", "nan", "fp32"))
                self.assertEqual(c["upstream"]["name"], "fc1")  # the largest before it: fc1's output (weights are under 1)
                self.assertEqual(c["micro_batch"], 0)
            self.assertNotIn("nan", culprits[2])  # no histograms that step: no counts
            self.assertEqual(culprits[4]["nan"], 1)  # the recorded step's own count
            self.assertIn("tensors", steps[4])
            # fpscope analyze reads them and says what they are.
            out = subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True, check=True).stdout
            skipped = json.loads(out)["skipped_steps"]
            self.assertEqual([s["step"] for s in skipped], [2, 4])
            self.assertIn("a NaN appeared in fc2 activation with finite inputs", skipped[0]["diagnosis"])
            self.assertIn("not a scaling problem", skipped[0]["diagnosis"])

    def test_a_broken_batch_is_named_as_the_models_input_and_a_mask_or_an_imputed_nan_is_not(self):
        """A NaN or an infinity in the data that breaks the forward is the model's input's
        (MODEL_INPUT), where the first layer was said to have made it "with finite inputs". An
        additive mask given to the model, -inf where a key is hidden, and a NaN the model replaces
        itself (nan_to_num over missing values) break nothing: neither is named, nor anyone's
        upstream."""
        class Masked(torch.nn.Module):
            def __init__(self, imputes=False):
                super().__init__()
                self.fc1, self.fc2, self.imputes = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4), imputes

            def forward(self, x, mask):
                x = torch.nan_to_num(x) if self.imputes else x
                return self.fc2(torch.softmax(self.fc1(x) + mask, dim=-1))

        mask = torch.zeros(16)
        mask[::2] = float("-inf")
        culprits = {}
        for imputes in (False, True):
            torch.manual_seed(0)
            model = Masked(imputes)
            step = [0]
            handle = poison(model.fc2, float("inf"), lambda: imputes and step[0] == 1)  # another fault, on the NaN batch
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with fpscope_torch.Recorder(model, path, every=10, scaler=False) as recorder:
                    for step[0] in range(4):
                        x = torch.randn(4, 8)
                        if step[0] in (1, 3):
                            x[2, 3] = float("nan") if step[0] == 1 else float("-inf")  # missing; a log of 0
                        loss = torch.nn.functional.cross_entropy(model(x, mask), torch.randint(0, 4, (4,)))
                        loss.backward()
                        recorder.step(loss, skipped=step[0] == 2)  # step 2: clean, marked skipped all the same
                        model.zero_grad()
                steps = read_steps(path)
                if not imputes:
                    analyzed = json.loads(subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True,
                                                         check=True).stdout)
            handle.remove()
            culprits[imputes] = [s.get("culprit") for s in steps]
        named = [(c["name"], c["kind"], c["fault"], c.get("micro_batch")) if c else None for c in culprits[False]]
        model_input = fpscope_torch.recorder.MODEL_INPUT
        self.assertEqual(named, [None, (model_input, "activation", "nan", 0), None, (model_input, "activation", "inf", 0)])
        self.assertNotIn("upstream", culprits[False][1])  # the weights before it are not what made it
        self.assertEqual(culprits[False][1]["captured"], "before_cast")  # the data, made before any of the run's casts
        self.assertEqual([s["step"] for s in analyzed["skipped_steps"]], [1, 2, 3])
        self.assertIn("a NaN appeared in (model input) activation as the step's first tensor", analyzed["skipped_steps"][0]["diagnosis"])
        # Imputed: step 1's culprit is fc2's infinity, its upstream fc1 (not the input); step 3's
        # -inf, which nan_to_num makes float32's lowest, is no fault of the input's either.
        imputed = culprits[True][1]
        self.assertEqual((imputed["name"], imputed["fault"], imputed["upstream"]["name"]), ("fc2", "inf", "fc1"))
        self.assertNotEqual((culprits[True][3] or {}).get("name"), model_input)

    def test_a_step_that_never_reaches_step_is_logged_unfinished_with_its_culprit(self):
        """A loop that raises on a NaN loss, or a model that raises inside its forward (what it had
        made still held there, on an accelerator's path), its Recorder closed by a `with` or at
        exit: closing writes that step as unfinished (no loss, no update) with the culprit its
        readings name, says so in a warning, and fpscope analyze reads it. A step stopped clean (a
        forward, then close()) writes and says nothing."""
        def refuse_nan(module, inputs):
            if not torch.isfinite(inputs[0]).all():
                raise FloatingPointError("fc3 was given a NaN")

        for poisoned, inside in ((True, False), (True, True), (False, False)):
            torch.manual_seed(0)
            model = Mlp()
            step = [0]
            handle = poison(model.fc2, float("nan"), lambda: poisoned and step[0] == 2)
            refusing = model.fc3.register_forward_pre_hook(refuse_nan) if inside else None
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "run.jsonl")
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    every = 2 if inside else 10  # refused inside the forward: a recorded step (0, 2, ...)
                    with self.assertRaises(FloatingPointError), fpscope_torch.Recorder(model, path, every=every, scaler=False) as recorder:
                        for step[0] in range(4):
                            loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,)))
                            if not torch.isfinite(loss) or step[0] == 3:
                                raise FloatingPointError("the loop stops")
                            loss.backward()
                            recorder.step(loss)
                steps = read_steps(path)
                self.assertEqual([line["step"] for line in steps], [0, 1, 2])
                self.assertEqual([line.get("finished", True) for line in steps], [True, True, not poisoned])
                analyzed = json.loads(subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True, check=True).stdout)
            handle.remove()
            if refusing is not None:
                refusing.remove()
            messages = [str(w.message) for w in said if "did not reach" in str(w.message)]
            if poisoned:
                unfinished = steps[2]
                self.assertEqual((unfinished["loss"], unfinished["skipped"], unfinished["loss_scale"]), (None, False, 1.0))
                c = unfinished["culprit"]
                if inside:  # a recorded step: the histograms of what it read before fc3 refused its input
                    records = {(t["name"], t["kind"]): t for t in unfinished["tensors"]}
                    self.assertEqual(sorted({kind for _, kind in records}), ["activation", "weight"])
                    self.assertNotIn(("fc3", "activation"), records)
                    self.assertEqual(records[("fc2", "activation")]["nan"], 1)
                    self.assertEqual(sum(n for _, n in records[("fc2", "activation")]["bins"]), 4 * 16 - 1)
                    self.assertEqual(c["nan"], 1)
                else:
                    self.assertNotIn("tensors", unfinished)
                    self.assertNotIn("nan", c)
                self.assertEqual((c["name"], c["kind"], c["fault"], c["micro_batch"], c["upstream"]["name"]), ("fc2", "activation", "nan", 0, "fc1"))
                self.assertEqual(len(messages), 1)
                self.assertRegex(messages[0], r"^fpscope_torch: step 2 did not reach Recorder.step\(\), so .*run.jsonl records it as "
                                 r"unfinished: the first of its tensors to break was fc2 \(activation\) in micro-batch 0, holding a NaN; "
                                 r"the largest magnitude before it [0-9.e+-]+, in fc1 \(activation\)$")
                [bad] = analyzed["skipped_steps"]
                self.assertEqual((bad["step"], bad["finished"], bad["skipped"]), (2, False, False))
                self.assertRegex(bad["diagnosis"], r"^did not finish \(its loop stopped inside it: no loss, no update\); "
                                                   r"a NaN appeared in fc2 activation with finite inputs")
            else:
                self.assertEqual(messages, [])
                self.assertEqual(analyzed["skipped_steps"], [])

    def test_the_micro_batch_of_gradient_accumulation(self):
        torch.manual_seed(0)
        model = Mlp()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        micro = [0]
        handle = poison(model.fc3, float("inf"), lambda: micro[0] == 2)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            with fpscope_torch.Recorder(model, path, every=10, scaler=False) as recorder:
                for micro[0] in range(3):
                    loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 4, (4,))) / 3
                    loss.backward()
                optimizer.step()
                recorder.step(loss, skipped=True)
            handle.remove()
            culprit = read_steps(path)[0]["culprit"]
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["micro_batch"]), ("fc3", "activation", "inf", 2))

    def test_the_sentinel_changes_nothing_a_training_computes(self):
        results = []
        for sentinel in (False, True):
            torch.manual_seed(1)
            model = Mlp()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.manual_seed(2)
            with tempfile.TemporaryDirectory() as d:
                with fpscope_torch.Recorder(model, os.path.join(d, "run.jsonl"), every=3, scaler=False, sentinel=sentinel) as recorder:
                    losses = []
                    for _ in range(5):
                        loss = torch.nn.functional.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 4, (16,)))
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                        recorder.step(loss)
                        losses.append(loss.item())
            results.append((losses, [p.detach().clone() for p in model.parameters()]))
        self.assertEqual(results[0][0], results[1][0])
        for a, b in zip(results[0][1], results[1][1]):
            self.assertTrue(torch.equal(a, b))


def data_parallel_worker(rank, world, path, port):
    """Two gloo ranks train a DDP-wrapped Mlp; a forward hook puts a NaN into fc2's output on rank 1
    alone at steps 1 (not recorded, every=2) and 2 (recorded). The NaN reaches both ranks' gradients
    through DDP's averaging, so both skip; only rank 1's activations held it."""
    import faulthandler
    faulthandler.dump_traceback_later(120, exit=True)  # a rank that hangs says where, and ends
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(Mlp())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        step = [0]
        handle = poison(model.module.fc2, float("nan"), lambda: rank == 1 and step[0] in (1, 2))
        torch.manual_seed(10 + rank)
        with fpscope_torch.Recorder(model, path, every=2, scaler=False) as recorder:
            for step[0] in range(4):
                loss = torch.nn.functional.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 4, (8,)))
                loss.backward()
                skipped = not all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
                if not skipped:
                    optimizer.step()
                optimizer.zero_grad()
                recorder.step(loss, skipped=skipped)
        handle.remove()
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@unittest.skipUnless(torch.distributed.is_available(), "torch.distributed is not here")
class DataParallelCulpritTest(unittest.TestCase):
    def test_the_rank_whose_batch_made_the_nan_is_named(self):
        import torch.multiprocessing as mp
        from test_real_loops import free_port
        port = free_port()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ddp.jsonl")
            mp.spawn(data_parallel_worker, args=(2, path, port), nprocs=2, join=True)
            steps = read_steps(path)
        self.assertEqual([s["skipped"] for s in steps], [False, True, True, False])
        for s in steps[1:3]:  # 1 between recorded steps, 2 recorded
            culprit = s["culprit"]
            self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["rank"]), ("fc2", "activation", "nan", 1), s["step"])
        self.assertNotIn("nan", steps[1]["culprit"])
        self.assertEqual(steps[2]["culprit"]["nan"], 1)  # the activations' counts are summed over the ranks
        self.assertNotIn("culprit", steps[0])
        self.assertNotIn("culprit", steps[3])


@unittest.skipUnless(TORCH_2, "fp16 autocast and GradScaler on the CPU need torch >= 2")
class TransformersCulpritTest(unittest.TestCase):
    def test_gpt2_fp16_gradscaler_skip_at_step_0_and_a_nan_between_recorded_steps(self):
        try:
            from transformers import GPT2Config, GPT2LMHeadModel
        except ImportError:
            self.skipTest("transformers is not installed")
        torch.manual_seed(0)
        model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2))
        model.train()
        # 2^40: the first backward overflows fp16 at once, and GradScaler backs off until it fits.
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        step = [0]
        target = "transformer.h.1.mlp.c_fc"
        handle = poison(model.get_submodule(target), float("nan"), lambda: step[0] == 33)
        tokens = torch.randint(0, 64, (2, 16))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "gpt2.jsonl")
            with fpscope_torch.Recorder(model, path, every=8, scaler=scaler, precision="fp16 autocast") as recorder:
                for step[0] in range(34):
                    with torch.autocast("cpu", dtype=torch.float16):
                        loss = model(tokens, labels=tokens).loss
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad()
                    recorder.step(loss)
            handle.remove()
            steps = read_steps(path)
            out = subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True, check=True).stdout
        skipped = [s for s in steps if s["skipped"]]
        self.assertEqual(skipped[0]["step"], 0)
        first = skipped[0]["culprit"]
        # At 2^40 the loss's gradient is the first tensor the backward makes, and it is past fp16's
        # largest already: the logits' gradient, the output of lm_head.
        self.assertEqual((first["name"], first["kind"]), ("lm_head", "activation_gradient"))
        self.assertIn(first["fault"], ("overflow", "inf"))
        self.assertIn("tensors", skipped[0])  # step 0 is recorded: its counts are there
        # Every backed-off step before the scale fits names a gradient, and says the scale is to blame.
        diagnoses = {s["step"]: s["diagnosis"] for s in json.loads(out)["skipped_steps"]}
        for s in skipped:
            if s["step"] < 33:
                self.assertIn(s["culprit"]["kind"], ("activation_gradient", "weight_gradient"), s)
                self.assertIn("scale is", diagnoses[s["step"]])
                self.assertNotIn("not a scaling problem", diagnoses[s["step"]])
        last = steps[33]
        self.assertTrue(last["skipped"])
        self.assertNotIn("tensors", last)  # 33 is between recorded steps (32, 40)
        self.assertEqual((last["culprit"]["name"], last["culprit"]["kind"], last["culprit"]["fault"]), (target, "activation", "nan"))
        self.assertIn("lm_head activation_gradient", diagnoses[0])
        self.assertIn(f"a NaN appeared in {target} activation with finite inputs", diagnoses[33])


if __name__ == "__main__":
    unittest.main()
