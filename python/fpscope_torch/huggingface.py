"""fpscope for HuggingFace's Trainer: a TrainerCallback that records the run log.

    from fpscope_torch.huggingface import FpscopeCallback
    trainer = Trainer(model=model, args=args, train_dataset=data,
                      callbacks=[FpscopeCallback("run.jsonl", every=10)])

The callback finds what a Recorder needs for the user: the model, the loss scaler (Accelerate's
GradScaler, behind the prepared optimizer, under fp16=True), the precision the arguments ask for,
each step's loss (as the Trainer logs it: the sum of the micro-batches' losses where the Trainer
has the model normalise each by the whole step's token count, `num_items_in_batch`, else their
mean), and the step to go on from when training resumes from a checkpoint. Gradient
accumulation and gradient checkpointing give one record per optimizer step."""

import torch
from transformers import TrainerCallback

from .recorder import Recorder, _compiling


def _precision(args):
    """The Trainer's mixed precision, None without one: the Recorder then reads the format from the
    model's activations (a model loaded in bf16 trains in bf16 without `bf16=True`)."""
    if getattr(args, "fp16", False):
        return "fp16 autocast"
    if getattr(args, "bf16", False):
        return "bf16 autocast"
    return None


class FpscopeCallback(TrainerCallback):
    """Records the Trainer's training into the run log at `path`; `recorder_arguments` go to
    Recorder (every=, include=, kinds=, blocks=, tensorboard=, overwrite=, ...)."""

    def __init__(self, path, every=1, **recorder_arguments):
        self.path = path
        self.every = every
        self.recorder_arguments = recorder_arguments
        self.recorder = None
        self._losses = []
        self._normalised_by_step = False
        self._loss_hook = None

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        scaler = getattr(optimizer, "scaler", None)  # Accelerate's AcceleratedOptimizer holds the GradScaler
        arguments = {"precision": _precision(args), "scaler": scaler if scaler is not None else False}
        arguments.update(self.recorder_arguments)
        if state.global_step > 0:  # resumed from a checkpoint: the log goes on at the Trainer's step
            arguments.setdefault("append", True)
            arguments.setdefault("global_step", state.global_step)
        self.recorder = Recorder(model, self.path, every=self.every, **arguments)
        self._loss_hook = self.recorder._root.register_forward_hook(self._take_loss, with_kwargs=True)

    def _take_loss(self, module, inputs, keywords, output):
        if _compiling() or not torch.is_grad_enabled() or not module.training:
            return
        self._normalised_by_step = keywords.get("num_items_in_batch") is not None
        loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
        if torch.is_tensor(loss) and loss.numel() == 1:
            self._losses.append(loss.detach().float().reshape(()))

    def on_step_end(self, args, state, control, **kwargs):
        if self.recorder is None:
            return
        loss = None
        if self._losses:
            losses = torch.stack(self._losses)
            loss = losses.sum() if self._normalised_by_step else losses.mean()
        self._losses = []
        self.recorder.step(loss)

    def on_train_end(self, args, state, control, **kwargs):
        if self._loss_hook is not None:
            self._loss_hook.remove()
            self._loss_hook = None
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
