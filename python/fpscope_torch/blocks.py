"""What an OCP MX block-scaled format, or NVFP4, would do to a tensor, counted exactly in torch: the
statistics fpscope's run log keeps under a tensor's "blocks" (the same numbers `fpscope quantize`
and `fpscope train --record-blocks` compute; a test holds them together).

NVFP4 (NVIDIA's FP4: E2M1 elements in blocks of 16, an E4M3 scale per block under a float32 scale
per tensor) follows fpscope's core/block_format.hpp step for step: tensor scale 2688 / amax (448 x
6 over the tensor's largest finite magnitude: a NaN or an infinity makes its own block's scale NaN
and leaves the tensor scale to the rest), block scale (block amax / 6) x tensor scale to E4M3 to
nearest even, saturating, element factor tensor scale / block scale, each in float32.

Blocks of `block` consecutive values along the last dimension (a Linear layer's reduction axis
for its input and its weight, and the same axis for their gradients), the last block of a row
shorter when the row does not fill it. Elements round to nearest even and saturate, so what each
one becomes is decided by comparing its scaled value with the element format's thresholds; no
element is materialised. Published constants: OCP Microscaling Formats (MX) v1.0 and OCP 8-bit
Floating Point v1.0.
"""

import torch

from .histogram import readable

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
        if rule != "floor":
            raise ValueError(f"blocks={text!r}: nvfp4's E4M3 block scale has one rule (nearest even under its tensor scale): name no rule")
        return name, rule
    if name not in _MX:
        raise ValueError(f"blocks={text!r}: unknown block-scaled format; expected one of {', '.join(_MX)} or nvfp4")
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


def _e4m3_code(w):
    """float32 values w >= 0 to E4M3 codes, nearest even, saturating at 448 (code 0x7E): exact
    integer work in float64, no float8 dtype (torch 1.13 has none)."""
    w = w.double()
    e = torch.clamp(_floor_log2(torch.where(w > 0, w, torch.ones_like(w))), min=-6)  # subnormals share 2^-6's quantum
    q = torch.round(w * _pow2(3 - e)).to(torch.int64)  # 8..16 for normals (16: the next binade), 0..8 below
    code = (e + 7) * 8 + q - 8
    return torch.where(w > 0, torch.clamp(code, max=0x7E), torch.zeros_like(code))


def _e4m3_value(code):
    """The float64 value of E4M3 codes 0..0x7E (exact)."""
    field, m = code >> 3, code & 7
    return torch.where(field == 0, m.double() * 2.0 ** -9, (8 + m).double() * _pow2(field - 10))


def _nvfp4_scaled(magnitudes, amax, tensor_amax):
    """Per block: the scale code (E4M3, 0x7F for a block holding a NaN or infinity), and each
    element's |value| times its factor, in float32 as the format computes it."""
    tensor_amax = float(tensor_amax)
    tensor_scale = 1.0
    if tensor_amax > 0 and tensor_amax != float("inf") and tensor_amax == tensor_amax:
        tensor_scale = min(float(torch.tensor(2688.0, dtype=torch.float32) / torch.tensor(tensor_amax, dtype=torch.float32)), 3.4028234663852886e38)
    scale32 = torch.tensor(tensor_scale, dtype=torch.float32, device=magnitudes.device)
    nan_scale = ~torch.isfinite(amax)
    wanted = (torch.where(nan_scale, torch.zeros_like(amax), amax) / 6.0) * scale32  # float32, two roundings in that order
    codes = torch.where(nan_scale, torch.full_like(wanted, 0x7F, dtype=torch.int64), _e4m3_code(wanted))
    block_scale = _e4m3_value(torch.where(nan_scale, torch.zeros_like(codes), codes)).float()
    factor = torch.where(block_scale == 0, torch.zeros_like(block_scale), scale32 / torch.where(block_scale == 0, torch.ones_like(block_scale), block_scale))
    return codes, nan_scale, (magnitudes * factor[:, None]).double()


def block_statistics(tensor, fmt="mxfp8-e4m3", rule="floor", block=None):
    """The run log's "blocks" record of `tensor` in format `fmt` (an MX name under scale rule
    `rule`, or nvfp4); `block`: 32 for MX and 16 for NVFP4 unless given."""
    fmt, rule = parse_blocks(f"{fmt}:{rule}")
    nvfp4 = fmt == "nvfp4"
    block = block or (16 if nvfp4 else 32)
    if nvfp4 and block != 16:
        raise ValueError(f"nvfp4's blocks are 16 elements, not {block}")
    emax, emin, mbits, largest, largest_odd, integer = _MX["mxfp4" if nvfp4 else fmt]
    x = readable(tensor.detach()).float()
    x = x.reshape(-1, x.shape[-1] if x.dim() > 0 else 1)
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
    if nvfp4:
        finite = torch.where(torch.isfinite(magnitudes), magnitudes, torch.zeros_like(magnitudes))
        codes, nan_scale, y = _nvfp4_scaled(magnitudes, amax, finite.amax() if magnitudes.numel() else 0.0)
    else:
        x_shared, nan_scale = _shared_exponents(amax, rule, emax, mbits, largest)
        codes = torch.where(nan_scale, torch.full_like(x_shared, 255), x_shared + 127)
        y = magnitudes.double() * _pow2(-x_shared)[:, None]

    counted = valid & ~nan_scale[:, None]  # the elements of blocks with a number as scale
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
