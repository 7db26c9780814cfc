"""Where users already look: HuggingFace's Trainer and Lightning with fpscope's callbacks, and
TensorBoard's own event reader over what fpscope_torch.tensorboard writes. Each part skips, saying
so, where its package is not installed (scripts/test-torch installs them all)."""

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
from test_recorder import read_log, records_of, snapshots_of  # noqa: E402

FPSCOPE = os.environ.get("FPSCOPE_BIN", "fpscope")


def installed(*names):
    try:
        for name in names:
            __import__(name)
        return True
    except ImportError:
        return False


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2))


@unittest.skipUnless(installed("transformers", "accelerate"), "transformers and accelerate are not installed")
class HuggingFaceTest(unittest.TestCase):
    def test_trainer_with_accumulation_and_checkpointing_writes_a_whole_log(self):
        from transformers import Trainer, TrainingArguments
        from fpscope_torch.huggingface import FpscopeCallback
        model = tiny_gpt2()
        torch.manual_seed(1)
        data = [{"input_ids": t, "labels": t} for t in torch.randint(0, 64, (48, 16))]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            arguments = TrainingArguments(output_dir=d, max_steps=6, per_device_train_batch_size=2, gradient_accumulation_steps=2,
                                          gradient_checkpointing=True, use_cpu=True, fp16=True, report_to=[], logging_steps=1,
                                          save_strategy="no", disable_tqdm=True)
            trainer = Trainer(model=model, args=arguments, train_dataset=data, callbacks=[FpscopeCallback(path, every=3)])
            trainer.train()
            header, lines = read_log(path)
        self.assertEqual((header["model"], header["precision"], header["format"]), ("GPT2LMHeadModel", "fp16 autocast", "fp16"))
        self.assertEqual([line["step"] for line in lines], list(range(6)))
        # The Trainer's own logged losses (its sum over micro-batches, in its own order: within 1e-6).
        logged = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        self.assertEqual(len(logged), 6)
        for line, loss in zip(lines, logged):
            self.assertAlmostEqual(line["loss"], float(loss), delta=1e-6 * abs(float(loss)))
            self.assertEqual(line["loss_scale"], 1.0)  # Accelerate runs fp16 on the CPU without a scaler
        snapshots = snapshots_of(lines)
        self.assertEqual([s["step"] for s in snapshots], [0, 3])
        names = [t["name"] for t in snapshots[0]["tensors"]]
        self.assertFalse([n for n in names if "#" in n])  # accumulation and checkpointing: one step's tensors
        self.assertEqual(len(snapshots[0]["tensors"]), len(snapshots[1]["tensors"]))

    def test_a_model_loaded_in_bf16_without_mixed_precision_is_logged_as_bf16(self):
        """Neither fp16=True nor bf16=True, the model in bf16 (as loaded with torch_dtype=torch.bfloat16):
        the Trainer names no precision, and the format is the one the activations are in."""
        from transformers import Trainer, TrainingArguments
        from fpscope_torch.huggingface import FpscopeCallback
        torch.manual_seed(1)
        data = [{"input_ids": t, "labels": t} for t in torch.randint(0, 64, (8, 16))]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            arguments = TrainingArguments(output_dir=d, max_steps=2, per_device_train_batch_size=2, use_cpu=True, report_to=[],
                                          save_strategy="no", disable_tqdm=True)
            Trainer(model=tiny_gpt2().to(torch.bfloat16), args=arguments, train_dataset=data, callbacks=[FpscopeCallback(path)]).train()
            header, lines = read_log(path)
        self.assertEqual((header["precision"], header["format"]), ("", "bf16"))
        self.assertNotIn("format_assumed", header)
        self.assertEqual([line["step"] for line in lines], [0, 1])

    def test_a_training_resumed_from_a_checkpoint_writes_its_steps_again(self):
        """Trained to step 6 with checkpoints every 2 steps, then resumed from checkpoint-4 as after
        a crash: the log goes on at the Trainer's step, the old lines of steps 4 and 5 cut (said in a
        warning), and reads as one run of steps 0..5 whose last two are the resumed run's."""
        from transformers import Trainer, TrainingArguments
        from fpscope_torch.huggingface import FpscopeCallback
        torch.manual_seed(1)
        data = [{"input_ids": t, "labels": t} for t in torch.randint(0, 64, (24, 16))]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            arguments = TrainingArguments(output_dir=d, max_steps=6, per_device_train_batch_size=2, use_cpu=True, report_to=[],
                                          logging_steps=1, save_strategy="steps", save_steps=2, disable_tqdm=True)
            Trainer(model=tiny_gpt2(), args=arguments, train_dataset=data, callbacks=[FpscopeCallback(path, every=2)]).train()
            first = read_log(path)[1]
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                trainer = Trainer(model=tiny_gpt2(), args=arguments, train_dataset=data, callbacks=[FpscopeCallback(path, every=2)])
                trainer.train(resume_from_checkpoint=os.path.join(d, "checkpoint-4"))
            header, lines = read_log(path)
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
        self.assertEqual([str(w.message) for w in said if "cut before appending" in str(w.message)],
                         [f"{path}: cut before appending: the lines of steps 4..5 (2), which the run resumed at step 4 writes again"])
        self.assertEqual([line["step"] for line in lines], list(range(6)))
        self.assertEqual(lines[:4], first[:4])
        logged = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        self.assertAlmostEqual(lines[5]["loss"], float(logged[-1]), delta=1e-6 * abs(float(logged[-1])))
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_the_scaler_behind_accelerates_optimizer_is_found(self):
        from transformers import TrainerControl, TrainerState, TrainingArguments
        from fpscope_torch.huggingface import FpscopeCallback

        class Prepared:  # what Accelerate hands callbacks: the optimizer with its GradScaler
            def __init__(self, scaler):
                self.scaler = scaler

        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 9)
        with tempfile.TemporaryDirectory() as d:
            callback = FpscopeCallback(os.path.join(d, "run.jsonl"))
            arguments = TrainingArguments(output_dir=d, use_cpu=True, report_to=[])
            callback.on_train_begin(arguments, TrainerState(), TrainerControl(), model=tiny_gpt2(), optimizer=Prepared(scaler))
            self.assertIs(callback.recorder.scaler, scaler)
            callback.on_train_end(arguments, TrainerState(), TrainerControl())
            self.assertEqual(read_log(os.path.join(d, "run.jsonl"))[0]["scaler"], "dynamic")


