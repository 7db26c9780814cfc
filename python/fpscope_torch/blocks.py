"""What an OCP MX block-scaled format would do to a tensor, counted exactly in torch: the
statistics fpscope's run log keeps under a tensor's "blocks" (the same numbers `fpscope quantize`
and `fpscope train --record-blocks` compute; a test holds them together).

Blocks of `block` consecutive values along the last dimension (a Linear layer's reduction axis
for its input and its weight, and the same axis for their gradients), the last block of a row
shorter when the row does not fill it. Elements round to nearest even and saturate, so what each
one becomes is decided by comparing its scaled value with the element format's thresholds; no
element is materialised. Published constants: OCP Microscaling Formats (MX) v1.0 and OCP 8-bit
Floating Point v1.0.
"""

import torch

# name -> (element emax, element emin, mantissa bits, largest element, largest's mantissa is odd, integer elements)
_MX = {
    "mxfp8-e4m3": (8, -6, 3, 448.0, False, False),
    "mxfp8-e5m2": (15, -14, 2, 57344.0, True, False),
    "mxfp6-e2m3": (2, 0, 3, 7.5, True, False),
    "mxfp6-e3m2": (4, -2, 2, 28.0, True, False),
    "mxfp4": (2, 0, 1, 6.0, True, False),
    "mxint8": (0, 0, 6, 127 / 64, True, True),
}
_ALIASES = {"mxfp8": "mxfp8-e4m3", "mxfp6": "mxfp6-e2m3", "mxfp4-e2m1": "mxfp4"}
RULES = ("floor", "round-up", "rceil", "even")
_RELATIVE_BINS = 277


def parse_blocks(text):
    """"FORMAT" or "FORMAT:RULE" -> (format, rule); ValueError naming the text otherwise."""
    name, _, rule = text.partition(":")
    name = _ALIASES.get(name.lower(), name.lower())
    rule = rule or "floor"
    if name == "nvfp4":
        raise ValueError(f"blocks={text!r}: the bridge records the MX formats; nvfp4 is recorded by fpscope train --record-blocks")
    if name not in _MX:
        raise ValueError(f"blocks={text!r}: unknown block-scaled format; expected one of {', '.join(_MX)}")
    if rule not in RULES:
        raise ValueError(f"blocks={text!r}: unknown scale rule {rule!r}; expected floor, round-up, rceil or even")
    return name, rule


def _floor_log2(x):
    """floor(log2 |x|) of finite nonzero values (float32 or float64), exactly: the exponent field of
    the value as a float64, where every float32, subnormals included, is normal. Bits, not frexp or
    log2, so that every device gives the same answer."""
    return ((x.double().abs().view(torch.int64) >> 52) & 0x7FF) - 1023


def _is_power_of_two(x):
    """Finite nonzero float32 or float64 values whose float64 significand is 1."""
    return (x.double().abs().view(torch.int64) & ((1 << 52) - 1)) == 0


def _pow2(k):
    """2^k as float64 for int64 k in float64's normal range, built from its bits. torch.ldexp and
    pow go through exp2 on CUDA, which is not exact for every k: a scaled value one ulp off breaks
    the ties this module counts (seen on an H100)."""
    return ((k + 1023) << 52).view(torch.float64)


def _shared_exponents(amax, rule, emax, mbits, largest):
    """Each block's X as int64, and a mask of the blocks whose scale is NaN."""
    nan_scale = ~torch.isfinite(amax)
    zero = amax == 0
    safe = torch.where(nan_scale | zero, torch.ones_like(amax), amax)
    e = _floor_log2(safe)
    if rule == "floor":
        x = e - emax
    elif rule == "round-up":
        x = e - emax + (safe.double() / _pow2(e - emax) > largest).to(torch.int64)
    elif rule == "rceil":
        reciprocal = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(largest, dtype=torch.float32)
        q = safe.float() * reciprocal.to(safe.device)  # in float32, as the rule says
        nonzero_q = torch.where(q == 0, torch.ones_like(q), q)
        x = _floor_log2(nonzero_q) + (~_is_power_of_two(nonzero_q)).to(torch.int64)  # ceil(log2 q)
        x = torch.where(q == 0, torch.full_like(x, -127), torch.clamp(x, max=127))
    else:  # even
        quantum = _pow2(e - mbits)
        rounded = torch.round(safe.double() / quantum) * quantum  # torch.round: ties to even
        x = _floor_log2(rounded) - emax
    x = torch.where(zero, torch.full_like(x, -127), torch.clamp(x, min=-127))
    nan_scale = nan_scale | (x > 127)
    return x, nan_scale


