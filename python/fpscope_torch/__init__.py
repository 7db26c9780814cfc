"""fpscope_torch: record exponent histograms from a real PyTorch training into an fpscope run log.

    recorder = fpscope_torch.Recorder(model, "run.jsonl", every=10, scaler=scaler)
    for batch in data:
        with torch.autocast(...):
            loss = loss_fn(model(batch.x), batch.y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        recorder.step(loss)          # before optimizer.zero_grad(): the gradients are read here
        optimizer.zero_grad()
    recorder.close()

Per leaf module it records activations (forward outputs) and activation gradients (gradients of
those outputs, from full backward hooks); per parameter, weights and weight gradients. Histograms
are computed on the tensors' own device with torch ops: only 280 counts per tensor reach the host.
Histograms are of the tensors as PyTorch holds them: under a GradScaler the gradients include the
loss scale, which each snapshot's `loss_scale` records.

Under torch.distributed every rank must call step() (it is collective). Activations and activation
gradients, which each rank computes on its own shard, are summed across ranks with all_reduce;
weights and weight gradients are replicated (DDP averages gradients), so rank 0's are written.
Rank 0 writes the log.
"""

import json
import math
import os

import torch

__all__ = ["Recorder", "exponent_histogram", "MIN_BINADE", "MAX_BINADE"]

MIN_BINADE = -149  # smallest float32 subnormal, 2^-149
MAX_BINADE = 127
_SLOTS = MAX_BINADE - MIN_BINADE + 1  # 277 binades, then zero, inf, nan
_ZERO, _INF, _NAN = _SLOTS, _SLOTS + 1, _SLOTS + 2


def exponent_histogram(tensor):
    """Counts of |x| per binade floor(log2|x|), -149..127, then zeros, infinities and NaNs: a
    length-280 int64 tensor on the tensor's device. Values are taken as float32 (the histogram's
    range); float64 magnitudes beyond it count in the end bins."""
    x = tensor.detach().reshape(-1)
    if x.dtype != torch.float32:
        x = x.float()
    counts = torch.zeros(_SLOTS + 3, dtype=torch.int64, device=x.device)
    nan = torch.isnan(x)
    inf = torch.isinf(x)
    magnitude = x.abs()
    zero = magnitude == 0
    counts[_NAN] = nan.sum()
    counts[_INF] = inf.sum()
    counts[_ZERO] = zero.sum()
    finite_nonzero = magnitude[~(nan | inf | zero)]
    if finite_nonzero.numel() > 0:
        _, exponent = torch.frexp(finite_nonzero)  # |x| = m * 2^e with m in [0.5, 1)
        binade = (exponent.to(torch.int64) - 1).clamp(MIN_BINADE, MAX_BINADE) - MIN_BINADE
        counts[:_SLOTS] += torch.bincount(binade, minlength=_SLOTS)
    return counts


def _tensor_record(name, kind, counts):
    counts = counts.tolist()
    bins = [[MIN_BINADE + i, c] for i, c in enumerate(counts[:_SLOTS]) if c]
    return {"name": name, "kind": kind, "bins": bins, "zero": counts[_ZERO], "inf": counts[_INF], "nan": counts[_NAN]}


class Recorder:
    """Hooks a model and appends one snapshot line to `path` every `every` steps."""

    def __init__(self, model, path, every=1, scaler=None, model_name=None, precision=None, fmt="fp16",
                 kinds=("activation", "activation_gradient", "weight", "weight_gradient")):
        if every < 1:
            raise ValueError(f"every must be at least 1, not {every}")
        self.model = model
        self.path = os.fspath(path)
        self.every = every
        self.scaler = scaler
        self.kinds = set(kinds)
        self.step_index = 0
        self._pending = {}  # (name, kind) -> counts, for the step being recorded
        self._hooks = []
        self._distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        self._rank = torch.distributed.get_rank() if self._distributed else 0
        self._file = None
        self._scale = None  # the scaler's scale after the previous step
        self._skipped = False
        for name, module in model.named_modules():
            if any(True for _ in module.children()):
                continue  # leaf modules only: their outputs are the layer activations
            label = name or type(module).__name__
            self._hooks.append(module.register_forward_hook(self._forward_hook(label)))
            self._hooks.append(module.register_full_backward_hook(self._backward_hook(label)))
        if self._rank == 0:
            header = {"fpscope_run_log": True, "schema_version": 1, "source": "fpscope_torch",
                      "model": model_name or type(model).__name__, "precision": precision or "",
                      "format": fmt, "rounding": "rne",
                      "scaler": "dynamic" if scaler is not None and scaler.is_enabled() else "none"}
            tmp = self.path + f".tmp-{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(json.dumps(header) + "\n")
            os.replace(tmp, self.path)  # atomically: a follower sees no half-written header
            self._file = open(self.path, "a")

    def _recording(self):
        return self.step_index % self.every == 0

    def _add(self, name, kind, tensor):
        if kind not in self.kinds or not torch.is_tensor(tensor) or not tensor.is_floating_point():
            return
        counts = exponent_histogram(tensor)
        key = (name, kind)
        self._pending[key] = self._pending[key] + counts if key in self._pending else counts

    def _forward_hook(self, name):
        def hook(module, inputs, output):
            if self._recording():
                self._add(name, "activation", output if torch.is_tensor(output) else None)
        return hook

    def _backward_hook(self, name):
        def hook(module, grad_input, grad_output):
            if self._recording() and grad_output and grad_output[0] is not None:
                self._add(name, "activation_gradient", grad_output[0])
        return hook

    def step(self, loss=None):
        """Ends a training step: records weights and gradients (call before zero_grad) and, on a
        recording step, writes the snapshot. Collective under torch.distributed."""
        if self.scaler is not None and self.scaler.is_enabled():
            # GradScaler halves the scale exactly when update() found inf/NaN and skipped the step.
            scale = float(self.scaler.get_scale())
            self._skipped = self._scale is not None and scale < self._scale
            self._scale = scale
        if self._recording():
            for name, parameter in self.model.named_parameters():
                self._add(name, "weight", parameter)
                if parameter.grad is not None:
                    self._add(name, "weight_gradient", parameter.grad)
            self._write(loss)
        self._pending = {}
        self.step_index += 1

    @staticmethod
    def _finite_or_none(loss):
        """The loss as the run log holds it: a number, or null when it is not given or not finite
        (JSON has no NaN; fpscope reads null as a loss not known)."""
        if loss is None:
            return None
        value = float(loss.detach()) if torch.is_tensor(loss) else float(loss)
        return value if math.isfinite(value) else None

    def _write(self, loss):
        keys = sorted(self._pending)
        if self._distributed:
            sharded = [k for k in keys if k[1] in ("activation", "activation_gradient")]
            if sharded:
                stacked = torch.stack([self._pending[k] for k in sharded])
                torch.distributed.all_reduce(stacked)
                for k, counts in zip(sharded, stacked):
                    self._pending[k] = counts
        if self._rank != 0:
            return
        scale = self._scale if self._scale is not None else 1.0
        skipped = self._skipped
        snapshot = {"step": self.step_index,
                    "loss": self._finite_or_none(loss),
                    "loss_scale": scale, "skipped": skipped,
                    "tensors": [_tensor_record(name, kind, self._pending[(name, kind)]) for name, kind in keys]}
        self._file.write(json.dumps(snapshot) + "\n")
        self._file.flush()

    def close(self):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