@unittest.skipUnless(installed("lightning"), "lightning is not installed")
class LightningTest(unittest.TestCase):
    @staticmethod
    def module_type():
        import lightning

        class Module(lightning.LightningModule):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))

            def training_step(self, batch, index):
                x, y = batch
                return torch.nn.functional.cross_entropy(self.net(x), y)

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        return Module

    def test_a_training_resumed_from_a_checkpoint_writes_its_steps_again(self):
        """As the HuggingFace test: 6 steps with a checkpoint every 2, then resumed from step 4."""
        import lightning
        from fpscope_torch.lightning import FpscopeCallback
        Module = self.module_type()
        torch.manual_seed(1)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,))), batch_size=8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")

            def trainer():
                every_2 = lightning.pytorch.callbacks.ModelCheckpoint(dirpath=d, filename="{step}", every_n_train_steps=2, save_top_k=-1)
                return lightning.Trainer(max_steps=6, accelerator="cpu", callbacks=[FpscopeCallback(path, every=2), every_2], logger=False,
                                         enable_progress_bar=False, enable_model_summary=False)
            trainer().fit(Module(), data)
            first = read_log(path)[1]
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                trainer().fit(Module(), data, ckpt_path=os.path.join(d, "step=4.ckpt"))
            lines = read_log(path)[1]
            result = subprocess.run([FPSCOPE, "analyze", path], capture_output=True, text=True)
        self.assertEqual([str(w.message) for w in said if "cut before appending" in str(w.message)],
                         [f"{path}: cut before appending: the lines of steps 4..5 (2), which the run resumed at step 4 writes again"])
        self.assertEqual([line["step"] for line in first], list(range(6)))
        self.assertEqual([line["step"] for line in lines], list(range(6)))
        self.assertEqual(lines[:4], first[:4])
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_training_that_raises_under_detect_anomaly_logs_its_unfinished_step(self):
        """Lightning's Trainer(detect_anomaly=True) raises in the backward of the step whose forward
        made a NaN; its on_exception closes the Recorder, which writes that step as unfinished with
        the culprit: the module output that first held the NaN."""
        import lightning
        from fpscope_torch.lightning import FpscopeCallback
        Module = self.module_type()
        module = Module()
        calls = [0]

        def poison(_, __, output):
            calls[0] += 1
            return output * float("nan") if calls[0] == 3 else None  # the third batch: optimizer step 2
        module.net[1].register_forward_hook(poison)
        torch.manual_seed(1)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,))), batch_size=8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            trainer = lightning.Trainer(max_steps=6, accelerator="cpu", detect_anomaly=True, callbacks=[FpscopeCallback(path, every=4)],
                                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
            with warnings.catch_warnings(record=True) as said, self.assertRaisesRegex(RuntimeError, "nan"):
                warnings.simplefilter("always")
                trainer.fit(module, data)
            lines = read_log(path)[1]
            analyzed = json.loads(subprocess.run([FPSCOPE, "analyze", path, "--json"], capture_output=True, text=True, check=True).stdout)
        self.assertEqual([line["step"] for line in lines], [0, 1, 2])
        self.assertEqual([line.get("finished", True) for line in lines], [True, True, False])
        culprit = lines[2]["culprit"]
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["micro_batch"]), ("net.1", "activation", "nan", 0))
        self.assertEqual(len([w for w in said if "records it as unfinished" in str(w.message)]), 1)
        self.assertTrue(analyzed["skipped_steps"][0]["diagnosis"].startswith("did not finish"))

    def test_a_culprit_names_its_micro_batch_of_accumulation(self):
        """training_step calls the module's parts, not the module: the callback's micro_batch()
        starts each micro-batch, and a NaN made in the second of step 1's two is named there."""
        import lightning
        from fpscope_torch.lightning import FpscopeCallback
        module = self.module_type()()
        calls = [0]

        def poison(_, __, output):
            calls[0] += 1
            return output * float("nan") if calls[0] == 4 else None  # batch 3: step 1, micro-batch 1
        module.net[1].register_forward_hook(poison)
        torch.manual_seed(1)
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,))), batch_size=8)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            trainer = lightning.Trainer(max_steps=2, accelerator="cpu", accumulate_grad_batches=2, callbacks=[FpscopeCallback(path, every=4)],
                                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
            trainer.fit(module, data)
            lines = read_log(path)[1]
        self.assertNotIn("culprit", lines[0])
        culprit = lines[1]["culprit"]
        self.assertEqual((culprit["name"], culprit["kind"], culprit["fault"], culprit["micro_batch"]), ("net.1", "activation", "nan", 1))

    def test_callback_records_optimizer_steps_with_their_losses(self):
        import lightning
        from fpscope_torch.lightning import FpscopeCallback
        Module = self.module_type()
        torch.manual_seed(1)
        data = torch.utils.data.TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,)))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.jsonl")
            trainer = lightning.Trainer(max_steps=4, accelerator="cpu", precision="bf16-mixed", accumulate_grad_batches=2,
                                        callbacks=[FpscopeCallback(path, every=2)], logger=False, enable_checkpointing=False,
                                        enable_progress_bar=False, enable_model_summary=False)
            trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=8))
            header, lines = read_log(path)
        self.assertEqual((header["model"], header["format"]), ("Module", "bf16"))
        self.assertEqual([line["step"] for line in lines], [0, 1, 2, 3])  # 8 batches, 4 optimizer steps
        # Step 0: two batches of 8 at the initial weights, their mean loss.
        module = Module()
        x, y = data[0:16]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = (torch.nn.functional.cross_entropy(module.net(x[:8]), y[:8]) + torch.nn.functional.cross_entropy(module.net(x[8:]), y[8:])) / 2
        self.assertEqual(lines[0]["loss"], float(expected.float()))
        records = records_of(snapshots_of(lines)[0])
        self.assertEqual(sorted({n for n, k in records if k == "activation"}), ["net.0", "net.1", "net.2"])
        self.assertEqual(sum(c for _, c in records[("net.0", "activation")]["bins"]), 2 * 8 * 16)


