"""Exponent histograms of tensors on their own device: on the CPU one pass in C (exponent_counts.c,
or PyTorch's ops without a C compiler), on an accelerator one Triton kernel (or PyTorch's ops).

A recorded step histograms every activation and gradient of the model, a few hundred tensors, so
the work per tensor is kept to what must touch the data and everything small -- laying out the 280 slots, summing repeated
calls, reading counts back -- is done once per step for all tensors together (`assemble`)."""

import threading
from itertools import compress

import torch

from . import exponent_counts

MIN_BINADE = -149  # smallest float32 subnormal, 2^-149
MAX_BINADE = 127
SLOTS = MAX_BINADE - MIN_BINADE + 1  # 277 binades, then zero, inf, nan
ZERO, INF, NAN = SLOTS, SLOTS + 1, SLOTS + 2
COUNTS = SLOTS + 3
_FIRST_NORMAL_SLOT = 1 - 127 - MIN_BINADE  # exponent field f is binade f - 127
_EXACT_FLOAT_SUM = 2 ** 24  # a float32 sum of at most 2^24 ones is exact in any order


class Partial:
    """One tensor's histogram before it is laid out: counts per 8-bit exponent field (a tensor on
    the tensor's device), the number of zeros, and the counts of the rare values (subnormals,
    infinities, NaNs) as a COUNTS-long tensor where there were any."""

    __slots__ = ("by_field", "zeros", "rare")

    def __init__(self, by_field, zeros, rare):
        self.by_field, self.zeros, self.rare = by_field, zeros, rare


class _Scratch(threading.local):
    """Reused buffers for the temporaries of a CPU tensor's histogram (one set per thread: hooks
    may run on autograd's threads). A fresh temporary of a few MB costs more in page faults than the
    pass that fills it (a shift over 2M values: 1.5 ms into new memory, 0.4 ms into a reused
    buffer), so the shifted fields, their bytes and |x| go into buffers that grow to the largest
    tensor seen, up to _SCRATCH_LIMIT elements; larger tensors use fresh memory."""

    def __init__(self):
        self.shifted = torch.empty(0, dtype=torch.int32)
        self.fields = torch.empty(0, dtype=torch.uint8)
        self.magnitudes = torch.empty(0, dtype=torch.float32)

    def take(self, n):
        if n > _SCRATCH_LIMIT:
            return (torch.empty(n, dtype=torch.int32), torch.empty(n, dtype=torch.uint8), torch.empty(n, dtype=torch.float32))
        if self.shifted.numel() < n:
            self.shifted = torch.empty(n, dtype=torch.int32)
            self.fields = torch.empty(n, dtype=torch.uint8)
            self.magnitudes = torch.empty(n, dtype=torch.float32)
        return self.shifted[:n], self.fields[:n], self.magnitudes[:n]


_SCRATCH_LIMIT = 1 << 24  # 16M elements: at most 144 MB of buffers a thread
_scratch = _Scratch()


def _nonzero_count(x, magnitudes=None):
    """Elements of x (no NaN among them) that are not +-0. sign(|x|) is 1 or 0 (a subnormal's
    sign is 1), and a float32 sum of up to 2^24 ones is exact: a fast pass for the usual sizes;
    larger tensors take the integer path. `magnitudes`: a float32 buffer of x's size for |x|."""
    if x.numel() <= _EXACT_FLOAT_SUM:
        return int((torch.abs(x, out=magnitudes) if magnitudes is not None else x.abs()).sign_().sum())
    return int(torch.count_nonzero(x))


class DevicePartial:
    """A histogram made on an accelerator without reading anything back: `by_slot`, a float64
    tensor of _DEVICE_BINS counts (zeros, the 277 binades, then infinities and NaNs together) and
    `nans`, a 0-dim count of the NaNs among them. float64 counts are exact to 2^53."""

    __slots__ = ("by_slot", "nans")

    def __init__(self, by_slot, nans):
        self.by_slot, self.nans = by_slot, nans


_DEVICE_BINS = SLOTS + 2
_DEVICE_CHUNK = 1 << 24  # elements per pass: bounds the float64 temporaries to 2 x 128 MB


