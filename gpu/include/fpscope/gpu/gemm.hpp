// The CPU backend's matrix products: float32 GEMM through a runtime-dispatched library -- oneDNN's
// sgemm where the build has oneDNN and the processor AVX-512 (an fp32 training step 6-14% shorter
// than with OpenBLAS's, measured on an AVX-512 Zen 4; bench_train_torch.py times both; held to
// AVX2, oneDNN's was the slower by a third), OpenBLAS otherwise or when asked
// (set_gemm_float32_library) -- on operands the emulator has already rounded. fp16 / bf16 /
// FP8 values are float32 numbers, so every product of two of them is exact in float32 and the sums
// accumulate in float32, as on tensor cores. C is computed in fixed slices of 128 columns, one
// single-threaded library call each, spread over the engine's threads (parallel.hpp): the same
// calls on any number of threads, so the same bits. The summation order is the library's: the same
// with one library on one kind of processor, and not promised across libraries or kinds (kernels
// are chosen at run time), where the last bit of a sum may differ; every cast after it is still
// the emulator's.
//
// Where both operands hold bfloat16 values only (every float32 with its low 16 bits zero) and the
// processor multiplies bf16 in hardware (AVX512-BF16's VDPBF16PS, AMX), the product runs in
// oneDNN's bf16 kernels: the same exact products accumulated in float32, at twice the float32
// rate or more. Those instructions read subnormal inputs as zero and flush subnormal results, so
// a product goes there only when neither can happen: no operand is subnormal, and the binades of
// the two operands' smallest nonzero magnitudes add up to -112 or more -- every product and every
// partial sum is then a multiple of 2^-126 (bf16_products.hpp), so none is subnormal. Any other
// operands (float32 values, fp16 values that bf16 cannot hold, tiny gradients, NaN, infinity) go to
// the float32 library as before. The bf16 kernels' slices are wider where the threads are few (128
// to 512 columns, gemm.cpp): what they sum for an element does not depend on the slice, so the bits
// are still those of any number of threads.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

namespace fpscope {

// op(a) * op(b), op transposing where asked; the shapes must agree (std::invalid_argument).
Eigen::MatrixXf gemm(const Eigen::MatrixXf& a, bool transpose_a, const Eigen::MatrixXf& b, bool transpose_b);

// An operand of several products, packed for the bf16 kernels once: the first product that takes
// it there packs its values to bf16 bit patterns and scans them (bf16_products.hpp), the others
// reuse what that found -- a linear layer's weights and inputs serve its forward product and one
// backward product each, its output gradient both backward ones. It refers to `values`, which must
// stay as they are, and where they are, while it lives (from its first product on, or from
// start_pieces on).
//
// Or packed as its values are made: a cast that writes them piece by piece (the trainers' casts
// into bf16) packs each piece as it rounds it, instead of the first product reading the whole
// operand again. start_pieces() once, with the values at their final size; for each piece, on
// any threads, pieces not overlapping and together all the values, either pack_piece() of its
// rounded values or, where the rounding writes their bf16 bits itself in the same pass (the
// trainers' casts: round_f32_with_bits), piece_bits() then scan_bits(); finish_pieces() after the
// last. The products then take exactly what they would have packed themselves.
//
// Or made from bf16 bit patterns alone, where the products are all that read the values: a cast
// into bf16 writes each piece's bits straight into the pack (piece_bits, then scan_bits) and
// leaves the float32 values unwritten; they are made from the bits (exactly: a bf16 value's
// float32 is its bits shifted up by 16) the first time anything asks for values(), as a product
// that cannot take the bf16 kernels does. start_bits(values) in place of start_pieces().
class ProductOperand {
 public:
  explicit ProductOperand(const Eigen::MatrixXf& values);
  ~ProductOperand();
  ProductOperand(ProductOperand&&) noexcept;
  ProductOperand& operator=(ProductOperand&&) noexcept;
  // The values, made from the bits first where they were left unwritten (start_bits); not while
  // the pieces are being made.
  const Eigen::MatrixXf& values() const;
  Eigen::Index rows() const { return values_->rows(); }
  Eigen::Index cols() const { return values_->cols(); }
  // Whether the operand is `m`'s (its values, or its bits where values() would make them).
  bool refers_to(const Eigen::MatrixXf& m) const { return values_ == &m; }

  // False (and nothing to do) where products never go to the bf16 kernels here, or the operand
  // has been looked at already.
  bool start_pieces();
  // The same for values not made yet: `count` of them, made (or moved) into the matrix the
  // operand refers to before a product takes it (a product finding another count throws).
  bool start_pieces(std::size_t count);
  // values().data()[offset, offset + n), as they are now (final).
  void pack_piece(std::size_t offset, std::size_t n) const;
  // The same where those values are at `piece` now (the matrix does not hold them yet).
  void pack_piece(const float* piece, std::size_t offset, std::size_t n) const;
  // start_pieces() with the values to be left unwritten: `values` is the storage values() refers
  // to, writable, where they are made if they are asked for.
  bool start_bits(std::span<float> values);
  // Where the bits of values [offset, offset + n) go, for the cast to write; then scan_bits. Also
  // in place of pack_piece (after start_pieces), where the cast writes the values and their bits
  // in one pass.
  std::span<std::uint16_t> piece_bits(std::size_t offset, std::size_t n);
  void scan_bits(std::size_t offset, std::size_t n) const;
  void finish_pieces();
  // The operand's values changed (or will be made again): its packing is forgotten, to be made
  // afresh as for a new operand, its storage kept. Not while the pieces are being made.
  void restart();