def fp16_log(d, tensorboard=None):
    """A bridge run under a GradScaler at 2^8: gradients recorded carrying that scale."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    path = os.path.join(d, "fp16.jsonl")
    with fpscope_torch.Recorder(model, path, every=2, scaler=scaler, tensorboard=tensorboard) as recorder:
        for step in range(4):
            torch.manual_seed(step)
            x, y = torch.randn(32, 6) * 2.0 ** -6, torch.randint(0, 3, (32,))
            with torch.autocast("cpu", dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            recorder.step(loss)
            optimizer.zero_grad()
    return path


def read_events(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    events = EventAccumulator(logdir, size_guidance={"histograms": 0, "scalars": 0, "tensors": 0})
    events.Reload()
    return events


def power_of_two(x):
    return x > 0 and math.frexp(x)[0] == 0.5


@unittest.skipUnless(installed("tensorboard") and hasattr(torch.amp, "GradScaler"), "tensorboard (or torch >= 2) is not installed")
class TensorBoardTest(unittest.TestCase):
    def check_against_the_log(self, path, events):
        header, lines = read_log(path)
        histograms = set(events.Tags()["histograms"])
        for snapshot in snapshots_of(lines):
            for record in snapshot["tensors"]:
                tag = f"{record['kind']}/{record['name']}"
                counted = sum(c for _, c in record["bins"]) + record["zero"]
                if counted == 0:
                    continue
                self.assertIn(tag, histograms)
                event = next(e for e in events.Histograms(tag) if e.step == snapshot["step"])
                value = event.histogram_value
                limits, counts = list(value.bucket_limit), list(value.bucket)
                if record["zero"]:
                    self.assertEqual((limits[0], counts[0]), (0.0, record["zero"]))
                    limits, counts = limits[1:], counts[1:]
                self.assertTrue(all(power_of_two(limit) for limit in limits), (tag, limits))
                shift = int(math.log2(record["scale"]))
                self.assertEqual(limits, [2.0 ** (b + 1 - shift) for b, _ in record["bins"]], tag)  # one bucket per binade, at scale 1
                self.assertEqual(counts, [float(c) for _, c in record["bins"]], tag)
        loss_scale = {e.step: e.value for e in events.Scalars("fpscope/loss_scale")}
        self.assertEqual(loss_scale, {line["step"]: line["loss_scale"] for line in lines})
        skipped = {e.step: e.value for e in events.Scalars("fpscope/skipped")}
        self.assertEqual(skipped, {line["step"]: float(line["skipped"]) for line in lines})
        return header, lines

    def test_a_bridge_log_converted_reads_back_in_tensorboard(self):
        from fpscope_torch.tensorboard import main
        with tempfile.TemporaryDirectory() as d:
            path = fp16_log(d)
            self.assertEqual(main([path, os.path.join(d, "tb")]), 0)
            header, lines = self.check_against_the_log(path, read_events(os.path.join(d, "tb")))
            self.assertEqual(lines[0]["loss_scale"], 256.0)

    def test_an_engine_log_converted_reads_back_and_its_shares_are_analyzes(self):
        from fpscope_torch.tensorboard import main
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "engine.jsonl")
            subprocess.run([FPSCOPE, "train", "--steps", "1", "--record-every", "1", "--precision", "fp16", "--loss-scale", "1",
                            "--out", path], check=True, capture_output=True)
            self.assertEqual(main([path, os.path.join(d, "tb")]), 0)
            events = read_events(os.path.join(d, "tb"))
            self.check_against_the_log(path, events)
            analysis = json.loads(subprocess.run([FPSCOPE, "analyze", path, "--json"], check=True, capture_output=True, text=True).stdout)
        checked = 0
        for t in analysis["tensors"]:
            tag = f"{t['kind']}/{t['tensor']}"
            for share, count in (("%zero", t["zero"] + t["flushed_to_zero"]), ("%subnormal", t["subnormal"]), ("%overflow", t["overflow"])):
                written = events.Scalars(f"{tag} {share}")[0].value
                self.assertAlmostEqual(written, 100.0 * count / t["count"], places=4, msg=(tag, share))  # float32 scalars
                checked += 1
        self.assertGreater(checked, 10)
        self.assertTrue(any(t["flushed_to_zero"] > 0 for t in analysis["tensors"]))  # the check sees flushes

    def test_a_log_whose_format_is_assumed_gets_no_shares_of_it(self):
        """A header whose format its writer only assumed: the histograms and scalars as ever, but
        no %zero, %subnormal or %overflow of a format the run may never have cast to -- said."""
        from fpscope_torch.tensorboard import convert
        with tempfile.TemporaryDirectory() as d:
            path = fp16_log(d)
            with open(path) as f:
                lines = f.readlines()
            lines[0] = json.dumps(dict(json.loads(lines[0]), format_assumed=True)) + "\n"
            with open(path, "w") as f:
                f.writelines(lines)
            _, _, said = convert(path, os.path.join(d, "tb"))
            events = read_events(os.path.join(d, "tb"))
            self.check_against_the_log(path, events)
        self.assertFalse([tag for tag in events.Tags()["scalars"] if "%" in tag])
        self.assertEqual(said, ["format 'fp16' is assumed (the run log does not say what the run cast to): no %zero, %subnormal or "
                                "%overflow scalars"])

    def test_the_live_writer_writes_what_the_converter_writes(self):
        from fpscope_torch.tensorboard import convert
        with tempfile.TemporaryDirectory() as d:
            path = fp16_log(d, tensorboard=os.path.join(d, "live"))
            convert(path, os.path.join(d, "converted"))
            live, converted = read_events(os.path.join(d, "live")), read_events(os.path.join(d, "converted"))
            self.assertEqual(sorted(live.Tags()["histograms"]), sorted(converted.Tags()["histograms"]))
            for tag in converted.Tags()["histograms"]:
                self.assertEqual([(e.step, list(e.histogram_value.bucket_limit), list(e.histogram_value.bucket)) for e in live.Histograms(tag)],
                                 [(e.step, list(e.histogram_value.bucket_limit), list(e.histogram_value.bucket)) for e in converted.Histograms(tag)])
            self.check_against_the_log(path, live)

    def test_a_resumed_run_s_events_replace_the_crashed_run_s_from_its_step(self):
        """Six steps recorded every 2nd with the live writer, then a run resumed at step 3 for two
        steps: TensorBoard's own reader shows each step once, the resumed run's from step 3 on -- a
        histogram at step 4 too, which the resumed run records again (without the purge both
        runs' step-4 histograms are there) -- as the run log's lines are cut."""
        with tempfile.TemporaryDirectory() as d:
            path, logdir = os.path.join(d, "run.jsonl"), os.path.join(d, "tb")
            model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

            def train(steps, seed, **arguments):
                torch.manual_seed(seed)
                with fpscope_torch.Recorder(model, path, every=2, scaler=False, tensorboard=logdir, **arguments) as recorder:
                    for _ in range(steps):
                        loss = torch.nn.functional.cross_entropy(model(torch.randn(32, 6) * (1 + seed)), torch.randint(0, 3, (32,)))
                        loss.backward()
                        recorder.step(loss)
                        model.zero_grad()

            train(6, 0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the cut's warning (test_recorder holds its text)
                train(2, 1, append=True, global_step=3)
            lines = read_log(path)[1]
            events = read_events(logdir)
        losses = [(e.step, e.value) for e in events.Scalars("fpscope/loss")]
        self.assertEqual([step for step, _ in losses], [0, 1, 2, 3, 4])
        for (step, value), line in zip(losses, lines):
            self.assertAlmostEqual(value, line["loss"], places=5)
        tag = "activation/0"
        self.assertEqual([e.step for e in events.Histograms(tag)], [0, 2, 4])
        at_4 = next(t for t in snapshots_of(lines)[-1]["tensors"] if t["kind"] == "activation" and t["name"] == "0")
        self.assertEqual(int(events.Histograms(tag)[-1].histogram_value.num), sum(c for _, c in at_4["bins"]) + at_4["zero"])
        self.assertEqual(list(events.Histograms(tag)[-1].histogram_value.bucket)[-1], float(at_4["bins"][-1][1]))

    def test_bad_input_is_one_sentence_and_writes_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.jsonl")
            with open(bad, "w") as f:
                f.write('{"not": "a header"}\n')
            torn = os.path.join(d, "torn.jsonl")
            with open(torn, "w") as f:
                f.write('{"fpscope_run_log": true, "schema_version": 2, "format": "fp16"}\n{"step": 0, "loss": 1.0, "loss_scale": 1}\n'
                        '{"step": 1, "loss": 1.0, "loss_scale": 1, "tensors": [{"name": "x", "kind": "activation", "bins": [[0, "many"]]}]}\n')
            for path, message in ((bad, "bad.jsonl: its first line is not an fpscope run log header"),
                                  (torn, "torn.jsonl:3: tensor 'x': \"bins\" is not a list of [binade, count] integer pairs"),
                                  (os.path.join(d, "missing.jsonl"), "missing.jsonl does not exist")):
                result = subprocess.run([sys.executable, "-m", "fpscope_torch.tensorboard", path, os.path.join(d, "tb")], capture_output=True,
                                        text=True, env=dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(__file__), "..")))
                self.assertEqual(result.returncode, 1)
                self.assertIn(message, result.stderr)
                self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
                self.assertFalse(os.path.exists(os.path.join(d, "tb")))


if __name__ == "__main__":
    unittest.main()
