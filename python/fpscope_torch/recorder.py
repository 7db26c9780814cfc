"""Recorder: observes a PyTorch training and writes an fpscope run log (schema 2)."""

import atexit
import gc
import inspect
import json
import math
import numbers
import os
import re
import signal
import threading
import uuid
import warnings
import weakref

import torch

from . import exponent_counts, log_file
from .blocks import block_statistics, merge_block_statistics, parse_blocks
from .formats import LARGEST, autocast_format, format_name, format_of_activations
from .held import Held, version_of
from .histogram import COUNTS, assemble, captured_of, dense_view, partial_histograms, readable, stored_values, tensor_record
from .wrappers import fsdp1_holdings, is_fsdp1, is_wrapper, model_name, warn_left_out

SCHEMA_VERSION = 2
_C_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # what exponent_counts.c reads
_SHARDED = ("activation", "activation_gradient")  # each rank computes its own; summed across ranks
_PRE_HOOKS_TAKE_KWARGS = "with_kwargs" in inspect.signature(torch.nn.Module.register_forward_pre_hook).parameters  # torch >= 2.0


def _scale_of(kind, loss_scale):
    """The scale a record of `kind` carries: gradients the loss scale their backward used, values
    (activations, weights) none."""
    return loss_scale if kind.endswith("_gradient") else 1.0


_OPEN = weakref.WeakSet()  # Recorders not yet closed: closed at exit (_close_at_exit)


def _close_at_exit():
    """At the interpreter's exit -- the loop ended, raised, or was interrupted without close() --
    each open Recorder writes the step records it still holds (the steps since the last recorded
    one, with the culprits of those that skipped), where they would have been lost with it. Only
    this process's own: a forked child (a DataLoader worker) holds copies of its parent's, whose
    records are the parent's to write."""
    for recorder in list(_OPEN):
        if recorder._pid != os.getpid():
            continue
        try:
            recorder.close()
        except Exception as error:  # one Recorder's failure does not keep the others' records back
            warnings.warn(f"fpscope_torch: closing {recorder.path} at exit: {error}", RuntimeWarning)


atexit.register(_close_at_exit)

_TERMINATE_PID = None  # the process that installed _close_on_terminate


def _close_on_terminate(signum, frame):
    """SIGTERM -- a scheduler preempting the job, torchrun ending the other ranks where one failed
    -- ends the process without running atexit: the open Recorders are closed first, as at exit,
    and then the signal takes its default course, so the process ends by it as it would have. A
    second SIGTERM meanwhile is ignored (it would end the process halfway through a line)."""
    try:
        if os.getpid() == _TERMINATE_PID:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            _close_at_exit()
    finally:  # whatever closing raised, the process ends by the signal
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _close_on_terminate_installed():
    """_close_on_terminate as SIGTERM's handler, where SIGTERM has its default action and this is
    the main thread (the only one that may set a handler); a handler the program set is its own,
    and is left alone."""
    global _TERMINATE_PID
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _close_on_terminate)
            _TERMINATE_PID = os.getpid()
    except (ValueError, OSError):  # an embedding interpreter without signals
        pass

UNREAD = -1.0  # a sentinel reading left out: its tensor changed in place before it was read (held.py)


def _reads_batched(device):
    """Whether the sentinel reads tensors on `device` many to a launch (torch._foreach_norm of order
    inf, one multi-tensor kernel per dtype), and module outputs and gradients there are held for it
    and for their histograms (held.py): on an accelerator, where one reduction each would cost each
    tensor a launch every step."""
    return device.type != "cpu" and hasattr(torch, "_foreach_norm")


def _hold_setting():
    """FPSCOPE_TORCH_HOLD: unset, module outputs and gradients are held where _reads_batched (an
    accelerator); 0 reads each at its hook everywhere; 1 holds them on the CPU too (the bridge's
    tests run both ways). Anything else is refused, naming it."""
    setting = os.environ.get("FPSCOPE_TORCH_HOLD", "")
    if setting not in ("", "0", "1"):
        raise ValueError(f"FPSCOPE_TORCH_HOLD is {setting!r}: 0 reads every module output and gradient at its hook, "
                         "1 holds them on every device, unset holds them on an accelerator")
    return setting


_is_compiling = None  # torch's own test, once found: every hook asks it


def _compiling():
    """Whether torch.compile is tracing the caller: a hook then returns at once, so that nothing of
    the recorder enters a graph or its guards. torch._dynamo may be imported only when something
    compiles: until a test is found, it is looked for again."""
    global _is_compiling
    if _is_compiling is None:
        for module in (getattr(torch, "compiler", None), getattr(torch, "_dynamo", None)):
            _is_compiling = getattr(module, "is_compiling", None)
            if _is_compiling is not None:
                break
        else:
            return False
    return _is_compiling()


_graph_task_id = getattr(torch._C, "_current_graph_task_id", None)  # absent before torch 2


def _in_backward():
    """Whether the autograd engine is running a backward pass on this thread: a forward then is
    activation checkpointing's recomputation. torch < 2 cannot tell (False)."""
    return _graph_task_id is not None and _graph_task_id() != -1


def _dtensor_type():
    for where in ("torch.distributed.tensor", "torch.distributed._tensor"):
        try:
            return __import__(where, fromlist=["DTensor"]).DTensor
        except Exception:  # absent, or (torch 1.13 without distributed) failing to import
            continue
    return None


_DTENSOR = _dtensor_type() if torch.distributed.is_available() else None


def _local(tensor):
    """What this rank histograms of a tensor, and whether the ranks' histograms are then summed.
    A DTensor (FSDP2, tensor parallel) sharded on every mesh dimension: its local shard, summed
    (a sharded tensor's histogram is the sum of its shards'); replicated on every one: its local
    copy, rank 0's; any other placement (a 2-D mesh mixing them, a pending reduction): the whole
    tensor (full_tensor, collective; every rank reaches it in the same order), rank 0's. Complex
    tensors give their real and imaginary parts side by side, each a float a cast would round."""
    summed = False
    if _DTENSOR is not None and isinstance(tensor, _DTENSOR):
        placements = tuple(tensor.placements)
        if all(p.is_shard() for p in placements):
            tensor, summed = tensor.to_local(), True
        elif all(p.is_replicate() for p in placements):
            tensor = tensor.to_local()
        else:
            tensor = tensor.full_tensor()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor, summed


def _unwrapped(model):
    """The module whose names the log uses: through torch.compile's OptimizedModule (`_orig_mod`),
    DistributedDataParallel, DataParallel and FSDP1 (`module`), so that a compiled or wrapped
    model's records carry the names of the model itself (wrappers inside it: wrappers.py)."""
    while True:
        inner = getattr(model, "_orig_mod", None)
        if isinstance(inner, torch.nn.Module):
            model = inner
            continue
        if isinstance(model, (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)) or is_fsdp1(model):
            model = model.module
            continue
        return model


def _tensors(value, path=""):
    """Every floating-point or complex tensor in a module's output, however nested (tuples, lists,
    dicts), with its path: "" for a lone tensor, "[0]", "[1].key"."""
    if torch.is_tensor(value):
        if (value.is_floating_point() or value.is_complex()) and value.device.type != "meta":  # a meta tensor holds no values
            yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{path}.{key}")


def _matches(label, prefixes):
    return any(label == p or label.startswith(p + ".") for p in prefixes)


def _kept(label, include, exclude):
    """Whether include= and exclude= (name prefixes) keep a module or parameter name."""
    return (include is None or _matches(label, include)) and (exclude is None or not _matches(label, exclude))


def _model_name(model):
    """The model's class name, through the class FSDP2's fully_shard makes (FSDP<name>)."""
    cls = type(model)
    try:
        from torch.distributed.fsdp import FSDPModule
    except Exception:  # ImportError, or torch 1.13's fsdp package failing to import on a build without distributed
        return cls.__name__
    return next((c for c in cls.__mro__ if not issubclass(c, FSDPModule)), cls).__name__


