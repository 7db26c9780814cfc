// The CPU backend's GEMMs (gemm.hpp): float32 through oneDNN's sgemm where the build has oneDNN
// (OpenBLAS's CBLAS interface otherwise, or when asked), and products of bfloat16 values through
// oneDNN's bf16 kernels where the processor has them and the operands allow it (bf16_products.cpp
// decides).
#include "fpscope/gpu/gemm.hpp"

#include <unistd.h>
#include "fpscope/gpu/parallel.hpp"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#if FPSCOPE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include "bf16_products.hpp"

namespace fpscope {

namespace {
// Columns of C per library call (a is packed once per call: about 1/128 of the products; 64 and 256 measured slower).
constexpr Eigen::Index columns_per_call = 128;
// Columns of C per call of the bf16 kernels: as many 128-column slices as give every thread one
// slice or more, at most 512 columns. Each call copies op(a) into the kernel's own blocked layout,
// so wider slices copy it fewer times (a 784-1024-1024-10 MLP's bf16 step 5-6% shorter than with
// 128 columns, a 4 x 256 GPT's 2-3%, on one thread or two). What a call sums for an element of
// C does not depend on how many columns the call makes (the tests hold products made on 1 to 8
// threads to the same bits), so the slices may follow the threads and the bits do not.
Eigen::Index bf16_columns_per_call(Eigen::Index n) {
  const auto threads = static_cast<Eigen::Index>(parallel_threads());
  return std::clamp<Eigen::Index>(columns_per_call * (n / (columns_per_call * threads)), columns_per_call, 4 * columns_per_call);
}
// OpenBLAS runs single-threaded from the first product on (set_gemm_threads keeps it so).
const bool single_threaded_openblas = [] {
  openblas_set_num_threads(1);
  return true;
}();
std::atomic<std::uint64_t> float32_products{0}, bf16_products_made{0}, multiply_adds{0};
// A product of m x k by k x n made in `kind`'s library, counted.
void count_product(std::atomic<std::uint64_t>& kind, Eigen::Index m, Eigen::Index n, Eigen::Index k) {
  kind.fetch_add(1, std::memory_order_relaxed);
  multiply_adds.fetch_add(static_cast<std::uint64_t>(m) * static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(k), std::memory_order_relaxed);
}

// Whether float32 products run in oneDNN's sgemm: built with oneDNN, on a processor where oneDNN
// runs AVX-512, and not sent to OpenBLAS (set_gemm_float32_library, FPSCOPE_FLOAT32_PRODUCTS=openblas).
// On AVX2 alone its sgemm is the slower of the two (oneDNN held to AVX2 with ONEDNN_MAX_CPU_ISA=AVX2
// against OpenBLAS's Haswell kernels on the same processor: docs/performance.md).
std::atomic<bool> float32_in_onednn{FPSCOPE_HAVE_ONEDNN != 0 && onednn_runs_avx512() && [] {
  const char* setting = std::getenv("FPSCOPE_FLOAT32_PRODUCTS");
  return setting == nullptr || std::string_view(setting) != "openblas";
}()};

// OpenBLAS (driver/others/memory.c) lends each call in flight a buffer from a pool, allocating a
// buffer the first time the pool has none free (128 MiB of address space and a page on x86-64)
// and keeping it. Where that allocation fails, OpenBLAS 0.3.21 retries it for ever: a process at
// its memory limit (ulimit -v, strict overcommit) would hang in a product where it should say it
// ran out of memory. So before a product reaches OpenBLAS, the buffers its calls can hold at once
// are taken here (see take_openblas_buffers), each after a malloc of it and some room besides
// showed that it fits, and handed back to the pool, where the calls find them. Its interface is
// OpenBLAS's own: blas_memory_alloc(0) takes a buffer, blas_memory_free gives it back.
extern "C" void* blas_memory_alloc(int procpos);
extern "C" void blas_memory_free(void* buffer);
constexpr std::size_t openblas_buffer_bytes = (std::size_t{128} << 20) + 4096;
constexpr std::size_t openblas_room_besides = std::size_t{16} << 20;
std::mutex openblas_buffers_mutex;
std::atomic<int> openblas_buffers_taken{0};

// Makes sure the pool holds `callers` buffers; std::bad_alloc where one more does not fit. Taking
// them all at once makes the pool allocate only those it lacks (fewer while another product holds
// some: then it allocates one more than it needs, each checked all the same).
void take_openblas_buffers(int callers) {
  if (openblas_buffers_taken.load(std::memory_order_acquire) >= callers) return;
  const std::lock_guard one_at_a_time(openblas_buffers_mutex);
  if (openblas_buffers_taken.load(std::memory_order_relaxed) >= callers) return;
  std::vector<void*> held;
  held.reserve(static_cast<std::size_t>(callers));
  const auto hand_back = [&held] {
    for (void* buffer : held) blas_memory_free(buffer);
  };
  for (int taken = 0; taken < callers; ++taken) {
    void* probe = std::malloc(openblas_buffer_bytes + openblas_room_besides);
    if (probe == nullptr) {
      hand_back();
      throw std::bad_alloc();
    }
    std::free(probe);
    held.push_back(blas_memory_alloc(0));
  }
  hand_back();
  openblas_buffers_taken.store(callers, std::memory_order_release);
}

// What a product does before its float32 library calls: where they go to OpenBLAS, one buffer for
// each of the engine's threads and one more (a trainer on a thread of its own, the app's
// baseline, calls on it while the engine's threads are busy with another's product).
void prepare_float32_calls() {
  if (!float32_in_onednn.load(std::memory_order_relaxed)) take_openblas_buffers(parallel_threads() + 1);
}

}  // namespace

// How float32 products are cut into library calls (gemm.hpp's Float32Calls). Each call packs
// op(a) into the library's own layout, so fewer, wider calls pack it fewer times; but every sum's
// order must be the same on any number of threads. OpenBLAS's sgemm kernels for the cores named
// below make the columns of C in groups of 12 (Sandybridge's in groups of 4 or fewer) counted
// from the call's first, the narrower last group its own way: an element's sum then depends only
// on where its column falls among those groups. Calls that each start at a multiple of 24 columns
// therefore give every element the bits of one call for all of C, whatever their widths. There
// each thread makes its whole run of 24-column slices in one call, packing op(a) once
// (docs/performance.md measures it); tests/gpu/test_gemm.cpp holds the kernels of the machine's
// core to it. Elsewhere (oneDNN's sgemm, OpenBLAS's other cores, whose groups were not checked)
// each call makes one slice of 128 columns, claimed one at a time: narrower ones repack op(a)
// more often, wider ones measured slower.
Float32Calls float32_calls_now() {
  static const bool openblas_groups_known = [] {
    const std::string_view core = openblas_get_corename();
    for (const std::string_view whole_runs_core : {"Zen", "Haswell", "Sandybridge"})
      if (core == whole_runs_core) return true;
    return false;
  }();
  if (float32_in_onednn.load(std::memory_order_relaxed) || !openblas_groups_known) return {columns_per_call, false};
  return {24, true};
}

namespace {

// Columns [column, column + columns) of C = op(a) op(b) (m x n, column-major, leading dimension
// m) in one single-threaded library call. Eigen's default storage is column-major, as CBLAS's
// ColMajor: leading dimensions are the strides.
void float32_columns(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, Eigen::Index m, Eigen::Index k,
                     Eigen::Index column, Eigen::Index columns, float* c) {
  // op(b)'s columns from `column` on: b's columns, or for a transposed b its rows.
  const float* b_slice = transpose_b ? b.data + column : b.data + column * b.stride;
#if FPSCOPE_HAVE_ONEDNN
  if (float32_in_onednn.load(std::memory_order_relaxed)) {
    // oneDNN's sgemm is row-major: the column-major C (m x columns) is the row-major C^T =
    // op(b)^T op(a)^T, each operand read as stored. With beta 0 it does not read C.
    onednn_on_calling_thread();
    const dnnl_status_t status = dnnl_sgemm(transpose_b ? 'T' : 'N', transpose_a ? 'T' : 'N', columns, m, k, 1.0f, b_slice, b.stride, a.data, a.stride,
                                            0.0f, c + column * m, m);
    if (status == dnnl_out_of_memory) throw std::bad_alloc();  // its packing buffers: the one sentence of running out of memory
    if (status != dnnl_success)
      throw std::runtime_error("gemm: oneDNN's sgemm refused a " + std::to_string(m) + "x" + std::to_string(k) + " by " + std::to_string(k) +
                               "x" + std::to_string(columns) + " product (status " + std::to_string(static_cast<int>(status)) + ")");
    return;
  }
#endif
  cblas_sgemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(columns), static_cast<blasint>(k), 1.0f, a.data, static_cast<blasint>(a.stride), b_slice,
              static_cast<blasint>(b.stride), 0.0f, c + column * m, static_cast<blasint>(m));
}

// Slices [first, last) of C (float32_calls_now's slices) in as few calls as the slicing allows, the
// columns of each handed to `made` (column, columns) once it returns.
template <typename Made>
void float32_slices(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, Eigen::Index m, Eigen::Index k,
                    Eigen::Index n, float* c, Float32Calls calls, Eigen::Index first, Eigen::Index last, Made&& made) {
  const Eigen::Index per_call = calls.whole_runs ? last - first : 1;
  for (Eigen::Index slice = first; slice < last; slice += per_call) {
    const Eigen::Index column = slice * calls.slice_columns;
    const Eigen::Index columns = std::min(n, std::min(last, slice + per_call) * calls.slice_columns) - column;
    float32_columns(a, transpose_a, b, transpose_b, m, k, column, columns, c);
    made(column, columns);
  }
}
}  // namespace

