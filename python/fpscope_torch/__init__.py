"""fpscope_torch: record exponent histograms from a real PyTorch training into an fpscope run log.

    recorder = fpscope_torch.Recorder(model, "run.jsonl", every=10, scaler=scaler)
    for x, y in data:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        recorder.step(loss)
        optimizer.zero_grad()
    recorder.close()

Every step gets a step record (loss, the loss scale its backward used, whether it was skipped);
every `every` steps the histograms of each recorded module's outputs (activations) and their
gradients, and of every parameter and its gradient, read during the backward pass so that
gradients carry the scale the backward used -- each tensor record says which (`scale`), and
whether its values were already in fp16/bf16 (`captured`: as_stored) or float32 (before_cast).
fpscope divides the recorded scale out before it analyses anything. See recorder.py.
"""

try:
    import torch  # noqa: F401
except ImportError:
    raise ImportError("fpscope_torch records from PyTorch trainings and needs torch (Debian's python3-torch, "
                      "or pip install torch): it is not installed in this Python") from None

from .histogram import MAX_BINADE, MIN_BINADE, exponent_histogram, tensor_record
from .recorder import Recorder

__all__ = ["Recorder", "exponent_histogram", "tensor_record", "MIN_BINADE", "MAX_BINADE"]