def _recorded_modules(model, include, exclude):
    """Leaf modules (their outputs are the layer activations), attention and recurrent modules,
    whose outputs are tuples their children do not show, and any module `include` names exactly (a
    transformer block: its output is the residual stream); filtered by name prefixes."""
    wanted = (torch.nn.MultiheadAttention, torch.nn.RNNBase)
    scripted = []
    for name, module in model.named_modules():
        label = model_name(name) or type(module).__name__
        if is_wrapper(module):  # named and hooked as the module it wraps
            continue
        if isinstance(module, torch.jit.RecursiveScriptModule):  # and every module inside it
            if not any(_matches(label, [outer]) for outer in scripted):
                scripted.append(label)
            continue
        leaf = not any(True for _ in module.children())
        named = include is not None and label in include
        if (leaf or isinstance(module, wanted) or named) and _kept(label, include, exclude):
            yield label, module
    if scripted:
        one = len(scripted) == 1
        warnings.warn(f"fpscope_torch: {', '.join(scripted)} {'is a TorchScript module' if one else 'are TorchScript modules'} "
                      f"(torch.jit.script), which {'takes' if one else 'take'} no Python hooks: {'its' if one else 'their'} outputs "
                      f"and gradients are not recorded, {'its' if one else 'their'} parameters are (unscripted, {'it' if one else 'they'} "
                      "would be recorded whole)", RuntimeWarning, stacklevel=3)


def _recorded_parameters(model, include, exclude):
    for name, parameter in model.named_parameters():
        name = model_name(name)
        if parameter.requires_grad and _kept(name, include, exclude):
            yield name, parameter


def _check_prefixes(model, include, exclude):
    """include= and exclude= name modules or parameters by prefix: one that matches nothing is a
    typo, not a wish to record nothing."""
    names = [model_name(name) for name, _ in model.named_modules() if model_name(name)] + [model_name(name) for name, _ in model.named_parameters()]
    for argument, prefixes in (("include", include), ("exclude", exclude)):
        if prefixes is None:
            continue
        if isinstance(prefixes, str):
            raise TypeError(f"{argument}= takes a list of module names, not the string {prefixes!r}: write {argument}=[{prefixes!r}]")
        unmatched = [p for p in prefixes if not any(_matches(name, [p]) for name in names)]
        if unmatched:
            close = sorted({name.split(".")[0] for name in names})[:8]
            raise ValueError(f"{argument}= names {unmatched}, which match no module or parameter of the model "
                             f"(its top-level names: {', '.join(close)})")


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


def _on_host(record):
    """Whether a step record's values (loss, scales, sentinel readings) are all in host memory, as
    a CPU training's are: reading them waits on no device."""
    readings = record[5]
    values = [record[1], record[2], record[3]] + ([readings[2]] if readings is not None and readings[2] is not None else [])
    return all(not torch.is_tensor(v) or v.device.type == "cpu" for v in values)


def _listed(partials):
    """A pending key's partial histograms as a list: its one partial, or the list a repeated key
    made (micro-batches, a module called again in a pass)."""
    return partials if isinstance(partials, list) else [partials]


def _gradient(kind):
    return kind in ("activation_gradient", "weight_gradient")


# The sentinel's name for the model's own floating-point inputs (a batch of features, pixel
# values, embeddings given as inputs_embeds): no module's name, which holds no parentheses. An
# input is no format's until an operation casts it, so only a NaN or an infinity there can be a
# fault, and only where it broke what the model made of it (_broke_the_forward): an additive
# attention mask's -inf, or a NaN the model replaces (nan_to_num over missing values), is none.
# It is no tensor's upstream either.
MODEL_INPUT = "(model input)"


def _broke_the_forward(readings, position):
    """Whether the model's input read at `position` (a NaN or an infinity) broke the forward: the
    first module output read after it in its micro-batch holds a NaN or an infinity too, or none
    was read (the step stopped there)."""
    micro_batch = readings[position][2]
    for name, kind, later_micro_batch, largest in readings[position + 1:]:
        if name != MODEL_INPUT and kind == "activation" and later_micro_batch == micro_batch:
            return not math.isfinite(largest)
    return True


def find_culprit(readings, fmt, captured="as_stored"):
    """The culprit rule of the run log (fpscope's culprit.hpp, the one the engine applies): of a
    step's sentinel readings [(name, kind, micro_batch, largest magnitude)] in execution order, the
    first that held a NaN, an infinity or a value past the format's largest (the model's input,
    MODEL_INPUT: a NaN or an infinity that broke the forward), with the largest magnitude of what
    leads to it (the gradients before a gradient, the rest but the model's input before anything
    else); None where every reading is clean. `captured`: as_stored where the run's operations
    round into the format (autocast), before_cast where they run in float32 (and for the model's
    input, which no operation of the run made)."""
    format_largest = LARGEST.get(fmt, math.inf)  # another format's: only NaN and infinity count
    for position, (name, kind, micro_batch, largest) in enumerate(readings):
        fault = "nan" if math.isnan(largest) else "inf" if math.isinf(largest) else "overflow" if largest > format_largest else None
        if fault is None or (name == MODEL_INPUT and (fault == "overflow" or not _broke_the_forward(readings, position))):
            continue
        culprit = {"name": name, "kind": kind, "fault": fault, "format": fmt, "format_largest": LARGEST.get(fmt, 0.0),
                   "largest": largest if math.isfinite(largest) else None, "position": position,
                   "captured": "before_cast" if name == MODEL_INPUT else captured}  # the data: made before any cast
        upstream = None
        for before in readings[:position] if name != MODEL_INPUT else ():  # the data comes from no tensor before it
            if before[0] != MODEL_INPUT and _gradient(before[1]) == _gradient(kind) and (upstream is None or before[3] > upstream[3]):
                upstream = before
        if upstream is not None:
            culprit["upstream"] = {"name": upstream[0], "kind": upstream[1], "largest": upstream[3]}
        if micro_batch is not None and micro_batch >= 0:  # the weights are read before the first
            culprit["micro_batch"] = micro_batch
        return culprit
    return None


def cast_format(precision):
    """The header's `format` -- what `fpscope analyze` and the app ask about by default -- as the
    Recorder's `precision` names it, when it is not given `fmt`: "bf16 autocast", "bf16-mixed" ->
    "bf16"; "fp16 autocast", "16-mixed", "half" -> "fp16"; "fp32", "32-true" -> "fp32"; "fp64",
    "64-true", "double" -> "fp64". None where it names none ("transformer-engine", no precision):
    the activations then tell it (Recorder._settle_format)."""
    text = str(precision or "").lower()
    if "bf16" in text or "bfloat16" in text:
        return "bf16"
    if re.search(r"fp16|float16|half|(?<![0-9])16(?![0-9])", text):
        return "fp16"
    if re.search(r"fp32|float32|(?<![0-9])32(?![0-9])", text):
        return "fp32"
    if re.search(r"fp64|float64|double|(?<![0-9])64(?![0-9])", text):
        return "fp64"
    return None