std::string cpu_products_description() {
  std::string float32;
  if (gemm_float32_library() == Float32Library::onednn) {
    float32 = onednn_description();
    float32.insert(float32.find(" ("), " sgemm");
  } else {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." and the kernels' core, "Haswell".
    const std::string config = openblas_get_config();
    const std::size_t version_end = config.find(' ', config.find(' ') + 1);
    float32 = config.substr(0, version_end) + " (" + openblas_get_corename() + ")";
  }
  return "float32: " + float32 + "; bf16: " + (gemm_has_bf16_products() ? onednn_description() : std::string("in float32"));
}

Eigen::MatrixXf gemm(const Eigen::MatrixXf& a, bool transpose_a, const Eigen::MatrixXf& b, bool transpose_b) {
  return gemm(ProductOperand(a), transpose_a, ProductOperand(b), transpose_b);
}

Eigen::MatrixXf gemm(const ProductOperand& a_operand, bool transpose_a, const ProductOperand& b_operand, bool transpose_b,
                     const GemmEpilogue& epilogue) {
  const Eigen::Index m = transpose_a ? a_operand.cols() : a_operand.rows(), k = transpose_a ? a_operand.rows() : a_operand.cols();
  const Eigen::Index kb = transpose_b ? b_operand.cols() : b_operand.rows(), n = transpose_b ? b_operand.rows() : b_operand.cols();
  if (k != kb)
    throw std::invalid_argument("gemm: op(a) is " + std::to_string(m) + "x" + std::to_string(k) + ", op(b) " + std::to_string(kb) + "x" +
                                std::to_string(n));
  Eigen::MatrixXf c(m, n);
  if (m == 0 || n == 0) return c;
  if (k == 0) {
    c.setZero();
    if (epilogue) epilogue(c.data(), 0, n);
    return c;
  }
  if (bf16_product(a_operand, transpose_a, b_operand, transpose_b, bf16_columns_per_call(n), epilogue, c)) {
    count_product(bf16_products_made, m, n, k);
    return c;
  }
  count_product(float32_products, m, n, k);
  prepare_float32_calls();
  const Eigen::MatrixXf& a = a_operand.values();  // made here where only their bits were
  const Eigen::MatrixXf& b = b_operand.values();
  // C is made in fixed slices of columns (float32_calls_now), in single-threaded library calls on
  // the element threads: every sum's order is the same on any number of threads.
  const Float32Calls calls = float32_calls_now();
  const Eigen::Index slices = (n + calls.slice_columns - 1) / calls.slice_columns;
  const MatrixBlock a_all{a.data(), a.rows(), a.cols(), a.rows()}, b_all{b.data(), b.rows(), b.cols(), b.rows()};
  // Whole runs: one per thread, each call packing op(a) once (a thread the system sets aside holds
  // up its share, where single slices would go to the others), else slices claimed one at a time.
  const std::size_t grain = calls.whole_runs ? std::max<std::size_t>(1, static_cast<std::size_t>(slices) / static_cast<std::size_t>(parallel_threads())) : 1;
  parallel_for(static_cast<std::size_t>(slices), grain, [&](std::size_t first, std::size_t last) {
    float32_slices(a_all, transpose_a, b_all, transpose_b, m, k, n, c.data(), calls, static_cast<Eigen::Index>(first), static_cast<Eigen::Index>(last),
                   [&](Eigen::Index column, Eigen::Index columns) {
                     if (epilogue) epilogue(c.data() + column * m, column, columns);
                   });
  });
  return c;
}

