#!/usr/bin/env python3
"""Usage: isa_units.py LIBFPSCOPE_CORE.a [OTHER_LIBRARY.a ...]

The kernels compiled for AVX2 or AVX-512 run only where bulk.cpp's dispatch found that
instruction set. Everything else in the library is called on any x86-64 processor: so no
function that another unit could also define -- a weak symbol, an inline function or template
instantiation outside an instruction set's namespace -- may be compiled with instructions beyond
x86-64's baseline, for the linker keeps one copy of such a function, whichever unit it comes from
(one compiled for AVX2 ran shlx in baseline code before the kernel units switched their
instruction set after their shared headers: kernel_unit_baseline.hpp).

Reads the archives with nm and objdump; prints each offending function and the unit it is in,
and exits 1 if there is one. Checks that it saw the kernels (some vector code in instruction-set
namespaces), so an unreadable archive does not pass. The CPU training backend's element-wise
passes (gpu/src/cpu/elementwise_avx2.cpp, elementwise_avx512.cpp) are such units too.
"""
import re
import subprocess
import sys

# Namespaces only a unit compiled for that instruction set defines names in (bulk_kernels.inl's
# BULK_ISA, the MX kernels, the AVX-512 helpers, the F16C and AVX512-BF16 units, the training
# backend's element-wise lanes).
ISA_NAMESPACE = re.compile(r"\b(bulk_avx2|bulk_avx512|elementwise_avx2|elementwise_avx512|mx_avx2|mx_avx512|avx512|bulk_f16c|bulk_bf16_avx512)::")

# Mnemonics beyond x86-64's baseline (SSE2): every VEX/EVEX instruction (v...), AVX-512's mask
# registers (k...), BMI1/BMI2/LZCNT/POPCNT, and the SSE3/SSSE3/SSE4 instructions a compiler emits.
BEYOND_BASELINE = re.compile(
    r"^(v\w+|k(mov|and|or|xor|xnor|not|shift|test|ortest|add|unpck)\w*|andn|bextr|blsi|blsmsk|blsr|bzhi|lzcnt|tzcnt|popcnt|"
    r"mulx|pdep|pext|rorx|sarx|shlx|shrx|pshufb|palignr|phadd\w*|phsub\w*|pmaddubsw|pmulhrsw|psign\w|pabs\w|"
    r"blendv?p[sd]|pblendw|pblendvb|dpp[sd]|insertps|extractps|pextr[bdq]|pinsr[bdq]|pmin[su][bwd]|pmax[su][bwd]|"
    r"pmov[sz]x\w+|pmuldq|pmulld|ptest|round[sp][sd]|packusdw|pcmpeqq|pcmpgtq|crc32\w?|pcmp[ei]str[im]|"
    r"addsubp[sd]|haddp[sd]|hsubp[sd]|lddqu|movddup|movs[hl]dup|movntdqa)$")


def run(*command):
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def weak_functions(archive):
    """{member: {mangled name}} of the weak function symbols each member defines."""
    weak, member = {}, None
    for line in run("nm", "--defined-only", archive).splitlines():
        if line.endswith(".o:"):
            member = line[:-1]
            weak[member] = set()
        else:
            fields = line.split()
            if len(fields) == 3 and fields[1] == "W":
                weak[member].add(fields[2])
    return weak


def functions_beyond_baseline(archive):
    """{member: {mangled name: first instruction beyond the baseline}}, a function whose only such
    instructions are tzcnt left out."""
    found, member, function = {}, None, None
    for line in run("objdump", "-d", "--no-show-raw-insn", "--no-addresses", archive).splitlines():
        header = re.match(r"^(\S+\.o):\s+file format", line)
        if header:
            member, function = header.group(1), None
            found[member] = {}
            continue
        label = re.match(r"^<(.+)>:$", line)
        if label:
            function = label.group(1)
            continue
        fields = line.split()
        if member is None or function is None or not fields:
            continue
        mnemonic = fields[0]
        if mnemonic in ("lock", "rep", "repz", "repnz", "notrack", "bnd", "data16") and len(fields) > 1:
            mnemonic = fields[1]
        if BEYOND_BASELINE.match(mnemonic):
            found[member].setdefault(function, []).append((mnemonic, line.strip()))
    # tzcnt's encoding is also `rep bsf`, which GCC emits at the baseline for the trailing zeros of
    # a value it knows is nonzero (where the two agree): alone in a function, it is that.
    return {member: {function: seen[0][1] for function, seen in functions.items() if any(m != "tzcnt" for m, _ in seen)}
            for member, functions in found.items()}


def demangle(names):
    return run("c++filt", *names).splitlines() if names else []


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.splitlines()[0])
    offending, kernels = [], 0
    for archive in sys.argv[1:]:
        weak = weak_functions(archive)
        for member, functions in functions_beyond_baseline(archive).items():
            names = sorted(functions)
            for mangled, readable in zip(names, demangle(names)):
                if ISA_NAMESPACE.search(readable):
                    kernels += 1
                elif mangled in weak.get(member, ()):
                    offending.append(f"{archive}: {member}: {readable}  ({functions[mangled]})")
    if kernels < 10:
        sys.exit(f"isa_units: only {kernels} functions with vector instructions found in instruction-set namespaces: "
                 f"is the core library among {sys.argv[1:]}?")
    for entry in offending:
        print(entry)
    print(f"{kernels} kernel functions beyond the baseline in instruction-set namespaces; "
          f"{len(offending)} shared functions (weak symbols) compiled beyond it")
    sys.exit(1 if offending else 0)


if __name__ == "__main__":
    main()
