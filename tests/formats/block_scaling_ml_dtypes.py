"""Block quantization by `fpscope quantize` against a NumPy + ml_dtypes implementation of each
scale rule, bit for bit: element codes, scale codes and dequantized values, on random blocks and
on the adversarial ones (all zero, one NaN, one infinity, one huge outlier, amax exactly a power
of two, amax at each rule's rounding edge, subnormal and huge magnitudes), along rows and columns.

The implementation here is NumPy's arithmetic and ml_dtypes' casts (round to nearest even): the
shared exponent from np.frexp, elements as float64 quotients (exact) clipped to the element's
largest and cast by ml_dtypes, MXINT8 by np.round, NVFP4 in float32 steps.

Usage: python3 block_scaling_ml_dtypes.py PATH/TO/fpscope   (exits 77 without numpy and ml_dtypes)
"""
import os
import subprocess
import sys
import tempfile

try:
    import ml_dtypes
    import numpy as np
except ImportError as missing:
    print(f"block_scaling_ml_dtypes: {missing.name} is not installed here; skipping")
    sys.exit(77)

# fpscope name -> (ml_dtypes element type or "int8", emax, mantissa bits, largest element)
MX = {
    "mxfp8-e4m3": (ml_dtypes.float8_e4m3fn, 8, 3, 448.0),
    "mxfp8-e5m2": (ml_dtypes.float8_e5m2, 15, 2, 57344.0),
    "mxfp6-e2m3": (ml_dtypes.float6_e2m3fn, 2, 3, 7.5),
    "mxfp6-e3m2": (ml_dtypes.float6_e3m2fn, 4, 2, 28.0),
    "mxfp4": (ml_dtypes.float4_e2m1fn, 2, 1, 6.0),
    "mxint8": ("int8", 0, 6, 127 / 64),
}
RULES = ["floor", "round-up", "rceil", "even"]
F32 = np.float32


def floor_log2(x):
    """floor(log2 x) for positive finite float64 x, exactly."""
    _, e = np.frexp(x)
    return e - 1


def shared_exponents(amax, rule, emax, mbits, largest):
    """Each block's X, or None for a NaN scale."""
    out = []
    for a in amax:
        a = float(a)
        if not np.isfinite(a):
            out.append(None)
            continue
        if a == 0:
            out.append(-127)
            continue
        e = int(floor_log2(a))
        if rule == "floor":
            x = e - emax
        elif rule == "round-up":
            x = e - emax + (1 if a / 2.0 ** (e - emax) > largest else 0)
        elif rule == "rceil":
            q = F32(a) * (F32(1.0) / F32(largest))  # float32 product with the float32 reciprocal
            if q == 0:
                x = -127
            else:
                m, qe = np.frexp(float(q))  # q = m * 2^qe, m in [0.5, 1): the next power of two up
                x = int(qe) - 1 if m == 0.5 else int(qe)
                x = min(x, 127)  # the instruction saturates
        else:  # even: amax rounded to the element's precision (ties to even), then floor
            quantum = 2.0 ** (e - mbits)
            rounded = np.round(a / quantum) * quantum  # np.round: ties to even; a / quantum exact
            x = int(floor_log2(rounded)) - emax
        if x > 127:
            out.append(None)
        else:
            out.append(max(x, -127))
    return out


def reference_mx(blocks, name, rule, amax=None):
    """`amax`: each block's scale-setting amax (a square tile's); by default its own."""
    dtype, emax, mbits, largest = MX[name]
    if amax is None:
        with np.errstate(invalid="ignore"):
            amax = np.max(np.abs(blocks.astype(np.float64)), axis=1)  # a NaN anywhere makes amax NaN
    xs = shared_exponents(amax, rule, emax, mbits, largest)
    codes = np.zeros(blocks.shape, dtype=np.uint8)
    scales = np.zeros(len(blocks), dtype=np.uint8)
    values = np.zeros(blocks.shape, dtype=np.float32)
    for b, x in enumerate(xs):
        if x is None:
            scales[b] = 0xFF
            values[b] = np.nan
            codes[b] = 0xFF  # not compared: fpscope's convention for a NaN block's elements
            continue
        scales[b] = x + 127
        y = blocks[b].astype(np.float64) / 2.0 ** x  # exact
        if dtype == "int8":
            n = np.clip(np.round(y * 64), -127, 127)
            codes[b] = n.astype(np.int8).view(np.uint8)
            element = n / 64
        else:
            quantized = np.clip(y, -largest, largest).astype(dtype)
            codes[b] = quantized.view(np.uint8)
            element = quantized.astype(np.float64)
        with np.errstate(over="ignore"):
            values[b] = (element * 2.0 ** x).astype(np.float32)  # exact product, one rounding to float32
    return codes, scales, values


