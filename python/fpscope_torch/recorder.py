"""Recorder: observes a PyTorch training and writes an fpscope run log (schema 2)."""

import json
import math
import os
import uuid
import weakref

import torch

from .blocks import block_statistics, merge_block_statistics, parse_blocks
from .histogram import COUNTS, assemble, captured_of, partial_histogram, tensor_record

SCHEMA_VERSION = 2
_SHARDED = ("activation", "activation_gradient")  # each rank computes its own; summed across ranks


def _tensors(value, path=""):
    """Every floating-point tensor in a module's output, however nested (tuples, lists, dicts),
    with its path: "" for a lone tensor, "[0]", "[1].key"."""
    if torch.is_tensor(value):
        if value.is_floating_point():
            yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{path}.{key}")


def _recorded_modules(model, include, exclude):
    """Leaf modules (their outputs are the layer activations), and attention and recurrent modules,
    whose outputs are tuples their children do not show; filtered by name prefixes."""
    wanted = (torch.nn.MultiheadAttention, torch.nn.RNNBase)
    for name, module in model.named_modules():
        leaf = not any(True for _ in module.children())
        if not (leaf or isinstance(module, wanted)):
            continue
        label = name or type(module).__name__
        if include is not None and not any(label == p or label.startswith(p + ".") for p in include):
            continue
        if exclude is not None and any(label == p or label.startswith(p + ".") for p in exclude):
            continue
        yield label, module


def _read_back(steps):
    """Replaces the device tensors among the step records' loss, scale used and scale after (0-dim
    tensors kept so that an unrecorded step never waits on the device) by numbers, in one copy per
    device rather than one per value."""
    by_device = {}
    for record in steps:
        for j in (1, 2, 3):
            if torch.is_tensor(record[j]):
                by_device.setdefault(record[j].device, []).append((record, j))
    for places in by_device.values():
        values = torch.stack([record[j].detach().double().reshape(()) for record, j in places]).tolist()
        for (record, j), value in zip(places, values):
            record[j] = value


def cast_format(precision):
    """The header's `format` -- what `fpscope analyze` and the app ask about by default -- when
    Recorder is not given `fmt`: read from `precision` ("bf16 autocast" -> "bf16", "fp32" -> "fp32"),
    else "fp16"."""
    text = (precision or "").lower()
    if "bf16" in text or "bfloat16" in text:
        return "bf16"
    if ("fp32" in text or "float32" in text) and "16" not in text:
        return "fp32"
    return "fp16"


