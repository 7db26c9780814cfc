"""What ml_dtypes (the NumPy float types JAX and others use) does with each narrow format, as
tables for the exhaustive sweep tests/exhaustive/ml_dtypes_formats.cpp:

  format NAME WIDTH
  decode BITS FLOAT32BITS            every encoding, widened to float32 by ml_dtypes
  encode START RESULT                float32 inputs (as 32-bit patterns, in order) from START on
                                     round, to nearest even, to RESULT, until the next line
  sample INPUT RESULT                (with --sample, instead of encode lines) one float32 input
                                     and what ml_dtypes rounds it to
  end

The encode lines come from casting all 2^32 float32 patterns with ml_dtypes, in chunks, and
keeping the places where the result changes: the sweep then holds fpscope's conversion of every
one of the 2^32 inputs against them.

With --sample the inputs are every rounding boundary of each format instead of all 2^32: each
value, each midpoint between neighbours (and above the largest), the float32 numbers on either
side of each, both signs, and the special values. That takes seconds, and runs in CI.

Usage: python3 ml_dtypes_tables.py OUT.txt [--sample]   (needs numpy and ml_dtypes; exits 77 without them)
"""
import sys

try:
    import ml_dtypes
    import numpy as np
except ImportError as missing:
    print(f"ml_dtypes_tables: {missing.name} is not installed here (scripts/test-torch's venv has it); skipping")
    sys.exit(77)

# fpscope's name -> ml_dtypes type. e4m3 is OCP's E4M3 (FN), e5m2 OCP's E5M2.
FORMATS = [
    ("e2m1", ml_dtypes.float4_e2m1fn, 4),
    ("e2m3", ml_dtypes.float6_e2m3fn, 6),
    ("e3m2", ml_dtypes.float6_e3m2fn, 6),
    ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8),
    ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8),
    ("e4m3", ml_dtypes.float8_e4m3fn, 8),
    ("e5m2", ml_dtypes.float8_e5m2, 8),
    ("e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz, 8),
    ("e3m4", ml_dtypes.float8_e3m4, 8),
    ("e4m3ieee", ml_dtypes.float8_e4m3, 8),
    ("e8m0", ml_dtypes.float8_e8m0fnu, 8),  # the OCP MX scale: unsigned, no zero, 0xFF NaN
]

CHUNK = 1 << 26


def encode_transitions(dtype):
    """(start, result) wherever the cast of the float32 patterns 0 .. 2^32-1 changes."""
    transitions = []
    previous = None
    with np.errstate(all="ignore"):
        for first in range(0, 1 << 32, CHUNK):
            patterns = np.arange(first, first + CHUNK, dtype=np.uint64).astype(np.uint32)
            result = patterns.view(np.float32).astype(dtype).view(np.uint8).astype(np.int32)
            changes = np.flatnonzero(np.diff(result)) + 1
            if previous is None or result[0] != previous:
                transitions.append((first, int(result[0])))
            transitions.extend((first + int(i), int(result[i])) for i in changes)
            previous = int(result[-1])
    return transitions


def boundary_inputs(dtype, width):
    """float32 patterns at every rounding boundary of the type, and the special values."""
    codes = np.arange(1 << width, dtype=np.uint8)
    values = codes.view(dtype).astype(np.float64)
    finite = np.unique(np.abs(values[np.isfinite(values)]))
    points = list(finite)
    points += list((finite[:-1] + finite[1:]) / 2)
    if len(finite) > 1:
        top_gap = finite[-1] - finite[-2]
        points += [finite[-1] + top_gap / 2, finite[-1] + top_gap, finite[-1] * 2]
    points += [finite[0] / 2, finite[1] / 4 if len(finite) > 1 else 0.0]
    inputs = set()
    with np.errstate(all="ignore"):
        for p in points:
            x = np.float32(p)
            if not np.isfinite(x):
                continue
            for y in (x, np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(0))):
                for signed in (y, -y):
                    inputs.add(int(np.array([signed], dtype=np.float32).view(np.uint32)[0]))
    for special in (0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x00000001,
                    0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF):
        inputs.add(special)
    return sorted(inputs)


def main():
    sample = "--sample" in sys.argv[2:]
    if len(sys.argv) < 2 or any(a != "--sample" for a in sys.argv[2:]):
        print(__doc__)
        return 2
    with open(sys.argv[1], "w") as out:
        out.write(f"# ml_dtypes {ml_dtypes.__version__}\n")
        for name, dtype, width in FORMATS:
            out.write(f"format {name} {width}\n")
            codes = np.arange(1 << width, dtype=np.uint8)
            decoded = codes.view(dtype).astype(np.float32).view(np.uint32)
            for code, value in zip(codes.tolist(), decoded.tolist()):
                out.write(f"decode {code:X} {value:08X}\n")
            if sample:
                patterns = np.array(boundary_inputs(dtype, width), dtype=np.uint32)
                with np.errstate(all="ignore"):
                    results = patterns.view(np.float32).astype(dtype).view(np.uint8)
                for x, r in zip(patterns.tolist(), results.tolist()):
                    out.write(f"sample {x:08X} {r:X}\n")
            else:
                for start, result in encode_transitions(dtype):
                    out.write(f"encode {start:08X} {result:X}\n")
            out.write("end\n")
            out.flush()
            print(f"ml_dtypes_tables: {name} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