def reference_nvfp4(blocks, amax=None, tensor=None):
    """`amax`: each block's scale-setting amax (a square tile's, NaN for a tile holding a NaN or an
    infinity); by default its own. `tensor`: the values the tensor scale comes from (all of a
    matrix's); by default the blocks'."""
    e4m3, e2m1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn
    magnitudes = np.abs(blocks)
    finite = np.isfinite(blocks)
    if amax is None:
        amax = np.array([np.max(magnitudes[b]) if np.all(finite[b]) else np.nan for b in range(len(blocks))], dtype=np.float32)
    source = blocks if tensor is None else tensor
    source_finite = np.isfinite(source)
    # The finite values' amax: a NaN or an infinity makes only its own block's scale NaN.
    tensor_amax = F32(np.max(np.where(source_finite, np.abs(source), 0))) if source.size else F32(0.0)
    if tensor_amax == 0:
        tensor_scale = F32(1.0)
    else:
        with np.errstate(over="ignore"):
            tensor_scale = F32(2688.0) / tensor_amax
        tensor_scale = min(tensor_scale, np.finfo(np.float32).max)
    codes = np.zeros(blocks.shape, dtype=np.uint8)
    scales = np.zeros(len(blocks), dtype=np.uint8)
    values = np.zeros(blocks.shape, dtype=np.float32)
    for b in range(len(blocks)):
        if not np.isfinite(amax[b]):
            scales[b] = 0x7F
            values[b] = np.nan
            codes[b] = 0
            continue
        with np.errstate(over="ignore"):
            wanted = (F32(amax[b]) / F32(6.0)) * tensor_scale
        scale = np.array([min(wanted, F32(448.0))], dtype=np.float32).astype(e4m3)
        scales[b] = scale.view(np.uint8)[0]
        s = F32(scale.astype(np.float32)[0])
        factor = F32(0.0) if s == 0 else tensor_scale / s
        with np.errstate(over="ignore"):
            y = (blocks[b] * factor).astype(np.float32)
        quantized = np.clip(y, -6.0, 6.0).astype(e2m1)
        codes[b] = quantized.view(np.uint8)
        values[b] = (quantized.astype(np.float32) * s) / tensor_scale
    return codes, scales, values, tensor_scale