class Recorder:
    """Records exponent histograms of a model's activations, activation gradients, weights and
    weight gradients every `every` steps, and a step record (loss, the loss scale its backward
    used, skipped) for every step, into the run log at `path`.

    Observe, never alter: forward hooks for activations, and hooks on the autograd nodes that made
    them for their gradients (an in-place op after a module rewrites its output tensor, never that
    node), `register_post_accumulate_grad_hook` for weight gradients (torch >= 2.1; on
    older torch, a hook on each parameter's gradient of the last backward call). Hooks are
    installed only for the steps recorded: an unrecorded step runs exactly as without fpscope.
    Gradients are read during the backward pass, before any unscaling, so they carry the scale
    the backward used, and each record says so (`scale`); values already in fp16/bf16 are
    `as_stored`, others `before_cast`.

    `fmt` is the format the run casts to, the header's `format` that `fpscope analyze` and the app
    ask about by default: given, or read from `precision` ("bf16 autocast" -> bf16), else fp16.

    Call step(loss) once per training step, after the optimizer step (and the scaler's update).
    Under torch.distributed every rank must call it (recording steps are collective).

    blocks="mxfp8-e4m3" (or "mxfp4:even", any OCP MX format with a scale rule, or "nvfp4") also
    records, for every recorded tensor, what that block-scaled format would do to it (blocks of
    `block_size` along the last dimension, 32 for MX and 16 for NVFP4 by default;
    fpscope_torch.blocks): exact flush, subnormal and saturation counts
    and the histograms `fpscope analyze run.jsonl -f mxfp8-e4m3` and the app's Blocks view read.
    Under torch.distributed the ranks' statistics of activations and activation gradients are
    summed (a block lies within one rank's rows, so MX counts are what one process would count
    over the whole batch; NVFP4's tensor scale is each rank's own, from its shard's amax, as each
    rank's cast would take it); weights and weight gradients are rank 0's.
    """

    def __init__(self, model, path, every=1, scaler=None, model_name=None, precision=None, fmt=None,
                 kinds=("activation", "activation_gradient", "weight", "weight_gradient"),
                 include=None, exclude=None, append=False, global_step=None, blocks=None, block_size=None):
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        unknown = set(kinds) - {"activation", "activation_gradient", "weight", "weight_gradient"}
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}: expected activation, activation_gradient, weight, weight_gradient")
        self.model = model
        self.path = os.fspath(path)
        self.every = every
        self.scaler = scaler
        self.kinds = set(kinds)
        self._modules = list(_recorded_modules(model, include, exclude))
        self._distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self._rank = torch.distributed.get_rank() if self._distributed else 0
        self._blocks = parse_blocks(blocks) if blocks is not None else None
        if self._blocks is not None and block_size is not None and not 1 <= block_size <= 256:
            raise ValueError(f"block_size must be 1 to 256, not {block_size}")
        if self._blocks is not None and self._blocks[0] == "nvfp4" and block_size not in (None, 16):
            raise ValueError(f"nvfp4's blocks are 16 elements, not {block_size}")
        self._block_size = block_size
        self._pending_blocks = {}   # (name, kind) -> the step's block statistics
        self._hooks = []            # removed at the end of each recorded step
        self._pending = {}          # (name, kind) -> [[Partial, ...], scale, captured], for the step recorded
        self._seen = {}             # id(tensor) -> (weakref, version, Partial): this step's histograms by tensor
        self._calls = {}            # module label -> calls so far in this step
        self._shadowing = False     # inside shadow(): records go to "<name> (fp32 shadow)"
        self._shadow_calls = {}
        self._steps = []            # step records not yet written: [step, loss, scale used, scale after, skipped]
        self._file = None
        self._scale_used = self._scale_now()  # the scale the next backward will use
        self.step_index = 0
        if self._rank == 0:
            self._open(model_name, precision, fmt if fmt is not None else cast_format(precision), append)
        if append and global_step is None:
            global_step = self._next_step_in_log() if self._rank == 0 else 0
            if self._distributed:
                shared = [global_step]
                torch.distributed.broadcast_object_list(shared, src=0)
                global_step = shared[0]
        if global_step is not None:
            if global_step < 0:
                raise ValueError(f"global_step must not be negative, not {global_step}")
            self.step_index = global_step
        self._arm_if_recording()

    # ---- the log ----

    def _products(self):
        """Where the model's products run, for the header (as fpscope train names its libraries):
        "PyTorch 2.5.1 (cpu)", "PyTorch 2.5.1 (cuda: NVIDIA H100 80GB HBM3)"."""
        device = next((p.device for p in self.model.parameters()), torch.device("cpu"))
        where = device.type
        if device.type == "cuda":
            where += ": " + torch.cuda.get_device_name(device)
        return f"PyTorch {torch.__version__} ({where})"

    def _open(self, model_name, precision, fmt, append):
        if append and os.path.exists(self.path):
            with open(self.path) as f:
                first = f.readline()
            try:
                header = json.loads(first)
            except ValueError:
                header = None
            if not isinstance(header, dict) or "schema_version" not in header:
                raise ValueError(f"{self.path} is not an fpscope run log: cannot append to it")
            self._run_id = header.get("run_id", "")
            self._file = open(self.path, "a")
            return
        self._run_id = uuid.uuid4().hex
        header = {"fpscope_run_log": True, "schema_version": SCHEMA_VERSION, "run_id": self._run_id,
                  "source": "fpscope_torch", "model": model_name or type(self.model).__name__,
                  "precision": precision or "", "format": fmt, "rounding": "rne",
                  "scaler": "dynamic" if self._scaler_enabled() else "none", "products": self._products()}
        tmp = os.path.join(os.path.dirname(os.path.abspath(self.path)), f".{os.path.basename(self.path)}.fpscope-tmp-{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(json.dumps(header) + "\n")
        os.replace(tmp, self.path)  # atomically: a follower never sees a half-written header
        self._file = open(self.path, "a")

    def _next_step_in_log(self):
        last = -1
        with open(self.path) as f:
            for line in f:
                try:
                    last = max(last, int(json.loads(line).get("step", -1)))
                except (ValueError, AttributeError):
                    pass  # the header, or a torn last line
        return last + 1

    # ---- the scaler ----

    def _scaler_enabled(self):
        return self.scaler is not None and (not hasattr(self.scaler, "is_enabled") or self.scaler.is_enabled())

    def _scale_now(self):
        """The scaler's scale as it is now, without waiting for the device: a tensor copy where
        GradScaler has one (read when the step records are written), else a number."""
        if not self._scaler_enabled():
            return 1.0
        scale = getattr(self.scaler, "_scale", None)
        if torch.is_tensor(scale):
            return scale.detach().clone()
        return float(self.scaler.get_scale())

    # ---- hooks, installed only for a recorded step ----

    def _recording(self):
        return self.step_index % self.every == 0

    def _arm_if_recording(self):
        if not self._recording():
            return
        self._calls = {}
        for label, module in self._modules:
            self._hooks.append(module.register_forward_hook(self._forward_hook(label)))
        for name, parameter in self.model.named_parameters():
            if not parameter.requires_grad:
                continue
            if "weight" in self.kinds:
                self._add(name, "weight", parameter, 1.0)  # the weights the coming forward uses
            if "weight_gradient" in self.kinds:
                if hasattr(parameter, "register_post_accumulate_grad_hook"):
                    self._hooks.append(parameter.register_post_accumulate_grad_hook(self._accumulated_grad_hook(name)))
                else:
                    self._hooks.append(parameter.register_hook(self._grad_hook(name)))

    def _disarm(self):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    def _add(self, name, kind, tensor, scale, replace=False):
        if kind not in self.kinds:
            return
        partial = self._histogram_of(tensor)
        key = (name, kind)
        if self._blocks is not None:
            stats = block_statistics(tensor, self._blocks[0], self._blocks[1], self._block_size)
            if key in self._pending_blocks and not replace:
                stats = merge_block_statistics(self._pending_blocks[key], stats)
            self._pending_blocks[key] = stats
        if key in self._pending and not replace:
            self._pending[key][0].append(partial)  # summed when the step is written
        else:
            self._pending[key] = [[partial], scale, captured_of(tensor)]

    def _histogram_of(self, tensor):
        """A tensor's partial histogram, computed once per step: a module that returns its input
        unchanged (dropout with p = 0, an identity) hands the same tensor to two records, and its
        gradient node the same gradient. Same object, same version counter: same values."""
        seen = self._seen.get(id(tensor))
        if seen is not None and seen[0]() is tensor and seen[1] == tensor._version:
            return seen[2]
        partial = partial_histogram(tensor)
        try:
            self._seen[id(tensor)] = (weakref.ref(tensor), tensor._version, partial)
        except TypeError:
            pass  # a tensor subclass without weak references is simply not remembered
        return partial

    def _shadow_name(self, name):
        return f"{name} (fp32 shadow)" if self._shadowing else name

    def _forward_hook(self, label):
        def hook(module, inputs, output):
            # An evaluation forward (no_grad, eval()) on a recording step is not training.
            if not torch.is_grad_enabled() or not module.training:
                return
            calls = self._shadow_calls if self._shadowing else self._calls
            call = calls.get(label, 0) + 1
            calls[label] = call
            name = self._shadow_name(label if call == 1 else f"{label}#{call}")  # a module called twice is two layers
            for path, tensor in _tensors(output):
                self._add(name + path, "activation", tensor, 1.0)
                if "activation_gradient" in self.kinds and tensor.grad_fn is not None:
                    # On the node that made the output, not on the tensor: an in-place op after
                    # the module (ReLU(inplace=True)) rewrites the tensor, never that node.
                    tensor.grad_fn.register_hook(self._output_grad_hook(name + path, tensor.output_nr))
        return hook

    def _output_grad_hook(self, name, output_nr):
        def hook(grad_inputs, grad_outputs):
            grad = grad_outputs[output_nr] if output_nr < len(grad_outputs) else None
            if grad is not None:
                self._add(name, "activation_gradient", grad, self._scale_used)
        return hook

    def _accumulated_grad_hook(self, name):
        def hook(parameter):
            # After each accumulation: the last call leaves the whole step's gradient.
            if parameter.grad is not None:
                self._add(self._shadow_name(name), "weight_gradient", parameter.grad, self._scale_used, replace=True)
        return hook

    def _grad_hook(self, name):
        def hook(grad):
            self._add(self._shadow_name(name), "weight_gradient", grad, self._scale_used, replace=True)
        return hook

    # ---- fp32 shadow ----

    def shadow(self, closure):
        """fp32 shadow mode: on a recording step, call it after the backward pass and before the
        optimizer step, with a closure that computes the step's loss again from the same batch
        (`lambda: loss_fn(model(x), y)`). It runs the closure with autocast off, so in float32
        with the same weights, and its backward scaled by the step's loss scale, and records those
        histograms as "<name> (fp32 shadow)", captured before_cast: what the fp16 casts would
        round, flushes and overflows visible, as the paper's histograms were. The model's
        gradients are put back as they were and nothing else changes. On other steps it does
        nothing. Costs about one more forward and backward on each recording step."""
        if not self._recording():
            return
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        saved = [p.grad for p in parameters]
        for p in parameters:
            p.grad = None
        device = next((p.device.type for p in parameters), "cpu")
        self._shadowing, self._shadow_calls = True, {}
        try:
            with torch.autocast(device_type=device, enabled=False):
                loss = closure()
                scale = float(self._scale_used)
                (loss.float() * scale).backward()
        finally:
            self._shadowing = False
            for p, grad in zip(parameters, saved):
                p.grad = grad

    # ---- steps ----

    def step(self, loss=None, skipped=None):
        """Ends a training step: call it after the optimizer step and the scaler's update. `loss`
        (a tensor or number) goes into the step record; `skipped` says whether the optimizer
        step was skipped, for scalers other than GradScaler (whose skips are read from its scale:
        it backs off exactly when it skipped). Collective under torch.distributed on recorded
        steps."""
        scale_after = self._scale_now()
        loss_value = loss.detach().float().reshape(()) if torch.is_tensor(loss) else loss
        self._steps.append([self.step_index, loss_value, self._scale_used, scale_after, skipped])
        if self._recording():
            self._disarm()
            self._write_recorded()
        self._scale_used = scale_after
        self.step_index += 1
        self._arm_if_recording()

    def _step_line(self, record, tensors=None):
        step, loss, used, after, skipped = record
        used, after = float(used), float(after)  # waits for the device here, once per recorded step
        if skipped is None:
            skipped = self._scaler_enabled() and after < used
        value = None
        if loss is not None:
            value = float(loss)
            value = value if math.isfinite(value) else None  # JSON has no NaN: null is a loss not known
        line = {"step": step, "loss": value, "loss_scale": used, "skipped": bool(skipped)}
        if tensors is not None:
            line["tensors"] = tensors
        return line

    def _laid_out(self, pending):
        """The step's partial histograms as (name, kind) -> [counts, scale, captured], counts a
        COUNTS-long tensor: all of them laid out together, repeated calls summed."""
        keys = list(pending)
        partials = [p for key in keys for p in pending[key][0]]
        matrix = assemble(partials)
        laid_out, row = {}, 0
        for key in keys:
            n = len(pending[key][0])
            counts = matrix[row] if n == 1 else matrix[row:row + n].sum(dim=0)
            row += n
            laid_out[key] = [counts, pending[key][1], pending[key][2]]
        return laid_out

    def _write_recorded(self):
        pending = self._reduce(self._laid_out(self._pending))
        blocks = self._reduce_blocks(self._pending_blocks)
        self._pending, self._seen, self._pending_blocks = {}, {}, {}
        _read_back(self._steps)
        records, current = self._steps[:-1], self._steps[-1]
        self._steps = []
        if self._rank != 0:
            return
        lines = [self._step_line(r) for r in records]
        ordered = sorted(pending.items())
        all_counts = torch.stack([counts for _, (counts, _, _) in ordered]).tolist() if ordered else []  # one read-back
        tensors = [tensor_record(name, kind, counts, scale if not torch.is_tensor(scale) else float(scale), captured)
                   for ((name, kind), (_, scale, captured)), counts in zip(ordered, all_counts)]
        for ((name, kind), _), record in zip(ordered, tensors):
            if (name, kind) in blocks:
                record["blocks"] = blocks[(name, kind)]
        lines.append(self._step_line(current, tensors))
        self._file.write("".join(json.dumps(line) + "\n" for line in lines))
        self._file.flush()

    def _reduce(self, pending):
        """Under torch.distributed: the ranks agree on one key list (the union of what each saw;
        zeros where a rank did not run a module), then sum the sharded kinds. Replicated kinds
        (weights, weight gradients after DDP's averaging) are rank 0's."""
        if not self._distributed:
            return pending
        keys = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(keys, sorted(pending))
        agreed = sorted({tuple(k) for rank_keys in keys for k in rank_keys})
        sharded = [k for k in agreed if k[1] in _SHARDED]
        if sharded:
            device = next((v[0].device for v in pending.values()), torch.device("cpu"))
            if torch.distributed.get_backend() == "nccl" and device.type != "cuda":
                device = torch.device("cuda", torch.cuda.current_device())
            zeros = torch.zeros(COUNTS, dtype=torch.int64, device=device)
            stacked = torch.stack([pending[k][0].to(device) if k in pending else zeros for k in sharded])
            torch.distributed.all_reduce(stacked)
            for k, counts in zip(sharded, stacked):
                scale, captured = (pending[k][1], pending[k][2]) if k in pending else (self._scale_used, "before_cast")
                pending[k] = [counts, scale, captured]
        return pending

    def _reduce_blocks(self, blocks):
        """Under torch.distributed: the block statistics of the sharded kinds summed over the
        ranks (gathered whole: a record is a few hundred numbers), every key any rank saw;
        replicated kinds are rank 0's. Collective: every rank calls it on a recorded step."""
        if not self._distributed or self._blocks is None:
            return blocks
        gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, {k: v for k, v in blocks.items() if k[1] in _SHARDED})
        merged = {k: v for k, v in blocks.items() if k[1] not in _SHARDED}
        for rank_blocks in gathered:
            for key, stats in sorted(rank_blocks.items()):
                merged[key] = merge_block_statistics(merged[key], stats) if key in merged else stats
        return merged

    def close(self):
        """Writes the step records not yet written and removes every hook."""
        self._disarm()
        _read_back(self._steps)
        if self._rank == 0 and self._file is not None:
            self._file.write("".join(json.dumps(self._step_line(r)) + "\n" for r in self._steps))
            self._file.close()
            self._file = None
        self._steps = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

