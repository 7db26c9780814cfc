"""fpscope for Lightning: a Callback that records the run log.

    from fpscope_torch.lightning import FpscopeCallback
    trainer = lightning.Trainer(precision="16-mixed", callbacks=[FpscopeCallback("run.jsonl", every=10)])

The callback finds what a Recorder needs: the LightningModule, the precision plugin's loss scaler
(under "16-mixed"), the precision, each step's loss (the sum over its batches of the loss Lightning
hands on_train_batch_end, already divided by accumulate_grad_batches: the step's mean) and the optimizer steps among the batches (accumulate_grad_batches gives
one record per optimizer step)."""

import torch

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from .recorder import Recorder


class FpscopeCallback(Callback):
    """Records a Lightning fit into the run log at `path`; `recorder_arguments` go to Recorder."""

    def __init__(self, path, every=1, **recorder_arguments):
        self.path = path
        self.every = every
        self.recorder_arguments = recorder_arguments
        self.recorder = None
        self._losses = []
        self._optimizer_steps = 0

    def on_train_start(self, trainer, pl_module):
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        precision = str(getattr(trainer, "precision", ""))
        # The format from the precision's name where it names one ("bf16-mixed", "16-true", "32-true"),
        # else from what the module's activations are in ("64-true", "transformer-engine").
        arguments = {"precision": precision, "scaler": scaler if scaler is not None else False}
        arguments.update(self.recorder_arguments)
        if trainer.global_step > 0:
            arguments.setdefault("append", True)
            arguments.setdefault("global_step", trainer.global_step)
        self._optimizer_steps = trainer.global_step
        self.recorder = Recorder(pl_module, self.path, every=self.every, **arguments)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.recorder is not None:
            self.recorder.micro_batch()  # training_step calls the module's parts, not the module

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.recorder is None:
            return
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if torch.is_tensor(loss) and loss.numel() == 1:
            self._losses.append(loss.detach().float().reshape(()))
        if trainer.global_step == self._optimizer_steps:
            return  # accumulating: the optimizer has not stepped yet
        self._optimizer_steps = trainer.global_step
        loss = torch.stack(self._losses).sum() if self._losses else None
        self._losses = []
        self.recorder.step(loss)

    def on_train_end(self, trainer, pl_module):
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    def on_exception(self, trainer, pl_module, exception):
        self.on_train_end(trainer, pl_module)