def adversarial_blocks(size, largest, mbits, rng):
    def around(k, spread=3):
        return (rng.uniform(1, 2, size) * 2.0 ** rng.integers(k - spread, k + spread + 1, size)).astype(np.float32) * rng.choice([-1, 1], size)

    blocks = []

    def with_amax(amax, k):
        block = around(k)
        np.clip(block, -abs(amax), abs(amax), out=block)
        block[size // 3] = amax
        blocks.append(block.astype(np.float32))

    blocks.append(np.zeros(size, np.float32))
    blocks.append(np.full(size, -0.0, np.float32))
    b = around(0); b[5] = np.nan; blocks.append(b)
    b = around(0); b[1] = -np.inf; blocks.append(b)
    with_amax(F32(3e38), 0)                        # a huge outlier
    with_amax(np.finfo(np.float32).max, 100)
    with_amax(F32(1e-30), -132)                    # subnormal neighbours
    with_amax(F32(2.0 ** -149), -149)
    for k in (-130, -100, -5, 0, 7, 100):
        with_amax(F32(2.0 ** k), k - 2)            # amax a power of two
        at_max = F32(largest * 2.0 ** k)           # round-up's edge
        with_amax(at_max, k - 1)
        with_amax(np.nextafter(at_max, F32(np.inf)), k - 1)
        with_amax(np.nextafter(at_max, F32(0)), k - 1)
        top, half_ulp = 2.0 ** (k + 1), 2.0 ** (k - mbits - 1)
        edge = F32(top - half_ulp)                 # even's edge
        for a in (edge, np.nextafter(edge, F32(0)), np.nextafter(edge, F32(np.inf)), F32(top - 3 * half_ulp)):
            with_amax(F32(a), k - 1)
    reciprocal = F32(1.0) / F32(largest)           # rceil's edge
    for k in (-3, 0, 9):
        a = F32(largest * 2.0 ** k)
        while a * reciprocal > F32(2.0 ** k):
            a = np.nextafter(a, F32(0))
        while np.nextafter(a, F32(np.inf)) * reciprocal <= F32(2.0 ** k):
            a = np.nextafter(a, F32(np.inf))
        with_amax(a, k - 1)
        with_amax(np.nextafter(a, F32(np.inf)), k - 1)
    for _ in range(200):                           # random, with a wide spread of magnitudes
        centre = int(rng.integers(-140, 126))
        spread = int(rng.integers(0, 30))
        blocks.append(around(min(max(centre, -149 + spread), 127 - spread), spread))
    return np.stack(blocks).astype(np.float32)


def order_sensitive_blocks(rng):
    """NVFP4 blocks whose E4M3 scale depends on the order of the float32 steps: with the tensor's
    amax at 1000, block amaxes where (amax / 6) * tensor_scale and amax * (tensor_scale / 6) round
    to different E4M3 codes. The first block holds the 1000."""
    e4m3 = ml_dtypes.float8_e4m3fn
    tensor_scale = F32(2688.0) / F32(1000.0)
    grid = np.unique(np.abs(np.arange(256, dtype=np.uint8).view(e4m3).astype(np.float64)))
    grid = grid[np.isfinite(grid)]
    blocks = [np.full(16, 1.0, np.float32)]
    blocks[0][7] = 1000.0

    def code(w):
        return np.array([min(w, F32(448))], np.float32).astype(e4m3).view(np.uint8)[0]

    for midpoint in (grid[:-1] + grid[1:])[8:] / 2:
        a = F32(midpoint * 6 / float(tensor_scale))
        for _ in range(40):
            a = np.nextafter(a, F32(0))
        for _ in range(80):
            if code((a / F32(6)) * tensor_scale) != code(a * (tensor_scale / F32(6))):
                block = (rng.uniform(-1, 1, 16) * float(a)).astype(np.float32)
                block[3] = a
                blocks.append(block)
                break
            a = np.nextafter(a, F32(np.inf))
    return np.stack(blocks)


def run_fpscope(fpscope, work, blocks, name, rule, axis, block_size, tiles=False):
    data = blocks if axis == "rows" else np.ascontiguousarray(blocks.T)
    np.save(os.path.join(work, "x.npy"), data)
    command = [fpscope, "quantize", os.path.join(work, "x.npy"), "-f", name, "--block", str(block_size), "--axis", axis,
               "--codes", os.path.join(work, "c.npy"), "--scales", os.path.join(work, "s.npy"), "--out", os.path.join(work, "d.npy"), "--json"]
    if rule is not None:
        command += ["--scale-rule", rule]
    if tiles:
        command += ["--tiles"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"fpscope quantize failed: {result.stderr.strip()}")
    codes, scales, values = (np.load(os.path.join(work, f)) for f in ("c.npy", "s.npy", "d.npy"))
    if axis == "cols":
        codes, scales, values = codes.T, scales.T, values.T
    import json
    return codes, scales.reshape(-1), values, json.loads(result.stdout)


def tile_matrix(rows, cols, largest, rng):
    """A matrix of wide-ranging values whose square tiles include an all-zero one, one holding a
    NaN, one an infinity and one a huge outlier."""
    m = (rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-12, 4, (rows, cols)))).astype(np.float32)
    m[0:16, 16:32] = 0
    m[20, 5] = np.nan
    m[rows - 1, cols - 1] = -np.inf
    m[3, 40] = F32(largest * 2.0 ** 20)
    return m