void gemm_block(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, float* c) {
  const Eigen::Index m = transpose_a ? a.cols : a.rows, k = transpose_a ? a.rows : a.cols;
  const Eigen::Index kb = transpose_b ? b.cols : b.rows, n = transpose_b ? b.rows : b.cols;
  if (k != kb)
    throw std::invalid_argument("gemm_block: op(a) is " + std::to_string(m) + "x" + std::to_string(k) + ", op(b) " + std::to_string(kb) + "x" +
                                std::to_string(n));
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill_n(c, m * n, 0.0f);
    return;
  }
  if (bf16_block_product(a, transpose_a, b, transpose_b, columns_per_call, c)) {
    count_product(bf16_products_made, m, n, k);
    return;
  }
  count_product(float32_products, m, n, k);
  prepare_float32_calls();
  // gemm's calls for copies of the blocks: OpenBLAS reads each operand through its leading
  // dimension, so the block's stride in place of the copy's row count changes no bit.
  const Float32Calls calls = float32_calls_now();
  float32_slices(a, transpose_a, b, transpose_b, m, k, n, c, calls, 0, (n + calls.slice_columns - 1) / calls.slice_columns,
                 [](Eigen::Index, Eigen::Index) {});
}

bool gemm_packed_blocks(const PackedBlock& a, bool transpose_a, const PackedBlock& b, bool transpose_b, float* c) {
  if (!bf16_packed_block_product(a, transpose_a, b, transpose_b, columns_per_call, c)) return false;
  count_product(bf16_products_made, transpose_a ? a.cols() : a.rows(), transpose_b ? b.rows() : b.cols(), transpose_a ? a.rows() : a.cols());
  return true;
}

