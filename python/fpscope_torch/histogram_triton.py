"""Exponent histograms of CUDA tensors in one Triton kernel: the tensor read once in its own dtype,
each element's slot (binade, zero, infinity, NaN) worked out in registers, a histogram per program
and one atomic add of it into the tensor's counts. Nothing is read back: the counts stay on the
device until the Recorder writes the step (histogram.assemble). Many tensors of one dtype (a
model's weights, its weight gradients) go in one launch (device_counts_many): a table of their
addresses, each tensor cut into runs of tiles, a program per run.

The slot rule is histogram.py's (a normal binade is the float32 exponent field - 127; a
subnormal's is -149 + the top bit of its mantissa, read off the mantissa converted to float32;
infinities and NaNs by the mantissa of field 255), restated here in Triton because a kernel cannot
call PyTorch; the tests hold both to NumPy's frexp counts.

Used when Triton is importable and works on the tensor's device (PyTorch's CUDA wheels bring it);
otherwise histogram.py's PyTorch-ops path runs. TRITON_INTERPRET=1 runs the kernel on the CPU, as
the tests do on machines without a GPU."""

import threading

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None

from .histogram import COUNTS, INF, MIN_BINADE, NAN, ZERO

_BLOCK = 2048          # elements a program reads per iteration
_BINS = 512            # a power of two >= COUNTS + 1: slot COUNTS takes the masked lanes
_FIRST_NORMAL_SLOT = 1 - 127 - MIN_BINADE
_PROGRAMS_PER_SM = 4

