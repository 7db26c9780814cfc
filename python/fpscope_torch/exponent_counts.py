"""The one-pass CPU histogram (exponent_counts.c), compiled once with the system's C compiler into
fpscope's cache folder and called through ctypes: a recorded step reads each tensor once, where
PyTorch's ops read it three to five times (a shift, a narrowing copy, a bincount, and a zero count
where there are zeros). Without a compiler, or with FPSCOPE_TORCH_PURE=1, histogram.py's PyTorch
path is used instead; both give the same counts (python/tests/test_recorder.py holds them to
NumPy's). `why_not()` says which path runs and why."""

import ctypes
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

import torch

_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exponent_counts.c")
_DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
_state = {"function": None, "tried": False, "why": ""}


def _cache_folder():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fpscope")


def _load():
    """The compiled function, compiling it first if this source has not been compiled here yet;
    None (and the reason in _state) where that cannot be done."""
    _state["tried"] = True
    if os.environ.get("FPSCOPE_TORCH_PURE"):
        _state["why"] = "FPSCOPE_TORCH_PURE is set: PyTorch's ops"
        return None
    if sys.byteorder != "little":
        _state["why"] = "a big-endian machine: PyTorch's ops"
        return None
    try:
        with open(_SOURCE, "rb") as f:
            source = f.read()
    except OSError as error:
        _state["why"] = f"{_SOURCE} cannot be read ({error.strerror}): PyTorch's ops"
        return None
    compiler = os.environ.get("CC", "cc")
    digest = hashlib.sha256(source + compiler.encode() + sys.platform.encode()).hexdigest()[:16]
    folder = _cache_folder()
    library = os.path.join(folder, f"exponent_counts-{digest}.so")
    if not os.path.exists(library):
        try:
            os.makedirs(folder, exist_ok=True)
            # Compiled beside its final name and renamed into place: two processes compiling at
            # once each rename a whole library.
            fd, temporary = tempfile.mkstemp(prefix=".exponent_counts-", suffix=".so", dir=folder)
            os.close(fd)
            try:
                result = subprocess.run([compiler, "-O3", "-std=c99", "-shared", "-fPIC", _SOURCE, "-o", temporary],
                                        capture_output=True, text=True, timeout=120)
                if result.returncode != 0:
                    _state["why"] = f"{compiler} could not compile {_SOURCE}: PyTorch's ops ({result.stderr.strip()[:200]})"
                    return None
                os.replace(temporary, library)
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
        except (OSError, subprocess.SubprocessError) as error:
            _state["why"] = f"no C compiler to build the one-pass histogram ({error}): PyTorch's ops"
            return None
    try:
        loaded = ctypes.CDLL(library)
        function, largest = loaded.fpscope_exponent_counts, loaded.fpscope_largest_magnitude
    except (OSError, AttributeError) as error:
        _state["why"] = f"{library} cannot be loaded ({error}): PyTorch's ops"
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]
    function.restype = None
    largest.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int]
    largest.restype = ctypes.c_uint32
    _state["largest"] = largest
    _state["why"] = f"the one-pass C histogram ({library})"
    return function


def counts_of(x, slots):
    """x: a CPU tensor, flat, contiguous, float32 / bfloat16 / float16. Its `slots` counts as an
    int64 tensor, or None where the compiled function is not there."""
    if not _state["tried"]:
        _state["function"] = _load()
    function = _state["function"]
    if function is None:
        return None
    counts = torch.empty(slots, dtype=torch.int64)
    function(x.data_ptr(), x.numel(), _DTYPES[x.dtype], counts.data_ptr())
    return counts


_WIDENED = {0: lambda bits: bits, 1: lambda bits: bits << 16}


def largest_magnitude(x):
    """x: a CPU tensor, contiguous, float32 / bfloat16 / float16. Its largest magnitude as a float
    (NaN where it holds a NaN), in one vectorised pass; None where the compiled function is not
    there."""
    if not _state["tried"]:
        _state["function"] = _load()
    largest = _state.get("largest")
    if largest is None:
        return None
    dtype = _DTYPES[x.dtype]
    bits = largest(x.data_ptr(), x.numel(), dtype)
    if dtype == 2:
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    return struct.unpack("<f", struct.pack("<I", _WIDENED[dtype](bits)))[0]


def why_not():
    """Which CPU histogram path runs, and why."""
    if not _state["tried"]:
        _state["function"] = _load()
    return _state["why"]
