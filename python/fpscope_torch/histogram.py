"""Exponent histograms of tensors on their own device: one bincount over float32 exponent bits."""

import torch

MIN_BINADE = -149  # smallest float32 subnormal, 2^-149
MAX_BINADE = 127
SLOTS = MAX_BINADE - MIN_BINADE + 1  # 277 binades, then zero, inf, nan
ZERO, INF, NAN = SLOTS, SLOTS + 1, SLOTS + 2
COUNTS = SLOTS + 3


def exponent_histogram(tensor):
    """Counts of |x| per binade floor(log2|x|), -149..127, then zeros, infinities and NaNs: a
    length-280 int64 tensor on the tensor's device, from one bincount over the float32 bit
    patterns (no masked copies). Other dtypes are rounded to float32 first, the histogram's range:
    float64 values beyond it count as infinities or zeros, as float32 would hold them."""
    x = tensor.detach().reshape(-1)
    if x.dtype != torch.float32:
        x = x.float()
    bits = x.view(torch.int32)
    field = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    # Normal: floor(log2|x|) is the unbiased exponent. Subnormal: -149 + the mantissa's top bit,
    # taken in float64, exact for every mantissa below 2^23 (float32 would round 2^23-1 up to 2^23).
    slot = field.long() - 127 - MIN_BINADE
    top_bit = torch.floor(torch.log2(mantissa.clamp(min=1).double())).long()
    slot = torch.where(field == 0, torch.where(mantissa == 0, torch.full_like(slot, ZERO), top_bit), slot)
    slot = torch.where(field == 255, torch.where(mantissa == 0, torch.full_like(slot, INF), torch.full_like(slot, NAN)), slot)
    return torch.bincount(slot, minlength=COUNTS)


def tensor_record(name, kind, counts, scale=1.0, captured="before_cast"):
    """A run-log tensor record (schema 2) from a histogram's counts."""
    counts = counts.tolist() if torch.is_tensor(counts) else list(counts)
    bins = [[MIN_BINADE + i, c] for i, c in enumerate(counts[:SLOTS]) if c]
    return {"name": name, "kind": kind, "bins": bins, "zero": counts[ZERO], "inf": counts[INF], "nan": counts[NAN],
            "scale": float(scale), "captured": captured}


def captured_of(tensor):
    """as_stored for values already held in a 16-bit float format (what a cast flushed is among
    the zeros); before_cast for float32 and wider, which a cast will still round."""
    return "as_stored" if tensor.dtype in (torch.float16, torch.bfloat16) else "before_cast"