if triton is not None:
    @triton.jit
    def _slots(value, inside, LOAD: tl.constexpr, ZERO_SLOT: tl.constexpr, INF_SLOT: tl.constexpr, NAN_SLOT: tl.constexpr,
               FIRST_NORMAL: tl.constexpr, PAD_SLOT: tl.constexpr):
        """Each loaded element's slot; PAD_SLOT where it is past the end (not `inside`)."""
        if LOAD == 0:  # float32: its bits, as they are (a bitcast: no arithmetic touches the value)
            bits = value.to(tl.int32, bitcast=True)
        elif LOAD == 1:  # bfloat16: the top half of the float32 it is, by definition
            bits = value.to(tl.int16, bitcast=True).to(tl.int32) << 16
        else:  # float16: widened to float32, which holds every float16 exactly
            bits = value.to(tl.float32).to(tl.int32, bitcast=True)
        magnitude = bits & 0x7FFFFFFF
        field = magnitude >> 23
        mantissa = magnitude & 0x7FFFFF
        top_bit = (mantissa.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127
        special = tl.where(mantissa == 0, INF_SLOT, NAN_SLOT)
        slot = tl.where(field == 0, tl.where(magnitude == 0, ZERO_SLOT, top_bit),
                        tl.where(field == 255, special, field + (FIRST_NORMAL - 1)))
        return tl.where(inside, slot, PAD_SLOT)

    @triton.jit(do_not_specialize=["n", "tiles_per_program"])
    def _histogram_kernel(x_ptr, counts_ptr, n, tiles_per_program, LOAD: tl.constexpr, BLOCK: tl.constexpr,
                          BINS: tl.constexpr, ZERO_SLOT: tl.constexpr, INF_SLOT: tl.constexpr, NAN_SLOT: tl.constexpr,
                          FIRST_NORMAL: tl.constexpr, PAD_SLOT: tl.constexpr):
        program = tl.program_id(0)
        total = tl.zeros((BINS,), dtype=tl.int32)
        for tile in range(0, tiles_per_program):
            offsets = (program * tiles_per_program + tile).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            inside = offsets < n
            value = tl.load(x_ptr + offsets, mask=inside, other=0.0)
            total += tl.histogram(_slots(value, inside, LOAD, ZERO_SLOT, INF_SLOT, NAN_SLOT, FIRST_NORMAL, PAD_SLOT), BINS)
        tl.atomic_add(counts_ptr + tl.arange(0, BINS), total.to(tl.int64))

    @triton.jit(do_not_specialize=["tiles_per_run"])
    def _many_histogram_kernel(runs_ptr, counts_ptr, tiles_per_run, LOAD: tl.constexpr, BLOCK: tl.constexpr,
                               BINS: tl.constexpr, ZERO_SLOT: tl.constexpr, INF_SLOT: tl.constexpr, NAN_SLOT: tl.constexpr,
                               FIRST_NORMAL: tl.constexpr, PAD_SLOT: tl.constexpr):
        """Program r takes run r of the table (its first element's address, its length, the row of
        counts it adds into: three int64 words) and does what _histogram_kernel's programs do."""
        run = tl.program_id(0)
        address = tl.load(runs_ptr + 3 * run)
        n = tl.load(runs_ptr + 3 * run + 1)
        row = tl.load(runs_ptr + 3 * run + 2)
        if LOAD == 0:
            x_ptr = address.to(tl.pointer_type(tl.float32))
        elif LOAD == 1:
            x_ptr = address.to(tl.pointer_type(tl.bfloat16))
        else:
            x_ptr = address.to(tl.pointer_type(tl.float16))
        total = tl.zeros((BINS,), dtype=tl.int32)
        for tile in range(0, tiles_per_run):
            offsets = tile * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
            inside = offsets < n
            value = tl.load(x_ptr + offsets, mask=inside, other=0.0)
            total += tl.histogram(_slots(value, inside, LOAD, ZERO_SLOT, INF_SLOT, NAN_SLOT, FIRST_NORMAL, PAD_SLOT), BINS)
        tl.atomic_add(counts_ptr + row * BINS + tl.arange(0, BINS), total.to(tl.int64))


_working = {}  # device type -> whether the kernel compiled and ran there
_LOAD = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_CONSTANTS = dict(BLOCK=_BLOCK, BINS=_BINS, ZERO_SLOT=ZERO, INF_SLOT=INF, NAN_SLOT=NAN, FIRST_NORMAL=_FIRST_NORMAL_SLOT,
                  PAD_SLOT=COUNTS)


def available(device):
    """Whether the Triton kernel is the path for tensors on `device` (tried once per device type)."""
    if triton is None:
        return False
    return _working.get(device.type, True)


class _Rows:
    """Zeroed rows of _BINS int64 counts, handed out from chunks zeroed in one operation (a chunk
    per 256 tensors rather than an allocation and a fill per tensor). A row is never handed out
    twice; a chunk's memory goes when its last row does."""

    _CHUNK = 256

    def __init__(self):
        self.chunks = {}  # device -> (chunk, next row)
        self.lock = threading.Lock()  # hooks run on autograd's threads too: a row goes to one tensor

    def take(self, device):
        with self.lock:
            chunk, row = self.chunks.get(device, (None, self._CHUNK))
            if row == self._CHUNK:
                chunk, row = torch.zeros((self._CHUNK, _BINS), dtype=torch.int64, device=device), 0
            self.chunks[device] = (chunk, row + 1)
        return chunk[row]


_rows = _Rows()
_sm_counts = {}


def _programs_for(device, tiles):
    if device.type != "cuda":
        return min(tiles, 4)
    index = device.index if device.index is not None else torch.cuda.current_device()
    sms = _sm_counts.get(index)
    if sms is None:
        sms = _sm_counts[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return min(tiles, _PROGRAMS_PER_SM * sms)


def device_counts(x):
    """The histogram of the contiguous tensor x (float32, float16 or bfloat16) on its device: an
    int64 row of _BINS counts whose first COUNTS are the histogram (the rest hold nothing), or None
    where Triton cannot run there (then remembered, and PyTorch's ops do it)."""
    n = x.numel()
    counts = _rows.take(x.device)
    if n == 0:
        return counts
    tiles = (n + _BLOCK - 1) // _BLOCK
    tiles_per_program = -(-tiles // _programs_for(x.device, tiles))
    launched = _launched(x.device, lambda: _histogram_kernel[(-(-tiles // tiles_per_program),)](x, counts, n, tiles_per_program,
                                                                                             LOAD=_LOAD[x.dtype], **_CONSTANTS))
    return counts if launched else None


def _launched(device, launch):
    """Runs launch(); False (and the device type remembered as one Triton cannot run on) where it
    fails there for the first time: no driver for the device, a Triton too old for tl.histogram, ...
    A failure where a launch worked before is a real error, raised."""
    try:
        launch()
    except Exception:
        if _working.get(device.type) is True:
            raise
        _working[device.type] = False
        return False
    _working[device.type] = True
    return True


def device_counts_many(tensors):
    """The histograms of contiguous tensors of one dtype (float32, float16 or bfloat16) on one
    device, in one launch: a list of device_counts' rows, one per tensor (all zero for an empty
    one), or None where Triton cannot run there. Each tensor is cut into runs of up to
    tiles_per_run tiles, tiles_per_run chosen as device_counts chooses a program's tiles; the
    table of runs goes to the device from pinned memory without waiting for the device."""
    device = tensors[0].device
    counts = torch.zeros((len(tensors), _BINS), dtype=torch.int64, device=device)
    total_tiles = sum((x.numel() + _BLOCK - 1) // _BLOCK for x in tensors)
    if total_tiles == 0:
        return list(counts)
    tiles_per_run = -(-total_tiles // _programs_for(device, total_tiles))
    run_elements = tiles_per_run * _BLOCK
    table = []
    for row, x in enumerate(tensors):
        n, address, size = x.numel(), x.data_ptr(), x.element_size()
        for start in range(0, n, run_elements):
            table += [address + start * size, min(run_elements, n - start), row]
    runs = torch.tensor(table, dtype=torch.int64)
    if device.type != "cpu":
        runs = runs.pin_memory().to(device, non_blocking=True)
    launched = _launched(device, lambda: _many_histogram_kernel[(len(table) // 3,)](runs, counts, tiles_per_run, LOAD=_LOAD[tensors[0].dtype],
                                                                                  **_CONSTANTS))
    return list(counts) if launched else None
