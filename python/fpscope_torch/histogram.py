"""Exponent histograms of tensors on their own device: one bincount over the float32 exponent field."""

import torch

MIN_BINADE = -149  # smallest float32 subnormal, 2^-149
MAX_BINADE = 127
SLOTS = MAX_BINADE - MIN_BINADE + 1  # 277 binades, then zero, inf, nan
ZERO, INF, NAN = SLOTS, SLOTS + 1, SLOTS + 2
COUNTS = SLOTS + 3


def exponent_histogram(tensor):
    """Counts of |x| per binade floor(log2|x|), -149..127, then zeros, infinities and NaNs: a
    length-280 int64 tensor on the tensor's device. Other dtypes are rounded to float32 first, the
    histogram's range: float64 values beyond it count as infinities or zeros, as float32 holds them.

    One bincount over the 8-bit exponent field does the normal numbers (a normal binade is the
    field - 127) and count_nonzero the zeros; only where subnormals, infinities or NaNs are there
    (rare) are they taken apart, from a masked copy of just them."""
    x = tensor.detach().reshape(-1)
    if x.dtype != torch.float32:
        x = x.float()
    bits = x.view(torch.int32)
    field = (bits >> 23).to(torch.uint8)  # the low 8 bits: the sign falls off
    by_field = torch.bincount(field, minlength=256)
    counts = torch.zeros(COUNTS, dtype=torch.int64, device=x.device)
    counts[1 - 127 - MIN_BINADE:255 - 127 - MIN_BINADE] = by_field[1:255]  # field f: binade f - 127
    # Field 0 holds the zeros and the subnormals, field 255 the infinities and NaNs: each is looked
    # at only when there is something in it (weights and most gradients have neither).
    in_field_0 = int(by_field[0])
    zeros = x.numel() - int(torch.count_nonzero(x)) if in_field_0 > 0 else 0  # -0.0 is zero too; NaN is not
    counts[ZERO] = zeros
    if in_field_0 - zeros + int(by_field[255]) > 0:
        magnitude = bits & 0x7FFFFFFF
        picked = magnitude[((field == 0) & (magnitude != 0)) | (field == 255)]
        mantissa = picked & 0x7FFFFF
        # A subnormal's binade is -149 + the mantissa's top bit: the exponent of the mantissa
        # converted to float32, which holds every integer below 2^24 exactly.
        top_bit = (mantissa.float().view(torch.int32) >> 23) - 127
        infinity_or_nan = torch.where(mantissa == 0, torch.full_like(top_bit, INF), torch.full_like(top_bit, NAN))
        slot = torch.where((picked >> 23) == 0, top_bit, infinity_or_nan)
        counts += torch.bincount(slot.long(), minlength=COUNTS)
    return counts


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