def block_statistics(tensor, fmt="mxfp8-e4m3", rule="floor", block=32):
    """The run log's "blocks" record of `tensor` in format `fmt` (an MX name) under scale rule `rule`."""
    fmt, rule = parse_blocks(f"{fmt}:{rule}")
    emax, emin, mbits, largest, largest_odd, integer = _MX[fmt]
    x = tensor.detach().float().reshape(-1, tensor.shape[-1] if tensor.dim() > 0 else 1)
    rows, cols = x.shape
    blocks_per_row = (cols + block - 1) // block
    padded = torch.zeros(rows, blocks_per_row * block, dtype=torch.float32, device=x.device)
    padded[:, :cols] = x
    valid = torch.zeros(rows, blocks_per_row * block, dtype=torch.bool, device=x.device)
    valid[:, :cols] = True
    values = padded.reshape(-1, block)
    valid = valid.reshape(-1, block)
    magnitudes = values.abs()
    amax = magnitudes.amax(dim=1)  # a NaN anywhere makes it NaN
    if torch.isnan(magnitudes).any():
        amax = torch.where(torch.isnan(magnitudes).any(dim=1), torch.full_like(amax, float("nan")), amax)
    x_shared, nan_scale = _shared_exponents(amax, rule, emax, mbits, largest)
    codes = torch.where(nan_scale, torch.full_like(x_shared, 255), x_shared + 127)

    counted = valid & ~nan_scale[:, None]  # the elements of blocks with a number as scale
    y = magnitudes.double() * _pow2(-x_shared)[:, None]
    nonzero = counted & (magnitudes != 0)
    if integer:
        scaled = y * 64
        flushed = nonzero & (scaled <= 0.5)  # ties go to the even 0
        subnormal = torch.zeros_like(flushed)
        saturated = counted & (scaled >= 127.5)  # 127.5 ties to the even 128: beyond 127
    else:
        half_smallest = 2.0 ** (emin - mbits - 1)
        flushed = nonzero & (y <= half_smallest)
        subnormal = nonzero & (y > half_smallest) & (y < 2.0 ** emin - half_smallest)
        threshold = largest + 2.0 ** (emax - mbits - 1)  # half an ulp above the largest
        saturated = counted & ((y > threshold) | ((y == threshold) if largest_odd else torch.zeros_like(counted)))
    zeros = counted & (magnitudes == 0)
    amax_exponent = _floor_log2(torch.where(amax > 0, amax, torch.ones_like(amax)))
    relative = amax_exponent[:, None] - _floor_log2(torch.where(nonzero, magnitudes, torch.ones_like(magnitudes)))
    relative_counts = torch.bincount(relative[nonzero], minlength=_RELATIVE_BINS)
    scale_counts = torch.bincount(codes, minlength=256)
    return {
        "format": fmt, "block": block, "rule": rule,
        "elements": rows * cols, "blocks": int(values.shape[0]), "nan_blocks": int(nan_scale.sum()),
        "zeros": int(zeros.sum()), "flushed_to_zero": int(flushed.sum()), "subnormal": int(subnormal.sum()),
        "saturated": int(saturated.sum()),
        "scales": [[code, count] for code, count in enumerate(scale_counts.tolist()) if count],
        "relative": [[-i, count] for i, count in enumerate(relative_counts.tolist()) if count],
    }


def merge_block_statistics(a, b):
    """Two records of one tensor in one step (a module called twice) as one: counts summed."""
    merged = dict(a)
    for key in ("elements", "blocks", "nan_blocks", "zeros", "flushed_to_zero", "subnormal", "saturated"):
        merged[key] = a[key] + b[key]
    for key in ("scales", "relative"):
        sums = {}
        for value, count in a[key] + b[key]:
            sums[value] = sums.get(value, 0) + count
        merged[key] = [[value, sums[value]] for value in sorted(sums, reverse=(key == "relative"))]
    return merged
