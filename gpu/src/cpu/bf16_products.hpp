// Products of bfloat16 values in oneDNN's bf16 kernels (gemm.hpp says when and why): the rule that
// decides whether a product may go there, and the product itself.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

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

// Whether the first few values of a block (its first column's, at most 64) are all bf16 values:
// float32 and fp16 operands seldom are, and the look spares their pack.
bool starts_bf16(const float* values, Eigen::Index rows, Eigen::Index cols);

// A buffer of bf16 bit patterns that grows and is never cleared (a vector's resize would fill
// what it adds with zeros, on one thread, before the pack overwrites it): a ProductOperand's
// (ProductOperand::Packing) and a PackedBlock's.
class PackBuffer {
 public:
  std::uint16_t* room_for(std::size_t n) {
    if (n > capacity_) {
      bits_ = std::make_unique_for_overwrite<std::uint16_t[]>(n);
      capacity_ = n;
    }
    return bits_.get();
  }
  const std::uint16_t* bits() const { return bits_.get(); }
  std::uint16_t* bits() { return bits_.get(); }

 private:
  std::unique_ptr<std::uint16_t[]> bits_;
  std::size_t capacity_ = 0;
};

// A block's bf16 bit patterns, packed column by column as a copy of the block would be stored, and
// their scan: an operand packed once for every product that takes it (a head's operands; the
// blocks bf16_block_product packs). Its storage is kept from one block to the next. Only where
// bf16_products_available().
class PackedBlock {
 public:
  void pack(const MatrixBlock& block);
  // The context x context block of a packed causal triangle (query j's values over keys 0..j at
  // j(j+1)/2, gpt_element.hpp's triangle_start) times `factor`, zero where a key comes after its
  // query: keys x queries, column j query j's, each value `triangle value * factor` rounded to
  // float32 as one multiply rounds it. The block gpt_pass.hpp's unpack_triangle makes, packed
  // without being made in float32.
  void pack_triangle(const float* triangle, Eigen::Index context, float factor);
  Eigen::Index rows() const { return rows_; }
  Eigen::Index cols() const { return cols_; }
  const Bf16Scan& scan() const { return scan_; }
  const std::uint16_t* bits() const { return bits_.bits(); }

 private:
  std::uint16_t* room_for(Eigen::Index rows, Eigen::Index cols);
  PackBuffer bits_;
  Eigen::Index rows_ = 0, cols_ = 0;
  Bf16Scan scan_;
};

// c = op(a) op(b) of packed blocks through the bf16 kernels, the calls bf16_block_product makes for
// such blocks (so the same bits): false (c untouched) where either is not all bf16 values or they
// fail bf16_kernels_exact.
bool bf16_packed_block_product(const PackedBlock& a, bool transpose_a, const PackedBlock& b, bool transpose_b, Eigen::Index columns_per_call,
                               float* c);
// The same as one of gemm's products (gemm_counts counts it), in its slices: the packed twin of
// gemm_block (gemm.cpp).
bool gemm_packed_blocks(const PackedBlock& a, bool transpose_a, const PackedBlock& b, bool transpose_b, float* c);

}  // namespace fpscope