def reference_tiles(matrix, name, rule, block):
    """Each block of `block` along the rows (edge blocks short), scaled by its block x block tile's amax."""
    rows, cols = matrix.shape
    codes = np.zeros(matrix.shape, dtype=np.uint8)
    values = np.zeros(matrix.shape, dtype=np.float32)
    scale_cols = (cols + block - 1) // block
    scales = np.zeros(rows * scale_cols, dtype=np.uint8)
    for r in range(rows):
        top = r // block * block
        for c0 in range(0, cols, block):
            tile = matrix[top:top + block, c0:c0 + block]
            with np.errstate(invalid="ignore"):
                amax = np.max(np.abs(tile.astype(np.float64)))  # NaN where the tile holds one
            if name == "nvfp4":
                amax32 = np.array([amax if np.all(np.isfinite(tile)) else np.nan], dtype=np.float32)
                c, s, v, _ = reference_nvfp4(matrix[r:r + 1, c0:c0 + block], amax32, matrix)
            else:
                c, s, v = reference_mx(matrix[r:r + 1, c0:c0 + block], name, rule, np.array([amax]))
            codes[r, c0:c0 + block], values[r, c0:c0 + block] = c[0], v[0]
            scales[r * scale_cols + c0 // block] = s[0]
    return codes, scales, values


def compare(label, got, expected, nan_code):
    codes, scales, values = got
    ref_codes, ref_scales, ref_values = expected
    problems = []
    if not np.array_equal(scales, ref_scales):
        bad = np.flatnonzero(scales != ref_scales)
        problems.append(f"{len(bad)} scale codes differ (block {bad[0]}: {scales[bad[0]]} vs {ref_scales[bad[0]]})")
    # Element codes of NaN blocks are not compared: their values, and only theirs, are NaN (the
    # blocks as rows, or a matrix of square tiles).
    keep = ~np.isnan(ref_values)
    if not np.array_equal(codes[keep], ref_codes[keep]):
        bad = np.argwhere(codes[keep] != ref_codes[keep])
        problems.append(f"{len(bad)} element codes differ (first at {bad[0].tolist()})")
    got_bits, ref_bits = values.view(np.uint32), ref_values.view(np.uint32)
    both_nan = np.isnan(values) & np.isnan(ref_values)
    # MXINT8 has one zero: -0.0 and 0.0 are the same code.
    zeros = (values == 0) & (ref_values == 0)
    differ = (got_bits != ref_bits) & ~both_nan & ~zeros
    if differ.any():
        problems.append(f"{int(differ.sum())} dequantized values differ")
    print(("FAIL " if problems else "OK   ") + label + (": " + "; ".join(problems) if problems else ""))
    return not problems


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    fpscope = sys.argv[1]
    rng = np.random.default_rng(20261122)
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for name, (dtype, emax, mbits, largest) in MX.items():
            blocks = adversarial_blocks(32, largest, mbits, rng)
            for rule in RULES:
                expected = reference_mx(blocks, name, rule)
                for axis in ("rows", "cols"):
                    codes, scales, values, _ = run_fpscope(fpscope, work, blocks, name, rule, axis, 32)
                    ok &= compare(f"{name} {rule} {axis}: {len(blocks)} blocks", (codes, scales, values), expected, 0xFF)
        blocks = adversarial_blocks(16, 6.0, 1, rng)
        order_blocks = order_sensitive_blocks(rng)
        for chosen, label in ((blocks[np.all(np.isfinite(blocks), axis=1)], "finite blocks"), (blocks, "with NaN and infinity"),
                              (order_blocks, "scales sensitive to the order of the float32 steps")):
            ref_codes, ref_scales, ref_values, tensor_scale = reference_nvfp4(chosen)
            codes, scales, values, summary = run_fpscope(fpscope, work, chosen, "nvfp4", None, "rows", 16)
            same_scale = np.float32(summary["tensor_scale"]) == tensor_scale
            if not same_scale:
                print(f"FAIL nvfp4 {label}: tensor scale {summary['tensor_scale']} vs {tensor_scale}")
            ok &= same_scale and compare(f"nvfp4 {label}: {len(chosen)} blocks", (codes, scales, values),
                                         (ref_codes, ref_scales, ref_values), 0x7F)
        # Square tiles (quantize --tiles, NVIDIA's 2-D scaling of weights): rows and columns give
        # the same codes; the matrix's edges cut the last tiles short.
        for name, rule, block in (("nvfp4", None, 16), ("mxfp8-e4m3", "floor", 32), ("mxfp4", "even", 32)):
            largest = 6.0 if name == "nvfp4" else MX[name][3]
            matrix = tile_matrix(2 * block + block // 2, 3 * block - 5, largest, rng)
            expected = reference_tiles(matrix, name, rule, block)
            for axis in ("rows", "cols"):
                codes, scales, values, _ = run_fpscope(fpscope, work, matrix, name, rule, axis, block, tiles=True)
                ok &= compare(f"{name} {block}x{block} tiles {axis}: {matrix.shape}", (codes, scales, values), expected,
                              0x7F if name == "nvfp4" else 0xFF)
    print("BLOCK SCALING AGREES WITH NUMPY + ML_DTYPES" if ok else "BLOCK SCALING DIFFERS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