  struct Packing;  // bf16_products.cpp
  Packing& packing() const { return *packing_; }

 private:
  const Eigen::MatrixXf* values_;
  std::unique_ptr<Packing> packing_;
};

// What a product's caller does to each slice of C's columns as soon as it is made, on the thread
// that made it, while the slice is in that core's cache (a bias, a cast, an activation): `columns`
// columns from `first_column` on, columns * rows(C) contiguous values from `values` (C is
// column-major). The slices come in any order, and an epilogue must not depend on their widths
// (the bf16 kernels' follow the threads).
using GemmEpilogue = std::function<void(float* values, Eigen::Index first_column, Eigen::Index columns)>;

// The epilogue on a matrix already made, in the slices a product of its shape would make, on
// the threads: what the fused epilogue does, where something must come between product and epilogue.
void run_epilogue(Eigen::MatrixXf& c, const GemmEpilogue& epilogue);

// The same product of prepared operands (the same bits as gemm on their values), with an epilogue
// where one is given.
Eigen::MatrixXf gemm(const ProductOperand& a, bool transpose_a, const ProductOperand& b, bool transpose_b,
                     const GemmEpilogue& epilogue = {});

// A block of a column-major float32 matrix: `rows` x `cols` values from `data`, columns `stride`
// values apart (a head's rows of a features x tokens matrix).
struct MatrixBlock {
  const float* data;
  Eigen::Index rows, cols, stride;
};
// c (m x n, contiguous column-major) = op(a) op(b) on the calling thread alone, for small products
// made inside a parallel job (attention's heads): the same bits as gemm on copies of the blocks,
// without the copies; the shapes must agree (std::invalid_argument).
void gemm_block(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, float* c);

// How many products went each way since the program started (for tests and benchmarks).
struct GemmCounts {
  std::uint64_t float32 = 0;  // the float32 library (gemm_float32_library)
  std::uint64_t bf16 = 0;     // oneDNN's bf16 kernels
  std::uint64_t bf16_packs = 0;  // operands packed for them (once per ProductOperand)
  std::uint64_t multiply_adds = 0;  // m n k summed over the products made, in either kind
};
GemmCounts gemm_counts();
// Whether this build and processor multiply bf16 in hardware through oneDNN (and it is not turned off).
bool gemm_has_bf16_products();
// Turns the bf16 kernels off (false) or back on: the products then all run in float32, for
// comparisons; the environment variable FPSCOPE_BF16_PRODUCTS=off does the same from the start.
void set_gemm_bf16_products(bool allowed);

// The library float32 products run in: oneDNN's sgemm where the build has oneDNN and oneDNN
// runs AVX-512 on this processor, else OpenBLAS.
// set_gemm_float32_library(openblas) sends them to OpenBLAS (onednn: back, where built in), for
// comparisons; the environment variable FPSCOPE_FLOAT32_PRODUCTS=openblas does so from the start.
// Either gives float32 sums of the same products; their orders, so their last bits, may differ.
enum class Float32Library { openblas, onednn };
void set_gemm_float32_library(Float32Library library);
Float32Library gemm_float32_library();
std::string_view float32_library_name(Float32Library library);  // "OpenBLAS", "oneDNN"
// How float32 products are cut into single-threaded library calls now: slices of
// `slice_columns` columns, one call each, or (whole_runs) a thread's run of consecutive slices in
// one call, where the library sums an element the same way in either (gemm.cpp says where).
struct Float32Calls {
  Eigen::Index slice_columns;
  bool whole_runs;
};
Float32Calls float32_calls_now();
// Where this process's CPU products run now, library, version and kernels, for a run log's
// header (the same operands give other last bits in other kernels): "float32: oneDNN 2.6.3 sgemm
// (avx512_core_bf16); bf16: oneDNN 2.6.3 (avx512_core_bf16)", or "float32: OpenBLAS 0.3.21
// (Haswell); bf16: in float32".
std::string cpu_products_description();

// The engine's threads for the products and the element-wise passes (0: all cores), and how many
// it uses now. The count changes the speed, never a bit.
void set_gemm_threads(int threads);
// OpenBLAS starts its worker threads as the program loads, before main; fpscope runs it on one
// thread (its products are sliced over fpscope's own pool), and under a memory limit (ulimit -v)
// those idle workers retry their buffers forever, so that the process never exits. Called first
// in a program's main: where OPENBLAS_NUM_THREADS is not set, the program is run again with it set
// to 1 (execv of /proc/self/exe, the same arguments), so no worker is started; where it is set,
// or the exec fails, it returns and nothing changes.
void start_without_blas_workers(char** argv);
int gemm_threads();
// The cores OpenBLAS sees: what threads 0 means.
int gemm_cores();

}  // namespace fpscope