def _device_partial(x):
    """x (float32, flat) on an accelerator: every float32, subnormals included, is a normal float64,
    so the float64 exponent field of |x| is 1023 + its binade (0 for a zero, 2047 for an infinity
    or a NaN); shifted to 0 (zero), 1..277 (the binades) and 278 (infinity or NaN), one histc
    counts it. No .item(), no bincount (which reads its input's range back): the step's
    histograms come back to the host together, once (Recorder)."""
    by_slot, nans = None, None
    for start in range(0, max(x.numel(), 1), _DEVICE_CHUNK):
        chunk = x[start:start + _DEVICE_CHUNK]
        field = chunk.double().view(torch.int64)
        field = (field >> 52).bitwise_and_(0x7FF).sub_(1023 + MIN_BINADE - 1).clamp_(0, _DEVICE_BINS - 1)
        # Bin edges at half-integers: each slot sits mid-bin, so however histc computes a bin
        # ((v - min) / width or (v - min) * bins / range: torch 1.13 on the CPU puts 38 in bin 37
        # with edges at the integers) it lands in its own.
        h = torch.histc(field.double(), bins=_DEVICE_BINS, min=-0.5, max=_DEVICE_BINS - 0.5)
        n = torch.isnan(chunk).sum()
        by_slot, nans = (h, n) if by_slot is None else (by_slot + h, nans + n)
    return DevicePartial(by_slot, nans)


# A histogram already laid out is its counts themselves: an int64 tensor on the tensor's device
# whose first COUNTS entries are the counts (the C pass's, the Triton kernel's row). No wrapper: a
# recorded step holds hundreds, each an object more for Python's collector to carry.


def dense_view(x):
    """A contiguous tensor over x's own storage holding just x's elements, in the order the storage
    holds them: x itself where contiguous, the permutation of its dimensions that is contiguous
    where its layout is only permuted (a transposed or batch-second output), None where x
    overlaps or has gaps. What ignores the order (a histogram, a largest magnitude) reads x in
    place through it."""
    if x.is_contiguous():
        return x
    permuted = x.permute(sorted(range(x.dim()), key=x.stride, reverse=True))
    return permuted if permuted.is_contiguous() else None


# What torch's reductions (aminmax, _foreach_norm) and this module's passes read as they are.
_READ_AS_STORED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_FLOAT4_PAIRS = getattr(torch, "float4_e2m1fn_x2", None)  # torch >= 2.8: two E2M1 values a byte


def _e2m1_values(device):
    """The 16 E2M1 codes' values, code c at [c]: sign bit 3, exponent field bits 2-1 (bias 1),
    mantissa bit 0; field 0 is subnormal, m x 2^-1 (OCP Microscaling Formats v1.0, FP4 E2M1)."""
    def magnitude(code):
        field, mantissa = code >> 1, code & 1
        return mantissa * 0.5 if field == 0 else (1 + mantissa / 2) * 2.0 ** (field - 1)
    return torch.tensor([(-1.0 if code & 8 else 1.0) * magnitude(code & 7) for code in range(16)], device=device)


def readable(x):
    """x's values in a dtype that torch's reductions and this module's passes read: float16,
    bfloat16, float32 and float64 as they are; the other float formats torch stores (float8 E4M3,
    E5M2 and their FNUZ variants, E8M0), which its reductions refuse, widened to float32, which
    holds each of their values exactly; float4_e2m1fn_x2, which torch cannot even widen, unpacked
    into float32, each byte's two values side by side along the last dimension, which doubles
    (the first in the low four bits, as torch's Float4_e2m1fn_x2.h lays them out)."""
    if x.dtype in _READ_AS_STORED:
        return x
    if x.dtype == _FLOAT4_PAIRS:
        codes = x.view(torch.uint8).long() if x.dim() > 0 else x.reshape(1).view(torch.uint8).long()
        values = _e2m1_values(x.device)
        return torch.stack([values[codes & 0xF], values[codes >> 4]], dim=-1).flatten(-2)
    return x.float()


def contiguous_values(x):
    """x's elements in a contiguous tensor: dense_view's, else a contiguous copy."""
    view = dense_view(x)
    return view if view is not None else x.contiguous()


def _accelerator_partial(tensor):
    """A tensor on an accelerator: the Triton kernel where it runs (one pass over the tensor in its
    own dtype, a few microseconds of Python around one launch), else PyTorch's ops
    (_device_partial)."""
    x = readable(tensor.detach())
    if x.dtype not in _TRITON_DTYPES:
        x = x.float()
    x = contiguous_values(x)
    if _triton is None:
        _load_triton()
    if _triton.available(x.device):
        counts = _triton.device_counts(x)
        if counts is not None:
            return counts
    return _device_partial(x.reshape(-1).float())


_TRITON_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_triton = None


def _load_triton():
    global _triton
    from . import histogram_triton
    _triton = histogram_triton


def stored_values(x):
    """A sparse tensor's stored values (a COO tensor's coalesced: entries at one index summed, as
    its dense form holds them) and the number of zeros it holds without storing them (an
    embedding's sparse gradient: the rows no index touched); any other tensor: itself and 0."""
    if x.layout == torch.strided:
        return x, 0
    if x.layout == torch.sparse_coo:
        x = x.coalesce()
    values = x.values()
    return values, x.numel() - values.numel()