class Recorder:
    """Records exponent histograms of a model's activations, activation gradients, weights and
    weight gradients every `every` optimizer steps, and a step record (loss, the loss scale its
    backward used, skipped) for every step, into the run log at `path`.

    Observe, never alter: forward hooks for activations, and hooks on the autograd nodes that made
    them for their gradients (an in-place op after a module rewrites its output tensor, never that
    node); weight gradients are read when the backward pass has finished, after every callback
    queued in it (DistributedDataParallel's averaging, FSDP2's reduce-scatter): the gradient the
    optimizer sees, before any unscaling, so they carry the scale the backward used, and each
    record says so (`scale`); values already in fp16/bf16 are `as_stored`, others `before_cast`.
    Hooks are installed for the steps recorded and, for the step sentinel (each tensor's largest
    magnitude, on every step), on the others; with sentinel=False an unrecorded step runs exactly as
    without fpscope. The hooks stay installed from one such step to the next (with the sentinel,
    from the first step to close()), so forward hooks the model gets after the Recorder was made
    run after the recorder's. On an accelerator the hooks hold module outputs and gradients by
    reference, read together later (held.py).

    One optimizer step is one record however many forwards and backwards make it: micro-batches of
    gradient accumulation add into the same tensors' histograms (each forward of `model` starts a
    pass; a module called twice within one pass is two layers, `name` and `name#2`), and the
    forward that activation checkpointing recomputes during the backward is not recorded again.
    Under torch.compile the hooks return at once while Dynamo traces, so nothing of the recorder
    enters a graph: activations computed inside compiled code are not recorded; weights, weight
    gradients, losses and scales are.

    `fmt` is the format the run casts to, the header's `format` that `fpscope analyze` and the app
    ask about by default: given (a name or a torch dtype; formats.py lists them), or read from
    `precision` where it names one ("bf16 autocast" -> bf16; cast_format), else what the first
    recorded step says (_settle_format: its activations' dtypes, the autocast around the model's
    forward, 16-bit parameters; fp16 until then, and where nothing says, marked as assumed).
    `scaler`: the GradScaler whose scale the backward carries (a GradScaler in use but not given is
    refused at the first step: its gradients would be logged as unscaled); `scaler=False` says
    there is none. An existing log at `path` is replaced only with `overwrite=True`, and continued
    with `append=True`; one writer at a time (the lock `fpscope train` and the app take).
    `tensorboard="runs/name"` also writes every line as TensorBoard events as it goes
    (fpscope_torch.tensorboard: binade histograms, loss, scale, skips, flush shares).

    Call step(loss) once per optimizer step, after the optimizer step and the scaler's update, and
    close() at the end (or use `with`): it writes the records of the steps since the last recorded
    one. A Recorder still open when the interpreter exits (a loop that raised, or was interrupted)
    is closed then.
    Under torch.distributed every rank must call it (recording steps are collective): activations,
    activation gradients and DTensor shards (FSDP2) are summed over the ranks, replicated weights
    and weight gradients (DDP, after its averaging) are rank 0's.

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
                 include=None, exclude=None, append=False, overwrite=False, global_step=None, blocks=None, block_size=None,
                 tensorboard=None, sentinel=True):
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model={model!r}: the Recorder records a torch.nn.Module, the model the loop trains (or its "
                            "DistributedDataParallel, FSDP or torch.compile wrapper)")
        if isinstance(_unwrapped(model), torch.jit.RecursiveScriptModule):
            raise TypeError("model is a TorchScript module (torch.jit.script), which takes no Python hooks: give the Recorder "
                            "the model unscripted, and train that")
        if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 1:
            raise ValueError(f"every={every!r}: record every how many steps, a whole number from 1 (every step) up")
        if scaler not in (None, False) and not callable(getattr(scaler, "get_scale", None)):
            raise ValueError(f"scaler={scaler!r}: give the GradScaler the loop scales its losses with, or scaler=False where there is none")
        unknown = set(kinds) - {"activation", "activation_gradient", "weight", "weight_gradient"}
        if unknown:
            raise ValueError(f"unknown kinds {sorted(unknown)}: expected activation, activation_gradient, weight, weight_gradient")
        if append and overwrite:
            raise ValueError("append=True goes on with an existing log and overwrite=True replaces it: pass one of them")
        if global_step is not None and global_step < 0:  # before the log is touched
            raise ValueError(f"global_step must not be negative, not {global_step}")
        self.model = model
        self._root = _unwrapped(model)
        self.path = os.fspath(path)
        self.every = every
        self._scaler_declared_none = scaler is False
        self.scaler = None if scaler is False else scaler
        self.kinds = set(kinds)
        _check_prefixes(self._root, include, exclude)
        self._modules = list(_recorded_modules(self._root, include, exclude))
        self._parameters = []              # (name, parameter) of those recorded
        self._summed_parameters = set()    # the names of those FSDP1 shards: records summed over the ranks
        sharded, left_out = fsdp1_holdings(model)  # the wrapper too: an FSDP1 root is a unit
        not_recorded = []
        for name, parameter in _recorded_parameters(self._root, include, exclude):
            if id(parameter) in left_out:
                not_recorded.append((name, left_out[id(parameter)]))
                continue
            self._parameters.append((name, parameter))
            if id(parameter) in sharded:
                self._summed_parameters.add(name)
        warn_left_out(not_recorded)
        self._distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self._rank = torch.distributed.get_rank() if self._distributed else 0
        self._blocks = parse_blocks(blocks) if blocks is not None else None
        if self._blocks is not None and block_size is not None and not 1 <= block_size <= 256:
            raise ValueError(f"block_size must be 1 to 256, not {block_size}")
        if self._blocks is not None and self._blocks[0] == "nvfp4" and block_size not in (None, 16):
            raise ValueError(f"nvfp4's blocks are 16 elements, not {block_size}")
        self._block_size = block_size
        self._pending_blocks = {}   # (name, kind) -> the step's block statistics
        self._hooks = []            # installed while steps are armed (_armed); removed before one that is not, and at close()
        self._pending = {}          # (name, kind) -> [its partial (a list once the key repeats), captured, summed over ranks]
        self._held = Held()         # module outputs and gradients held for one look (_holds)
        self._hold_setting = _hold_setting()
        self._calls = {}            # module label -> calls so far in this forward pass
        self._recomputed_calls = {} # the same for checkpointing's recomputation in the backward
        self._pass_names = set()    # names recorded by this forward pass
        self._gradient_hooks = 0    # gradient hooks installed this step, and whether any ran
        self._backward_seen = False
        self._reader_queued = False
        self._shadowing = False     # inside shadow(): records go to "<name> (fp32 shadow)"
        self._shadow_calls = {}
        self._steps = []            # step records not yet written: [step, loss, scale used, scale after, skipped, readings]
        # The step sentinel: on every step, each tensor's largest magnitude (_read: at once on the
        # CPU; a device's kept there and read back only for a step that skipped or lost its loss).
        self._sentinel = sentinel
        self._labels = []           # this step's readings: (name, kind, micro-batch) in execution order
        self._values = []           # and their largest magnitudes: floats; on a device (min, max) 0-dim tensors, or
                                    # (a launch's largest magnitudes, this one's index) (_fill_readings)
        self._micro_batch = 0       # forward passes of the model so far in this step, less one
        self._labels_at_pass = 0    # len(_labels) when the micro-batch under way began (micro_batch())
        self._format = format_name(fmt) if fmt is not None else cast_format(precision) or "fp16"
        # Neither fmt nor a precision naming a format: the format is the one the first recorded
        # step's activations are in (_settle_format); until then, and where they do not say, fp16,
        # the header saying that it is assumed.
        self._format_open = fmt is None and cast_format(precision) is None
        self._activation_dtypes = set()
        self._autocast_formats = set()  # what torch.autocast cast to around the model's training forwards (_note_autocast)
        self._autocast_hook = None
        self._header = None         # the header this Recorder wrote (a log it made), else None
        self._events_header = None  # the header the TensorBoard writer is given with the first lines
        self._file = None
        self._events = None         # the live TensorBoard writer, on rank 0
        self._closed = False
        self._scaler_looked_for = self.scaler is not None or self._scaler_declared_none
        self._scale_used = self._scale_now()  # the scale the next backward will use
        self.step_index = 0
        self._steps_taken = 0  # step() calls that ended a step
        self._created = False  # whether _open made the log (else it appends to one)
        self._take_over_from_this_process(append or overwrite)
        if self._rank == 0:
            self._open(model_name, precision, self._format, append, overwrite, tensorboard,
                       global_step if append else None)
        try:
            self._begin(append, global_step)
        except BaseException:  # a log this Recorder will not write is not left behind
            self._disarm()
            if self._created:
                os.unlink(self.path)  # while its lock is held: no other writer has taken it meanwhile
            self._let_the_log_go()
            raise
        if self._format_open:
            # On the model as given (a torch.compile or DDP wrapper too): a wrapper's forward runs
            # eagerly, where hooks inside a compiled model do not run at all.
            self._autocast_hook = model.register_forward_pre_hook(self._note_autocast)
        self._pid = os.getpid()
        _OPEN.add(self)
        _close_on_terminate_installed()

    def _take_over_from_this_process(self, asked):
        """A Recorder of this process still open on the same log -- a notebook's cell run again,
        the one before no longer held but alive through its hooks on the model -- is closed (its
        steps written, its hooks removed), with a warning, where this one was `asked` to replace or
        go on with the log; else refused, saying how. A Recorder of another process keeps its log
        (log_file says so)."""
        here = os.path.realpath(self.path)
        for other in list(_OPEN):
            if other._pid == os.getpid() and os.path.realpath(other.path) == here:
                if not asked:
                    raise log_file.RunLogError(f"{self.path}: a Recorder of this process is writing it (at step {other.step_index}): "
                                               "close() it, or pass append=True or overwrite=True to close it and take its log")
                warnings.warn(f"fpscope_torch: closed the Recorder this process had open on {self.path} (at step "
                              f"{other.step_index}) so that this one can take its log", RuntimeWarning, stacklevel=3)
                other.close()

    def _begin(self, append, global_step):
        """The first step's number (where appending: after the log's last, or `global_step`) and its
        hooks."""
        if append:
            # The log made ready to go on (log_file.cut_back): at global_step where given (a run
            # resumed from a checkpoint), else after its last step.
            given = global_step
            if self._rank == 0:
                last, cut = log_file.cut_back(self._file, self.path, global_step)
                if cut:
                    warnings.warn(cut, RuntimeWarning, stacklevel=2)
                if global_step is None:
                    global_step = last + 1
            if given is None and self._distributed:
                shared = [global_step]
                torch.distributed.broadcast_object_list(shared, src=0)
                global_step = shared[0]
        if global_step is not None:
            self.step_index = global_step
        self._arm_if_recording()

    # ---- the log ----

    def _products(self):
        """Where the model's products run, for the header (as fpscope train names its libraries):
        "PyTorch 2.5.1 (cpu)", "PyTorch 2.5.1 (cuda: NVIDIA H100 80GB HBM3)"."""
        device = next((p.device for p in self._root.parameters()), torch.device("cpu"))
        where = device.type
        if device.type == "cuda":
            where += ": " + torch.cuda.get_device_name(device)
        return f"PyTorch {torch.__version__} ({where})"

    def _open(self, model_name, precision, fmt, append, overwrite, tensorboard, resumed_at):
        if tensorboard is not None:
            from .tensorboard import summary_writer_type
            summary_writer_type()  # before the log: without the tensorboard package, no log is left behind
        if append and os.path.exists(self.path):
            self._file, header = log_file.open_to_append(self.path)
            refusal = None
            if self._format_open and header.get("source") == "fpscope_torch" and header.get("format") in LARGEST:
                if header.get("format_assumed"):
                    # Its writer only assumed its format: this run settles it at its first recorded
                    # step (_settle_format), and the header with it.
                    self._header = header
                else:
                    # Neither fmt nor a precision naming a format: the run goes on in the format its log names.
                    fmt = self._format = header["format"]
                    self._format_open = False
            if header.get("source") != "fpscope_torch":
                refusal = (f"{self.path} was written by {header.get('source') or 'another writer'}, not by a Recorder: its steps "
                           "are that run's; name a new log")
            elif header.get("format") != fmt:
                refusal = (f"{self.path} holds a run in {header.get('format')} and this Recorder's format is {fmt}: its steps "
                           f"would be read as {header.get('format')}; pass fmt={header.get('format')!r} (or the precision the log "
                           "was written with), or name a new log")
            if refusal is not None:
                self._file.close()
                self._file = None
                raise log_file.RunLogError(refusal)
            self._run_id = header.get("run_id", "")
        else:
            self._run_id = uuid.uuid4().hex
            header = {"fpscope_run_log": True, "schema_version": SCHEMA_VERSION, "run_id": self._run_id,
                      "source": "fpscope_torch", "model": model_name or _model_name(self._root),
                      "precision": "" if precision is None else str(precision), "format": fmt, "rounding": "rne",
                      "scaler": "dynamic" if self._scaler_enabled() else "none", "products": self._products()}
            if self._format_open:  # until _settle_format finds what the run casts to
                header = dict(header, format_assumed=True)
            self._file = log_file.create(self.path, header, overwrite)
            self._created = True
            self._header = header
        if tensorboard is not None:
            from .tensorboard import EventWriter
            self._events = EventWriter(tensorboard, purge_step=resumed_at)
            self._events_header = header  # with the first lines: after _settle_format

    def _write_lines(self, lines):
        """Writes step lines (dicts, or a line's JSON text already made) to the log, and with a
        TensorBoard writer as events (which then gets dicts)."""
        if lines:
            log_file.append(self._file, "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode(),
                            self.path)
        self._header_to_events()
        if self._events is not None:
            for line in lines:
                self._events.line(line)
            self._events.flush()

    def _header_to_events(self):
        """Gives the TensorBoard writer the log's header, once: with the first lines (the format
        settled by then), or at close()."""
        if self._events is not None and self._events_header is not None:
            self._events.header(self._header or self._events_header)
            self._events_header = None

    def _settle_format(self):
        """At the first recorded step, where neither fmt nor a precision naming a format was given:
        the format the run casts to, as its activations' dtypes say it (format_of_activations: bf16
        under bf16 autocast, fp32 for a float32 model), else the autocast around the model's
        forward, else a 16-bit model's parameters, becomes this Recorder's -- the culprit rule's
        from this step on -- and, in a log this Recorder made, the header's (rewritten in place, no
        longer: the names are all four letters, `format_assumed` dropped). Where nothing says, the
        format stays fp16 and the header says it is assumed. Every rank settles its own."""
        if not self._format_open:
            return
        self._format_open = False
        self._stop_noting_autocast()
        # Where no activation was recorded (a compiled model's, or kinds without them), torch.autocast
        # around the model's forward tells, and else the recorded parameters tell a model converted
        # to a 16-bit dtype with .to().
        inferred = format_of_activations(self._activation_dtypes) if self._activation_dtypes else None
        if inferred is None and len(self._autocast_formats) == 1:
            inferred = next(iter(self._autocast_formats))
        if inferred is None and not self._activation_dtypes:
            inferred = format_of_activations({p.dtype for _, p in self._parameters}, float32_says=False)
        self._activation_dtypes, self._autocast_formats = set(), set()
        if inferred is None:  # the header goes on saying its format is assumed
            if self._header is not None:
                warnings.warn(f"fpscope_torch: nothing in the first recorded step says what format {self.path}'s run casts to (no "
                              "recorded activation, no autocast around the forward of the model given to the Recorder, float32 "
                              "parameters): the log names fp16 as an assumption, which analyze and the app take as a default; "
                              "pass fmt= (\"bf16\", \"fp16\", \"fp32\", ...) to name it",
                              RuntimeWarning, stacklevel=4)
            return
        if self._header is not None:
            header = {k: v for k, v in self._header.items() if k != "format_assumed"}
            header["format"] = inferred
            if not log_file.rewrite_header(self._file, self._header, header):
                return  # the log says what it said: the culprit rule stays with it
            self._header = header
        self._format = inferred

    def _note_autocast(self, module, inputs):
        """A training forward of the model (as given): the format torch.autocast casts to around it,
        on the device of the model's parameters (else of its first input), where it is on."""
        if _compiling() or not torch.is_grad_enabled() or not module.training:
            return
        device = next((p.device for p in self._root.parameters()), None)
        if device is None:
            device = next((t.device for _, t in _tensors(inputs)), torch.device("cpu"))
        fmt = autocast_format(device.type)
        if fmt is not None:
            self._autocast_formats.add(fmt)

    def _stop_noting_autocast(self):
        if self._autocast_hook is not None:
            self._autocast_hook.remove()
            self._autocast_hook = None

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

    def _refuse_an_undeclared_scaler(self):
        """Once, at the first step with no scaler given: a GradScaler that has scaled a loss makes
        every gradient carry its scale, which the log would then call 1."""
        self._scaler_looked_for = True
        types = tuple(t for t in (getattr(getattr(torch, "amp", None), "GradScaler", None),
                                  getattr(torch.cuda.amp, "GradScaler", None)) if isinstance(t, type))
        if not types:
            return
        # Every GradScaler class there is now (FSDP's ShardedGradScaler, Lightning's), so that each
        # of the hundreds of thousands of objects a process holding torch has costs one set lookup.
        # type(), not isinstance(): the latter asks objects for __class__, which some answer with a
        # warning (or, for a weak proxy whose object is gone, an error).
        scalers, unseen = set(), list(types)
        while unseen:
            kind = unseen.pop()
            if kind not in scalers:
                scalers.add(kind)
                unseen.extend(kind.__subclasses__())
        for thing in gc.get_objects():
            if type(thing) in scalers and thing.is_enabled() and getattr(thing, "_scale", None) is not None:
                raise RuntimeError("a GradScaler is scaling this training's losses but was not given to Recorder: its "
                                   "gradients would be logged as unscaled; pass Recorder(..., scaler=scaler), or "
                                   "scaler=False if that scaler belongs to another model")

    def _refuse_a_step_before_the_scalers_update(self):
        states = getattr(self.scaler, "_per_optimizer_states", None)
        if not isinstance(states, dict):
            return
        if any(getattr(state.get("stage"), "name", "") == "STEPPED" for state in states.values() if isinstance(state, dict)):
            raise RuntimeError("Recorder.step() came after scaler.step() but before scaler.update(): call it after "
                               "scaler.update(), or a skipped step is logged one step late")

    # ---- hooks, installed only for a recorded step ----

    def _recording(self):
        return self.step_index % self.every == 0

    def _armed(self):
        """Whether the coming step has hooks: a recorded step, and every step where the sentinel reads
        (its hooks only read each tensor's largest magnitude)."""
        return self._recording() or self._sentinel

    def _arm_if_recording(self):
        """The coming step's hooks (_armed), installed where the step before had none, and its
        readings of the weights."""
        self._labels, self._values, self._micro_batch = [], [], -1
        self._labels_at_pass = 0    # len(_labels) when the micro-batch under way began
        self._last_read = None
        if not self._armed():
            return
        self._calls, self._recomputed_calls, self._pass_names = {}, {}, set()
        self._backward_seen = False
        reads_gradients = "weight_gradient" in self.kinds or self._sentinel
        self._gradient_hooks = len(self._parameters) if reads_gradients else 0
        if not self._hooks:
            if _PRE_HOOKS_TAKE_KWARGS:  # the inputs given by keyword too (HF: pixel_values=, inputs_embeds=)
                self._hooks.append(self._root.register_forward_pre_hook(self._new_pass, with_kwargs=True))
            else:
                self._hooks.append(self._root.register_forward_pre_hook(lambda module, inputs: self._new_pass(module, inputs, {})))
            self._hooks.append(self._root.register_forward_hook(self._forward_ended))
            if reads_gradients:
                self._hooks.append(self._root.register_forward_hook(self._watch_for_backward))
            for label, module in self._modules:
                self._hooks.append(module.register_forward_hook(self._forward_hook(label)))
            for name, parameter in self._parameters if reads_gradients else ():
                if hasattr(parameter, "register_post_accumulate_grad_hook"):
                    self._hooks.append(parameter.register_post_accumulate_grad_hook(self._weight_gradient_arrived))
                else:
                    self._hooks.append(parameter.register_hook(self._weight_gradient_arrived))
        if self._sentinel:  # the weights the coming forward uses
            self._read_all("weight", self._parameters, lambda p: p)
        if self._recording():
            self._add_many("weight", self._parameters)  # the weights the coming forward uses

    def _disarm(self):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    def _read(self, name, kind, tensor):
        """The sentinel's reading of one tensor. On the CPU, its largest magnitude (NaN where it
        holds a NaN) at once, from one vectorised pass of C (exponent_counts.largest_magnitude)
        over its storage where that holds just its values in some order (dense_view); elsewhere
        its smallest and largest value, one reduction kernel (torch.aminmax) left on the device,
        its largest magnitude made from them when read back. The tensor read just before, handed
        over again (a module that returns its input unchanged -- dropout with p = 0, an identity
        -- and its gradient node's one gradient, given to both hooks), takes that reading: the
        same object at the same version counter holds the same values."""
        given, version, last = tensor, version_of(tensor), self._last_read
        if last is not None and version is not None and last[0]() is given and last[1] == version:
            self._labels.append((name, kind, self._micro_batch))
            self._values.append(last[2])
            return
        tensor, _ = _local(tensor)
        if tensor.numel() == 0:
            return
        self._labels.append((name, kind, self._micro_batch))
        # A sparse tensor's stored values: the zeros it does not store move no magnitude.
        tensor = readable(stored_values(tensor.detach())[0])
        value = 0.0 if tensor.numel() == 0 else None  # a sparse tensor storing nothing
        if value is None and tensor.device.type == "cpu" and tensor.dtype in _C_DTYPES:
            view = dense_view(tensor)
            if view is not None:
                value = exponent_counts.largest_magnitude(view)
        if value is None:
            value = torch.aminmax(tensor)
        self._values.append(value)
        self._last_read = (weakref.ref(given), version, value)

    def _read_all(self, kind, named, tensor_of):
        """The sentinel's readings of the parameters' tensors (weights, weight gradients), in their
        order: where _reads_batched, many to a launch (_fill_readings); elsewhere one at a time
        (_read)."""
        batched = []
        for name, parameter in named:
            tensor = tensor_of(parameter)
            if tensor is None:
                continue
            local, _ = _local(tensor)
            if local.numel() == 0 or not local.is_floating_point() or local.layout != torch.strided or not _reads_batched(local.device):
                self._read(name, kind, tensor)
                continue
            batched.append((self._reading_to_fill(name, kind), local.detach()))
        self._fill_readings(batched)

    def _reading_to_fill(self, name, kind):
        """A reading's place in execution order, its value filled later (_fill_readings): its index
        into _values."""
        self._labels.append((name, kind, self._micro_batch))
        self._values.append(None)
        return len(self._values) - 1

    def _fill_readings(self, members):
        """The readings of [(index into _values, tensor)]: those of one device and dtype in one
        torch._foreach_norm of order inf, each tensor's largest magnitude (NaN where it holds one),
        kept as (the launch's largest magnitudes, its index): one tensor a launch, where a view
        each would be an object a reading, made and stacked again every step."""
        groups = {}
        for i, tensor in members:
            tensor = readable(tensor)
            groups.setdefault((tensor.device, tensor.dtype), []).append((i, tensor))
        for group in groups.values():
            largest = torch.stack(torch._foreach_norm([t for _, t in group], math.inf)).float()
            for k, (i, _) in enumerate(group):
                self._values[i] = (largest, k)

    def _device_readings(self):
        """The step's readings as (one entry per reading, the device's values in one tensor): an
        entry is a float (read on the CPU), an index into the tensor (a largest magnitude), or a
        pair of indexes (min, max). Nothing waits for the device: the tensor is read back only for
        a step that needs its culprit."""
        entries, parts, at, size = [], [], {}, 0
        for v in self._values:
            if isinstance(v, float):
                entries.append(v)
                continue
            if isinstance(v[1], int):  # a launch's largest magnitudes, shared by its readings
                if id(v[0]) not in at:
                    at[id(v[0])] = size
                    parts.append(v[0])
                    size += v[0].numel()
                entries.append(at[id(v[0])] + v[1])
            else:  # (min, max) of one tensor
                parts.append(torch.stack([v[0].float(), v[1].float()]))
                entries.append((size, size + 1))
                size += 2
        device = parts[0].device if parts else None
        return entries, torch.cat([p.to(device) for p in parts]) if parts else None

    def _add_many(self, kind, named, replace=False):
        """_add for each (name, tensor) of `named`, their histograms made together
        (partial_histograms: one launch per device and dtype on an accelerator)."""
        if kind not in self.kinds or not self._recording():
            return
        named = list(named)
        partials = self._histograms_of([_local(tensor)[0] for _, tensor in named])
        for (name, tensor), partial in zip(named, partials):
            self._add(name, kind, tensor, replace, partial)

    def _add(self, name, kind, tensor, replace=False, partial=None):
        """The histogram of `tensor` (`partial`, where _add_many made it) into the step's record of
        (name, kind): added to what the step recorded there already, or in its place."""
        if kind not in self.kinds or not self._recording():
            return
        tensor, shard = _local(tensor)
        fsdp1_shard = kind not in _SHARDED and name.removesuffix(" (fp32 shadow)") in self._summed_parameters  # this rank's piece (wrappers.py)
        summed = kind in _SHARDED or shard or fsdp1_shard
        if partial is None:
            partial = self._histograms_of([tensor])[0]
        key = (name, kind)
        if self._blocks is not None and tensor.layout == torch.strided and not fsdp1_shard:  # docs/bridge.md: which have none
            stats = block_statistics(tensor, self._blocks[0], self._blocks[1], self._block_size)
            if key in self._pending_blocks and not replace:
                stats = merge_block_statistics(self._pending_blocks[key], stats)
            self._pending_blocks[key] = stats
        if key in self._pending and not replace:
            entry = self._pending[key]  # summed when the step is written
            entry[0] = entry[0] + [partial] if isinstance(entry[0], list) else [entry[0], partial]
        else:
            self._pending[key] = [partial, captured_of(tensor), summed]

    def _histograms_of(self, tensors):
        """The tensors' partial histograms, made together (partial_histograms), a tensor given
        twice made once: a module that returns its input unchanged (dropout with p = 0, an
        identity) hands the same tensor to two records, and its gradient node the same gradient,
        which a look (held.py) reads together. Same object, same version counter: same values."""
        first = {}  # (id, version) -> the tensor's place among those made; all alive in `tensors`
        made, places = [], []
        for tensor in tensors:
            key = (id(tensor), version_of(tensor))
            if key not in first:
                first[key] = len(made)
                made.append(tensor)
            places.append(first[key])
        partials = partial_histograms(made)
        return [partials[k] for k in places]

    def _take(self, name, kind, tensor):
        """A module output's or gradient's histogram (on a recorded step) and sentinel reading: where
        _holds and its key is known to stay as its hook saw it, held for the next look (held.py);
        else made at once, and the tensor watched to learn whether it stays."""
        histogram = kind in self.kinds and self._recording()
        reading = self._sentinel and not self._shadowing
        if not histogram and not reading:
            return
        local, _ = _local(tensor)  # at the hook: a DTensor gathered whole is collective, in every rank's order
        if histogram and self._format_open and kind == "activation" and not self._shadowing:
            self._activation_dtypes.add(local.dtype)
        key = (name, kind)
        holding = self._blocks is None and local.layout == torch.strided and self._holds(local.device)
        if holding and self._held.holds(key) and Held.can_hold(local):
            index = None  # the reading's place in _values, filled at the look
            if reading and local.numel() > 0:
                index = self._reading_to_fill(name, kind)
            self._held.hold(key, local.detach(), (histogram, index))
            if self._held.full:
                self._look()
            return
        if histogram:
            self._add(name, kind, local)
        if reading:
            self._read(name, kind, local)
        if holding:
            self._held.watch(key, local.detach())
            if self._held.full:
                self._look()

    def _holds(self, device):
        """Whether module outputs and gradients on `device` are held (_hold_setting)."""
        if self._hold_setting == "":
            return _reads_batched(device)
        return self._hold_setting == "1" and hasattr(torch, "_foreach_norm")

    def _look(self):
        """Reads what the hooks held (held.py): their histograms made together (partial_histograms),
        their readings many to a launch (_fill_readings). A tensor changed in place since its hook
        is not read for this step, and a warning says so, once for its name."""
        if self._held.empty:
            return
        unchanged, changed = self._held.look()
        for (name, kind), (_, index) in changed:
            if index is not None:
                self._values[index] = UNREAD
            warnings.warn(f"fpscope_torch: {name} ({kind}) was changed in place after its hook in step {self.step_index}: "
                          "it is left out of that step's readings (and histograms, where the step is recorded), and read at its "
                          "hook from now on",
                          RuntimeWarning, stacklevel=2)
        histograms = [(key, tensor) for key, tensor, payload in unchanged if payload[0]]
        partials = self._histograms_of([tensor for _, tensor in histograms]) if histograms else []
        for ((name, kind), tensor), partial in zip(histograms, partials):
            self._add(name, kind, tensor, partial=partial)
        self._fill_readings([(payload[1], tensor) for _, tensor, payload in unchanged if payload[1] is not None])

    def _forward_ended(self, module, inputs, output):
        """The model's forward returned: what its hooks held is read now, before the backward."""
        if not _compiling():
            self._look()

    def _shadow_name(self, name):
        return f"{name} (fp32 shadow)" if self._shadowing else name

    def _new_pass(self, module, inputs, kwargs):
        """A forward of the model: the next micro-batch (its modules' calls counted afresh, so that
        micro-batches add into the same names), and the sentinel's reading of the model's
        floating-point inputs (MODEL_INPUT) where it reads a training forward."""
        if _compiling() or self._shadowing or _in_backward():
            return
        self.micro_batch()
        if self._sentinel and torch.is_grad_enabled() and module.training:
            for _, tensor in _tensors((inputs, kwargs)):
                self._read(MODEL_INPUT, "activation", tensor)

    def micro_batch(self):
        """Starts the next micro-batch's forward pass. Calling the model given to Recorder does
        this; a loop that calls only its parts (a LightningModule's training_step) calls it before
        each micro-batch, or the parts of the second count as called twice (`name#2`) and its
        readings name no micro-batch. A call that follows one with nothing read since (the loop
        calls it, then the model) starts no further micro-batch."""
        self._calls, self._recomputed_calls, self._pass_names = {}, {}, set()
        if self._micro_batch < 0 or len(self._labels) > self._labels_at_pass:
            self._micro_batch += 1
        self._labels_at_pass = len(self._labels)

    def _watch_for_backward(self, module, inputs, output):
        """The model's output: its backward starts the reading of the weight gradients, also where
        none reaches a parameter through autograd (FSDP2 sets its sharded gradients itself)."""
        if _compiling() or not torch.is_grad_enabled():
            return
        for _, tensor in _tensors(output):
            if tensor.grad_fn is not None:
                tensor.grad_fn.register_hook(lambda grad_inputs, grad_outputs: self._weight_gradient_arrived())

    def _forward_hook(self, label):
        def hook(module, inputs, output):
            if _compiling():
                return  # inside a graph being traced: nothing of the recorder may enter it
            # An evaluation forward (no_grad, eval()) on a recording step is not training.
            if not torch.is_grad_enabled() or not module.training:
                return
            recomputing = not self._shadowing and _in_backward()
            calls = self._shadow_calls if self._shadowing else self._recomputed_calls if recomputing else self._calls
            call = calls.get(label, 0) + 1
            calls[label] = call
            name = self._shadow_name(label if call == 1 else f"{label}#{call}")  # a module called twice is two layers
            if recomputing and name in self._pass_names:
                return  # checkpointing recomputes what this pass's forward recorded (and hooked)
            self._pass_names.add(name)
            for path, tensor in _tensors(output):
                self._take(name + path, "activation", tensor)
                if ("activation_gradient" in self.kinds or self._sentinel) and tensor.grad_fn is not None:
                    # On the node that made the output, not on the tensor: an in-place op after
                    # the module (ReLU(inplace=True)) rewrites the tensor, never that node.
                    self._gradient_hooks += 1
                    tensor.grad_fn.register_hook(self._output_grad_hook(name + path, tensor.output_nr))
        return hook

    def _output_grad_hook(self, name, output_nr):
        def hook(grad_inputs, grad_outputs):
            self._backward_seen = True
            grad = grad_outputs[output_nr] if output_nr < len(grad_outputs) else None
            if grad is not None:
                self._take(name, "activation_gradient", grad)
        return hook

    def _weight_gradient_arrived(self, *_):
        """A parameter's gradient was accumulated: the weight gradients are read once this backward
        has finished (_read_weight_gradients). Returns None: the gradient is not changed."""
        self._backward_seen = True
        if not self._reader_queued:
            self._reader_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._read_weight_gradients_last)

    def _read_weight_gradients_last(self):
        # Callbacks queued during the backward after this one (DDP queues its averaging when the
        # last gradient is ready) run before the reader that it queues now.
        torch.autograd.Variable._execution_engine.queue_callback(self._read_weight_gradients)

    def _read_weight_gradients(self):
        """Every recorded parameter's gradient as the optimizer will see it: accumulated over the
        micro-batches so far (the last backward's reading replaces the earlier ones), averaged or
        reduced by the data-parallel wrapper, still carrying the loss scale."""
        self._reader_queued = False
        self._look()
        if self._sentinel and not self._shadowing:
            self._read_all("weight_gradient", self._parameters, lambda p: p.grad)
        self._add_many("weight_gradient", [(self._shadow_name(name), parameter.grad) for name, parameter in self._parameters if parameter.grad is not None],
                       replace=True)

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
        self._refuse_if_closed("shadow()")
        if not self._recording():
            return
        parameters = [p for p in self._root.parameters() if p.requires_grad]
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

    def _refuse_if_closed(self, what):
        if self._closed:
            raise RuntimeError(f"Recorder.{what} after close(): the run log {self.path} is closed; "
                               "make a new Recorder(..., append=True) to go on with it")

    def step(self, loss=None, skipped=None):
        """Ends an optimizer step: call it after the optimizer step and the scaler's update. `loss`
        (a tensor or number) goes into the step record; `skipped` says whether the optimizer
        step was skipped, for scalers other than GradScaler (whose skips are read from its scale:
        it backs off exactly when it skipped). Collective under torch.distributed on recorded
        steps."""
        self._refuse_if_closed("step()")
        if not self._scaler_looked_for:
            self._refuse_an_undeclared_scaler()
        self._refuse_a_step_before_the_scalers_update()
        if self._recording() and self._pass_names and self._gradient_hooks and not self._backward_seen:
            raise RuntimeError("Recorder.step() came after a forward pass whose backward has not run: call it once "
                               "per optimizer step, after the backward, the optimizer step and the scaler's update")
        self._look()
        scale_after = self._scale_now()
        loss_value = loss.detach().float().reshape(()) if torch.is_tensor(loss) else loss
        readings = None
        if self._values:
            readings = (self._labels,) + self._device_readings()
        self._steps.append([self.step_index, loss_value, self._scale_used, scale_after, skipped, readings])
        try:
            if self._recording():
                self._write_recorded()
            elif self._rank == 0 and not self._distributed and _on_host(self._steps[-1]):
                self._write_held()
        finally:  # a log that could not be written (log_file.append) misses these lines; the next step goes on
            self._scale_used = scale_after
            self.step_index += 1
            self._steps_taken += 1
            if not self._armed():  # the hooks stay from one armed step to the next
                self._disarm()
            self._arm_if_recording()

    def _skipped(self, record):
        """Whether a read-back step record's step skipped its update, and its loss (None where not
        known or not finite)."""
        step, loss, used, after, skipped, readings = record
        if skipped is None:
            skipped = self._scaler_enabled() and float(after) < float(used)
        value = None
        if loss is not None:
            value = float(loss)
            value = value if math.isfinite(value) else None  # JSON has no NaN: null is a loss not known
        return bool(skipped), value

    def _local_culprit(self, record):
        """This rank's culprit of a read-back step record whose step skipped or lost its loss, from
        its own sentinel readings (the device's read back only now); None for a good step."""
        readings = record[5]
        skipped, value = self._skipped(record)
        if readings is None or not (skipped or (record[1] is not None and value is None)):
            return None
        return self._culprit_of(readings)

    def _culprit_of(self, readings):
        """The culprit rule (find_culprit) over a step's sentinel readings, as _device_readings
        keeps them; None where every reading is clean."""
        labels, entries, on_device = readings
        values = on_device.tolist() if on_device is not None else []
        largest = []
        for entry in entries:
            if isinstance(entry, float):
                largest.append(entry)
            elif isinstance(entry, int):  # a largest magnitude
                largest.append(values[entry])
            else:  # (min, max)
                low, high = values[entry[0]], values[entry[1]]
                largest.append(math.nan if math.isnan(low) or math.isnan(high) else max(-low, high))
        # Operations that round into the format (autocast) unless the run is float32 throughout.
        captured = "before_cast" if self._format in ("fp32", "tf32", "fp64") else "as_stored"
        return find_culprit([label + (v,) for label, v in zip(labels, largest) if v != UNREAD], self._format, captured)

    def _culprits(self, records, collective):
        """Each step's culprit among `records` ({step: culprit}). Under torch.distributed and where
        `collective` (a recorded step, which every rank reaches), the ranks' own culprits are
        gathered and the one earliest in execution order is the step's (the lowest rank on a tie),
        with its rank: a NaN one rank's batch made is named there, not in the gradients the ranks
        then share. Otherwise this rank's own."""
        local = {record[0]: self._local_culprit(record) for record in records}
        if not self._distributed:
            return local
        if not collective:
            return {step: dict(culprit, rank=self._rank) if culprit else None for step, culprit in local.items()}
        gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, local)
        chosen = {}
        for rank, culprits in enumerate(gathered):
            for step, culprit in culprits.items():
                if culprit is not None and (chosen.get(step) is None or culprit["position"] < chosen[step]["position"]):
                    chosen[step] = dict(culprit, rank=rank)
        return {step: chosen.get(step) for step in local}

    def _step_line(self, record, tensors=None, culprit=None, culprit_record=None, finished=True):
        """A step's line: `tensors` its records where it was recorded; the culprit's counts from its
        record there (`culprit_record`, or found among `tensors`); `finished` False for a step the
        Recorder closed inside (close())."""
        step, used = record[0], float(record[2])  # waits for the device here, once per recorded step
        skipped, value = self._skipped(record)
        line = {"step": step, "loss": value, "loss_scale": used, "skipped": skipped}
        if not finished:
            line["finished"] = False
        if culprit is not None:
            culprit = dict(culprit)
            if culprit_record is None:
                culprit_record = next((t for t in tensors or [] if t["name"] == culprit["name"] and t["kind"] == culprit["kind"]), None)
            if culprit_record is not None:  # its counts, where the step was recorded
                culprit["nan"], culprit["inf"] = culprit_record["nan"], culprit_record["inf"]
                culprit["overflow"] = culprit_record.get("cast", {}).get("overflow", 0)
            line["culprit"] = culprit
        if tensors is not None:
            line["tensors"] = tensors
        return line

    def _laid_out(self, pending):
        """The step's partial histograms laid out together: (its keys, a (keys, COUNTS) tensor
        whose row k holds keys[k]'s counts, repeated calls summed in one index_add_). No object a
        key: a recorded step has hundreds."""
        keys = list(pending)
        partials = [p for key in keys for p in _listed(pending[key][0])]
        matrix = assemble(partials)
        if len(partials) != len(keys):
            owner = torch.tensor([k for k, key in enumerate(keys) for _ in _listed(pending[key][0])], device=matrix.device)
            matrix = torch.zeros((len(keys), COUNTS), dtype=matrix.dtype, device=matrix.device).index_add_(0, owner, matrix)
        return keys, matrix

    def _write_recorded(self):
        self._settle_format()  # before this step's culprits, which follow the format
        pending = self._pending  # (name, kind) -> [partials, captured, summed over ranks]
        keys, matrix = self._reduce(*self._laid_out(pending), pending)
        blocks = self._reduce_blocks(self._pending_blocks)
        self._pending, self._pending_blocks = {}, {}
        _read_back(self._steps)
        culprits = self._culprits(self._steps, collective=True)
        records, current = self._steps[:-1], self._steps[-1]
        loss_scale = current[2]  # the scale this step's backward used, read back
        self._steps = []
        if self._rank != 0:
            return
        lines = [self._step_line(r, culprit=culprits[r[0]]) for r in records]
        ordered, record_of = self._records_of(keys, matrix, pending, blocks, loss_scale)
        culprit = culprits[current[0]]
        if self._events is not None:  # the TensorBoard writer reads the records: all of them made
            lines.append(self._step_line(current, [record_of(k) for k in range(len(ordered))], culprit))
        else:
            # Each record encoded as it is made and let go: made all at once, their thousands of
            # small objects would be carried by Python's collector into its oldest generation,
            # whose full collections then cost every later step. The text is json.dumps's.
            at = {key: k for k, key in enumerate(ordered)}
            culprit_record = record_of(at[(culprit["name"], culprit["kind"])]) if culprit and (culprit["name"], culprit["kind"]) in at else None
            head = json.dumps(self._step_line(current, None, culprit, culprit_record))
            lines.append(head[:-1] + ', "tensors": [' + ", ".join(json.dumps(record_of(k)) for k in range(len(ordered))) + "]}")
        self._write_lines(lines)

    def _write_held(self):
        """Writes the step records held since the last line, where their values are in host memory
        (_on_host) and no other rank's culprit is to be gathered: a CPU training outside
        torch.distributed. Writing them at once waits on nothing, a log followed live shows every
        step, and a process killed loses no step before the one it was in."""
        _read_back(self._steps)
        culprits = self._culprits(self._steps, collective=False)
        lines = [self._step_line(r, culprit=culprits[r[0]]) for r in self._steps]
        self._steps = []
        self._write_lines(lines)

    @staticmethod
    def _records_of(keys, matrix, pending, blocks, loss_scale):
        """A step's tensor records from its histograms laid out (_laid_out, _reduce): their keys in
        the log's order, and the record of the k-th made when asked. One read-back, in that order,
        into one flat list (where a list per tensor would be hundreds of objects for Python's
        collector to carry), each tensor's counts sliced from it as its record is made."""
        ordered = sorted(keys)
        row = {key: k for k, key in enumerate(keys)}
        flat = matrix[torch.tensor([row[key] for key in ordered], device=matrix.device)].reshape(-1).tolist() if ordered else []

        def record_of(k):
            name, kind = ordered[k]
            record = tensor_record(name, kind, flat[k * COUNTS:(k + 1) * COUNTS], _scale_of(kind, loss_scale), pending[ordered[k]][1])
            if (name, kind) in blocks:
                record["blocks"] = blocks[(name, kind)]
            return record
        return ordered, record_of

    def _unfinished_line(self, culprit):
        """The line of the step the Recorder closes inside (close()): no loss, the scale its backward
        would have used, its culprit, and where the step was being recorded the histograms of the
        tensors it read before it stopped (summed over the micro-batches that ran). Not under
        torch.distributed, whose reduction of them close() (not collective) cannot make."""
        scale = float(self._scale_used)
        record = [self.step_index, None, scale, scale, False, None]
        tensors = None
        if self._recording() and self._pending and not self._distributed:
            ordered, record_of = self._records_of(*self._laid_out(self._pending), self._pending, self._pending_blocks, scale)
            tensors = [record_of(k) for k in range(len(ordered))]
        self._pending, self._pending_blocks = {}, {}
        return self._step_line(record, tensors, culprit, finished=False)

    def _reduce(self, keys, matrix, pending):
        """Under torch.distributed: the ranks agree on one key list (the union of what each saw;
        zeros where a rank did not run a module), then sum, in one all-reduce of the packed counts,
        what each rank holds a part of (activations, their gradients, DTensor shards). Replicated
        tensors (weights, weight gradients after DDP's averaging) are rank 0's. Returns the keys
        and their counts (_laid_out's), with the keys only other ranks saw added to them and to
        `pending`, each with what the lowest rank that saw it captured (as_stored or before_cast)."""
        if not self._distributed:
            return keys, matrix
        gathered = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(gathered, sorted((k, v[1], v[2]) for k, v in pending.items()))
        agreed = {}  # key -> [captured, summed]
        for rank_keys in gathered:
            for key, captured, summed in rank_keys:
                entry = agreed.setdefault(tuple(key), [captured, False])
                entry[1] = entry[1] or summed
        sharded = sorted(k for k, (_, summed) in agreed.items() if summed)
        if sharded:
            device = matrix.device
            if torch.distributed.get_backend() == "nccl" and device.type != "cuda":
                device = torch.device("cuda", torch.cuda.current_device())
            row = {key: k for k, key in enumerate(keys)}
            missing = [k for k in sharded if k not in row]
            for k in missing:
                row[k] = len(row)
                pending[k] = [[], agreed[k][0], True]
            keys = keys + missing
            matrix = torch.cat([matrix.to(device), torch.zeros((len(missing), COUNTS), dtype=matrix.dtype, device=device)])
            index = torch.tensor([row[k] for k in sharded], device=device)
            stacked = matrix.index_select(0, index)
            torch.distributed.all_reduce(stacked)
            matrix = matrix.index_copy(0, index, stacked)
            for k in sharded:
                pending[k][2] = True
        return keys, matrix

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
        """Writes the step records not yet written, removes every hook and lets the log go (its
        lock with it). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        unreadable = unfinished = None
        try:  # before the held tensors are let go; never at the cost of the records below
            unfinished = self._unfinished_step_culprit()
        except Exception as error:
            unreadable = f"fpscope_torch: the readings of step {self.step_index}, which did not reach Recorder.step(), could not be read: {error}"
        # A loop that trained (a backward ran) but never called step(): its log holds no step.
        never_stepped = self._steps_taken == 0 and self._backward_seen and unfinished is None and unreadable is None
        self._disarm()
        self._stop_noting_autocast()
        self._held.drop()
        _read_back(self._steps)
        written = False
        try:
            if self._rank == 0 and self._file is not None:
                # Not collective (a rank may close alone): the steps since the last recorded one,
                # and one that did not finish, carry rank 0's own culprits.
                try:
                    culprits = self._culprits(self._steps, collective=False)
                    lines = [self._step_line(r, culprit=culprits[r[0]]) for r in self._steps]
                    if unfinished is not None:
                        lines.append(self._unfinished_line(unfinished))
                    self._write_lines(lines)
                    written = unfinished is not None
                finally:  # the log and its lock let go even where the last lines could not be written
                    self._let_the_log_go()
        finally:  # said also where the log could not take it
            self._steps = []
            if unreadable is not None:
                warnings.warn(unreadable, RuntimeWarning, stacklevel=2)
            elif unfinished is not None:
                warnings.warn(self._unfinished_text(unfinished, written), RuntimeWarning, stacklevel=2)
            elif never_stepped and self._rank == 0:
                warnings.warn(f"fpscope_torch: {self.path}: the model ran backward passes but Recorder.step() was never "
                              "called, so the log holds no step: call recorder.step(loss) once per optimizer step, after "
                              "the optimizer's step (and the scaler's update)", RuntimeWarning, stacklevel=2)

    def _let_the_log_go(self):
        """Closes the log (its lock with it) and the TensorBoard writer, where open."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._header_to_events()
        if self._events is not None:
            self._events.close()
            self._events = None

    def _unfinished_step_culprit(self):
        """Where the Recorder closes (or the interpreter exits) within a step that ran a forward but
        never reached step() -- a loop that raised on a NaN loss, a backward that raised under
        detect_anomaly -- the culprit its sentinel readings so far name (this rank's, in execution
        order; with the rank under torch.distributed); None where none broke, so that a loop
        stopping cleanly (or an evaluation forward after the last step) leaves nothing."""
        if not self._sentinel or self._micro_batch < 0 or not self._labels:
            return None
        self._look()
        culprit = self._culprit_of((self._labels,) + self._device_readings())
        if culprit is not None and self._distributed:
            culprit["rank"] = self._rank
        return culprit

    def _unfinished_text(self, culprit, written):
        """The warning of a step that did not finish: what broke it, and whether the log holds it."""
        if culprit["fault"] == "overflow":
            what = f"{culprit['largest']:.6g}, past {culprit['format']}'s largest"
        else:
            what = "a NaN" if culprit["fault"] == "nan" else "an infinity"
        where = f" in micro-batch {culprit['micro_batch']}" if culprit.get("micro_batch") is not None else ""
        upstream = culprit.get("upstream")
        before = f"; the largest magnitude before it {upstream['largest']:.6g}, in {upstream['name']} ({upstream['kind']})" if upstream else ""
        logged = (f"{self.path} records it as unfinished" if written else
                  f"{self.path} has no record of it" + (f" (rank {self._rank}'s culprit; rank 0 writes the log)" if self._rank != 0 else ""))
        return (f"fpscope_torch: step {self.step_index} did not reach Recorder.step(), so {logged}: "
                f"the first of its tensors to break was {culprit['name']} ({culprit['kind']}){where}, holding {what}{before}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