void run_epilogue(Eigen::MatrixXf& c, const GemmEpilogue& epilogue) {
  const Eigen::Index m = c.rows(), n = c.cols(), slices = (n + columns_per_call - 1) / columns_per_call;
  parallel_for(static_cast<std::size_t>(slices), 1, [&](std::size_t first, std::size_t last) {
    for (auto slice = static_cast<Eigen::Index>(first); slice < static_cast<Eigen::Index>(last); ++slice) {
      const Eigen::Index column = slice * columns_per_call;
      epilogue(c.data() + column * m, column, std::min(columns_per_call, n - column));
    }
  });
}

GemmCounts gemm_counts() {
  return {float32_products.load(std::memory_order_relaxed), bf16_products_made.load(std::memory_order_relaxed), bf16_operands_packed(),
          multiply_adds.load(std::memory_order_relaxed)};
}

bool gemm_has_bf16_products() { return bf16_products_available(); }

void set_gemm_float32_library(Float32Library library) {
  float32_in_onednn.store(FPSCOPE_HAVE_ONEDNN != 0 && library == Float32Library::onednn, std::memory_order_relaxed);
}

Float32Library gemm_float32_library() {
  return float32_in_onednn.load(std::memory_order_relaxed) ? Float32Library::onednn : Float32Library::openblas;
}

std::string_view float32_library_name(Float32Library library) { return library == Float32Library::onednn ? "oneDNN" : "OpenBLAS"; }

void set_gemm_threads(int threads) {
  openblas_set_num_threads(1);  // its own threads would spin between products, on the cores the element passes need
  set_parallel_threads(threads > 0 ? threads : openblas_get_num_procs());
}

int gemm_threads() { return parallel_threads(); }

int gemm_cores() { return openblas_get_num_procs(); }

void start_without_blas_workers(char** argv) {
  if (std::getenv("OPENBLAS_NUM_THREADS") != nullptr) return;
  if (::setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OPENBLAS_NUM_THREADS");  // the exec failed: go on as this process is
}

}  // namespace fpscope