def _with_zeros(partial, zeros):
    """`partial` (any of partial_histogram's kinds) with `zeros` more zeros, left as it was."""
    if zeros == 0:
        return partial
    if isinstance(partial, Partial):
        return Partial(partial.by_field, partial.zeros + zeros, partial.rare)
    if isinstance(partial, DevicePartial):
        by_slot = partial.by_slot.clone()
        by_slot[0] += zeros  # slot 0: the zeros (_device_partial)
        return DevicePartial(by_slot, partial.nans)
    counts = partial.clone()
    counts[ZERO] += zeros
    return counts


def partial_histogram(tensor):
    """The work on the data for one tensor (see exponent_histogram); lay it out with assemble."""
    if tensor.layout != torch.strided:
        values, unstored = stored_values(tensor.detach())
        return _with_zeros(partial_histogram(values), unstored)
    if tensor.device.type != "cpu":
        return _accelerator_partial(tensor)
    x = contiguous_values(readable(tensor.detach()))
    if x.dtype not in _HOST_DTYPES:
        x = x.float()
    counts = exponent_counts.counts_of(x, COUNTS)  # one pass in C, where it was compiled
    if counts is not None:
        return counts
    return torch_partial(x.reshape(-1))


_HOST_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _batched_on(device):
    """Whether tensors on `device` are histogrammed many to a launch (partial_histograms): on an
    accelerator where the Triton kernel runs."""
    if device.type == "cpu":
        return False
    if _triton is None:
        _load_triton()
    return _triton.available(device)


def partial_histograms(tensors):
    """partial_histogram of each tensor, in its order: on an accelerator those of one device and
    dtype in one Triton launch (histogram_triton.device_counts_many), where one launch each would
    cost each tensor a launch's Python; elsewhere one at a time."""
    partials = [None] * len(tensors)
    groups = {}
    for i, tensor in enumerate(tensors):
        if tensor.layout == torch.strided and _batched_on(tensor.device):
            x = readable(tensor.detach())
            if x.dtype not in _TRITON_DTYPES:
                x = x.float()
            groups.setdefault((x.device, x.dtype), []).append((i, contiguous_values(x)))
        else:
            partials[i] = partial_histogram(tensor)
    if groups and _triton is None:
        _load_triton()
    for members in groups.values():
        rows = _triton.device_counts_many([x for _, x in members])
        for k, (i, x) in enumerate(members):
            partials[i] = rows[k] if rows is not None else partial_histogram(x)
    return partials


def torch_partial(x):
    """PyTorch's ops over a flat CPU tensor, the path without a C compiler (exponent_counts.py): one
    shift, one bincount over the 8-bit field, a zero count only where field 0 holds values, and
    the rare values taken apart from a masked copy of just them."""
    n = x.numel()
    shifted, field, magnitudes = _scratch.take(n)
    if x.dtype == torch.bfloat16:
        # bfloat16 is float32's upper half: its exponent field is float32's, read from 16 bits
        # without a conversion; float32 is made only if the rare values below need it.
        shifted16 = shifted.view(torch.int16)[:n]
        torch.bitwise_right_shift(x.view(torch.int16), 7, out=shifted16)
        field.copy_(shifted16)  # the low 8 bits: the sign falls off
    else:
        if x.dtype != torch.float32:
            x = x.float()
        torch.bitwise_right_shift(x.view(torch.int32), 23, out=shifted)
        field.copy_(shifted)  # the low 8 bits: the sign falls off
    by_field = torch.bincount(field, minlength=256)
    # Field 0 holds the zeros and the subnormals, field 255 the infinities and NaNs: each is looked
    # at only when there is something in it (weights and most gradients have neither).
    in_field_0, in_field_255 = by_field[::255].tolist()
    if in_field_0 == 0 and in_field_255 == 0:
        return Partial(by_field, 0, None)
    if x.dtype != torch.float32:
        x = x.float()
    bits = x.view(torch.int32)
    zeros = 0
    if in_field_0 > 0:
        zeros = n - (_nonzero_count(x, magnitudes) if in_field_255 == 0 else int(torch.count_nonzero(x)))  # -0.0 is zero; NaN is not
    rare = None
    if in_field_0 - zeros + in_field_255 > 0:
        magnitude = bits & 0x7FFFFFFF
        picked = magnitude[((field == 0) & (magnitude != 0)) | (field == 255)]
        mantissa = picked & 0x7FFFFF
        # A subnormal's binade is -149 + the mantissa's top bit: the exponent of the mantissa
        # converted to float32, which holds every integer below 2^24 exactly.
        top_bit = (mantissa.float().view(torch.int32) >> 23) - 127
        infinity_or_nan = torch.where(mantissa == 0, torch.full_like(top_bit, INF), torch.full_like(top_bit, NAN))
        slot = torch.where((picked >> 23) == 0, top_bit, infinity_or_nan)
        rare = torch.bincount(slot.long(), minlength=COUNTS)
    return Partial(by_field, zeros, rare)


