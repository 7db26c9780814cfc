// Products of bfloat16 values in oneDNN's bf16 kernels (gemm.hpp says when and why): the rule that
// decides whether a product may go there, and the product itself.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <string>
#include <cstdint>

#include "fpscope/gpu/gemm.hpp"

namespace fpscope {

// What one pass over an operand's float32 bit patterns found.
struct Bf16Scan {
  std::uint32_t low_bits = 0;      // the low 16 bits of every element, or-ed: zero when all are bf16 values
  unsigned smallest_field = 255;   // the smallest exponent field among nonzero elements (255: none)
  unsigned largest_field = 0;      // the largest exponent field (255: a NaN or an infinity)
  bool bf16() const { return low_bits == 0; }
  void add(std::uint32_t bits) {  // branch-free: the packing loop vectorises
    low_bits |= bits & 0xFFFFu;
    const unsigned field = (bits >> 23) & 0xFFu;
    smallest_field = std::min(smallest_field, (bits & 0x7FFFFFFFu) != 0 ? field : 255u);
    largest_field = std::max(largest_field, field);
  }
  void merge(const Bf16Scan& other) {
    low_bits |= other.low_bits;
    smallest_field = std::min(smallest_field, other.smallest_field);
    largest_field = std::max(largest_field, other.largest_field);
  }
};

// True when a product of operands scanned as `a` and `b`, made in hardware that reads subnormal
// bf16 inputs as zero and flushes subnormal results (VDPBF16PS, AMX's TDPBF16PS), is the product
// of their exact values accumulated in float32 in some order: both all bfloat16 and finite, neither
// subnormal, and binade(smallest nonzero |a|) + binade(smallest nonzero |b|) >= -112. A bf16 value is
// an integer times 2^(binade - 7), so every product, and every sum of products rounded to float32,
// is an integer multiple of 2^(binade_a + binade_b - 14) >= 2^-126: none is a nonzero subnormal.
// An operand with no nonzero element makes every product zero.
inline bool bf16_kernels_exact(const Bf16Scan& a, const Bf16Scan& b) {
  if (!a.bf16() || !b.bf16() || a.largest_field == 255 || b.largest_field == 255) return false;
  if (a.smallest_field == 255 || b.smallest_field == 255) return true;
  return a.smallest_field >= 1 && b.smallest_field >= 1 && static_cast<int>(a.smallest_field + b.smallest_field) - 254 >= -112;
}

// Whether products can go to oneDNN's bf16 kernels here: built with oneDNN, the processor has
// AVX512-BF16 or AMX, and they are not turned off (set_gemm_bf16_products, FPSCOPE_BF16_PRODUCTS=off).
bool bf16_products_available();

// How many operands have been packed for those kernels since the program started.
std::uint64_t bf16_operands_packed();

// c (m x n, allocated) = op(a) op(b) through oneDNN when bf16_products_available() and the operands
// pass bf16_kernels_exact; false (c untouched) otherwise. Slices of `columns_per_call` columns of c,
// one single-threaded oneDNN call each, on the engine's threads.
// Each operand is packed and scanned at most once however many products take it (ProductOperand).
// The epilogue, where there is one, runs on each slice after its call (gemm.hpp).
bool bf16_product(const ProductOperand& a, bool transpose_a, const ProductOperand& b, bool transpose_b, Eigen::Index columns_per_call,
                  const GemmEpilogue& epilogue, Eigen::MatrixXf& c);

// The calling thread runs the oneDNN calls it makes on itself alone (an OpenMP team of one): the
// engine's threads already share the slices out. Nothing without oneDNN.
void onednn_on_calling_thread();

// oneDNN's version and the instruction set it runs here: "oneDNN 2.6.3 (avx512_core_bf16)"; ""
// without oneDNN.
std::string onednn_description();

// Whether oneDNN runs its AVX-512 kernels here (AVX512F, BW, VL, DQ: its avx512_core); false
// without oneDNN.
bool onednn_runs_avx512();

// c (m x n, contiguous column-major) = op(a) op(b) of two blocks, on the calling thread alone, when
// bf16_products_available() and the blocks pass bf16_kernels_exact: the calls bf16_product makes
// for copies of the blocks, so the same bits. False (c untouched) otherwise.
bool bf16_block_product(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, Eigen::Index columns_per_call, float* c);

}  // namespace fpscope
