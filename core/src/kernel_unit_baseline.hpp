// What a unit of kernels for one instruction set (bulk_avx2.cpp, bulk_avx512.cpp,
// exponent_fields_avx512.cpp) includes before it switches its instruction set.
//
// Such a unit compiles its kernels for AVX2 or AVX-512, which run only where bulk.cpp's dispatch
// found that instruction set. But an inline function or template of a shared header (round_pack,
// mx_scale_code, a std::vector member) that the unit does not inline gets an out-of-line copy in
// it, and the linker keeps one copy of each such function for the whole program, whichever unit
// it comes from: compiled with `-mavx2` for the whole unit, the AVX2 copy of
// nvfp4_block_scale_code (shlx, vmovd) ended up in the binaries, called from baseline code on any
// processor. So a unit includes this first, every shared header compiled for x86-64's baseline,
// and only then switches its instruction set for the code that follows (FPSCOPE_BEGIN_*_UNIT):
// the shared functions still inline into its kernels, where they are compiled for its set, and
// any copy of them it emits is baseline code. tests/isa_units.py checks the library for a weak
// function compiled beyond the baseline outside an instruction set's namespace.
// One quirk: GCC compiles an implicit constructor for the baseline even after the switch, so a
// class with vector members in such a unit writes its constructors out (or intrinsics fail to
// inline into them: "target specific option mismatch").
#pragma once

#if defined(FPSCOPE_HAVE_X86_KERNELS)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "block_walk.hpp"
#include "exponent_fields.hpp"
#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/e8m0.hpp"
#include "whole_blocks_table.hpp"

#include "fpscope/core/instruction_set_unit.hpp"