def assemble(partials):
    """The histograms of many tensors as one (len(partials), COUNTS) int64 tensor, in a handful of
    operations whatever their number, on the first partial's device."""
    if not partials:
        return torch.zeros((0, COUNTS), dtype=torch.int64)
    on_host = [i for i, p in enumerate(partials) if isinstance(p, Partial)]
    on_device = [i for i, p in enumerate(partials) if isinstance(p, DevicePartial)]
    laid_out = [i for i, p in enumerate(partials) if torch.is_tensor(p)]
    first = partials[0]
    device = first.device if torch.is_tensor(first) else {Partial: lambda p: p.by_field, DevicePartial: lambda p: p.by_slot}[type(first)](first).device
    counts = torch.zeros((len(partials), COUNTS), dtype=torch.int64, device=device)
    if on_host:
        host = [partials[i] for i in on_host]
        rows = torch.zeros((len(host), COUNTS), dtype=torch.int64, device=device)
        fields = torch.stack([p.by_field.to(device) for p in host])
        rows[:, _FIRST_NORMAL_SLOT:_FIRST_NORMAL_SLOT + 254] = fields[:, 1:255]
        rows[:, ZERO] = torch.tensor([p.zeros for p in host], dtype=torch.int64, device=device)
        rare = [(i, p.rare) for i, p in enumerate(host) if p.rare is not None]
        if rare:
            rows[[i for i, _ in rare]] += torch.stack([r.to(device) for _, r in rare])
        counts[on_host] = rows
    if on_device:
        by_slot = torch.stack([partials[i].by_slot.to(device) for i in on_device]).to(torch.int64)
        nans = torch.stack([partials[i].nans.to(device) for i in on_device]).to(torch.int64)
        rows = torch.empty((len(on_device), COUNTS), dtype=torch.int64, device=device)
        rows[:, :SLOTS] = by_slot[:, 1:SLOTS + 1]
        rows[:, ZERO] = by_slot[:, 0]
        rows[:, INF] = by_slot[:, SLOTS + 1] - nans
        rows[:, NAN] = nans
        counts[on_device] = rows
    if laid_out:
        counts[laid_out] = torch.stack([partials[i].to(device) for i in laid_out])[:, :COUNTS]
    return counts


def exponent_histogram(tensor):
    """Counts of |x| per binade floor(log2|x|), -149..127, then zeros, infinities and NaNs: a
    length-280 int64 tensor on the tensor's device. Other dtypes are rounded to float32 first, the
    histogram's range: float64 values beyond it count as infinities or zeros, as float32 holds them.

    The exponent field does the normal numbers (a normal binade is the field - 127); only where
    field 0 holds values are the zeros counted, and only where subnormals, infinities or NaNs are
    there (rare) are they taken apart."""
    return assemble([partial_histogram(tensor)])[0]


def tensor_record(name, kind, counts, scale=1.0, captured="before_cast"):
    """A run-log tensor record (schema 2) from a histogram's counts (a tensor or a sequence of
    COUNTS numbers); its bins are (binade, count) tuples."""
    counts = counts.tolist() if torch.is_tensor(counts) else counts if isinstance(counts, list) else list(counts)
    # The nonzero slots as (binade, count) pairs, written as JSON arrays. Tuples of numbers, which
    # Python's collector stops tracking the first time it looks at them: a recorded step makes tens
    # of thousands, and as lists they would be carried into the oldest generation and bring on its
    # full collections (a few hundred milliseconds in a process holding torch).
    bins = [(MIN_BINADE + i, counts[i]) for i in compress(range(SLOTS), counts[:SLOTS])]
    return {"name": name, "kind": kind, "bins": bins, "zero": counts[ZERO], "inf": counts[INF], "nan": counts[NAN],
            "scale": float(scale), "captured": captured}


def captured_of(tensor):
    """as_stored for values already held in a float format narrower than float32 (16, 8 or 4 bits:
    what a cast flushed is among the zeros); before_cast for float32 and wider, which a cast will
    still round."""
    return "as_stored" if tensor.element_size() < 4 else "before_cast"
