// Products of bfloat16 values through oneDNN's matmul (bf16_products.hpp). oneDNN multiplies
// D = S W; ours are column-major, so c (m x n) is computed as its row-major view
// c^T = op(b)^T op(a)^T: S = op(b)^T (n x k), W = op(a)^T (k x m), D = c^T (n x m), in slices of
// rows of D (columns of c). Operands are packed to bf16 bit patterns as they are stored (no
// transposition: the descriptors say the layout), scanned on the way (Bf16Scan), once per
// ProductOperand however many products take it.
#include "bf16_products.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string_view>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/parallel.hpp"

#if FPSCOPE_HAVE_ONEDNN
#include <immintrin.h>
#include <omp.h>

#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>
#endif

namespace fpscope {

namespace {
std::atomic<bool> allowed{[] {
  const char* setting = std::getenv("FPSCOPE_BF16_PRODUCTS");
  return setting == nullptr || std::string_view(setting) != "off";
}()};
}  // namespace

void set_gemm_bf16_products(bool allow) { allowed.store(allow, std::memory_order_relaxed); }

// What the products that took an operand found: not looked at yet, its bf16 bit patterns and scan,
// or that it is not all bf16 values.
// `in_pieces`: between start_pieces and finish_pieces, the scan merged under the mutex.
// `unwritten`: the values, where they were left unwritten (start_bits) and not made yet.
struct ProductOperand::Packing {
  enum class State : std::uint8_t { not_looked_at, in_pieces, bf16, not_bf16 } state = State::not_looked_at;
  Bf16Scan scan;
  PackBuffer bits;
  std::mutex merge_mutex;
  bool from_bits = false;
  std::span<float> unwritten;
  std::size_t count = 0;  // the values packed (start_pieces)
};

ProductOperand::ProductOperand(const Eigen::MatrixXf& values) : values_(&values), packing_(std::make_unique<Packing>()) {}
ProductOperand::~ProductOperand() = default;
ProductOperand::ProductOperand(ProductOperand&&) noexcept = default;
ProductOperand& ProductOperand::operator=(ProductOperand&&) noexcept = default;

const Eigen::MatrixXf& ProductOperand::values() const {
  Packing& packing = *packing_;
  if (!packing.from_bits) return *values_;
  if (packing.state == Packing::State::in_pieces) throw std::logic_error("the values of an operand whose bits are being made were asked for");
  const std::lock_guard lock(packing.merge_mutex);
  if (!packing.unwritten.empty()) {
    Context exact;  // bf16 -> float32 is exact: no flag, no random word
    bits_to_f32(formats::bf16, std::span<const std::uint16_t>(packing.bits.bits(), packing.unwritten.size()), packing.unwritten, exact);
    packing.unwritten = {};
  }
  return *values_;
}

bool starts_bf16(const float* values, Eigen::Index rows, Eigen::Index cols) {
  const auto* bits = reinterpret_cast<const std::uint32_t*>(values);
  for (Eigen::Index i = 0; i < std::min<Eigen::Index>(cols == 0 ? 0 : rows, 64); ++i)
    if ((bits[i] & 0xFFFFu) != 0) return false;
  return true;
}

std::uint16_t* PackedBlock::room_for(Eigen::Index rows, Eigen::Index cols) {
  rows_ = rows, cols_ = cols;
  return bits_.room_for(static_cast<std::size_t>(rows * cols));
}

#if !FPSCOPE_HAVE_ONEDNN

bool bf16_products_available() { return false; }
void PackedBlock::pack(const MatrixBlock&) { throw std::logic_error("PackedBlock: no bf16 kernels in this build"); }
void PackedBlock::pack_triangle(const float*, Eigen::Index, float) { throw std::logic_error("PackedBlock: no bf16 kernels in this build"); }
bool bf16_packed_block_product(const PackedBlock&, bool, const PackedBlock&, bool, Eigen::Index, float*) { return false; }
bool ProductOperand::start_pieces() { return false; }
bool ProductOperand::start_pieces(std::size_t) { return false; }
void ProductOperand::pack_piece(std::size_t, std::size_t) const {}
void ProductOperand::pack_piece(const float*, std::size_t, std::size_t) const {}
bool ProductOperand::start_bits(std::span<float>) { return false; }
std::span<std::uint16_t> ProductOperand::piece_bits(std::size_t, std::size_t) { throw std::logic_error("piece_bits: no bits are made here"); }
void ProductOperand::scan_bits(std::size_t, std::size_t) const {}
void ProductOperand::finish_pieces() {}
void ProductOperand::restart() {}
void onednn_on_calling_thread() {}
bool onednn_runs_avx512() { return false; }
std::string onednn_description() { return ""; }
std::uint64_t bf16_operands_packed() { return 0; }
bool bf16_product(const ProductOperand&, bool, const ProductOperand&, bool, Eigen::Index, const GemmEpilogue&, Eigen::MatrixXf&) { return false; }
bool bf16_block_product(const MatrixBlock&, bool, const MatrixBlock&, bool, Eigen::Index, float*) { return false; }

#else

namespace {

// Whether oneDNN runs `wanted`'s kernels here (its effective ISA is a set of bits).
bool onednn_runs(dnnl::cpu_isa wanted) {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa()), bits = static_cast<unsigned>(wanted);
  return (isa & bits) == bits;
}

// The processor's bf16 instructions, as oneDNN sees them.
bool hardware_bf16() {
  static const bool has = onednn_runs(dnnl::cpu_isa::avx512_core_bf16);
  return has;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
dnnl::memory::desc weights_desc(Eigen::Index k, Eigen::Index m, bool transposed) {
  return dnnl::memory::desc({k, m}, dt::bf16, transposed ? tag::ba : tag::ab);
}
dnnl::memory::desc destination_desc(Eigen::Index rows, Eigen::Index m) { return dnnl::memory::desc({rows, m}, dt::f32, tag::ab); }

// One matmul per shape: D (rows x m) = S (rows x k, row-major) W (k x m; row-major, or its
// transpose stored row-major), with the scratchpad ours so that threads can run it at once.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc source, weights, destination, scratchpad;
};

// A thread's memory objects for one matmul's arguments, made once and pointed at each call's
// data (set_data_handle): a head's product is one call, about a thousand a step at 4 x 256, and
// four memory objects made for each call are four aligned allocations and frees each time.
struct BoundArguments {
  dnnl::memory source, weights, destination, scratch;
};
BoundArguments& bound_arguments(const Matmul& mm);

// S is always row-major (run_slices transposes a slice of a column-major one): oneDNN runs a slice
// of a column-major S in another kernel than the whole of it (a strided slice in gemm:jit, a dense
// one in brg), and the two sum the same products in different orders (their bits differed at
// k = 784), so a product's bits would follow its slices, and the slices follow the threads.
// Row-major, every slice runs in the one kernel, the fastest of the three.
const Matmul* matmul_for(Eigen::Index rows, Eigen::Index k, Eigen::Index m, bool weights_transposed) {
  static std::mutex mutex;
  static std::map<std::tuple<Eigen::Index, Eigen::Index, Eigen::Index, bool>, Matmul> made;
  const std::lock_guard lock(mutex);
  const auto key = std::make_tuple(rows, k, m, weights_transposed);
  if (auto it = made.find(key); it != made.end()) return it->second.primitive ? &it->second : nullptr;
  Matmul& entry = made[key];
  try {
    dnnl::primitive_attr attributes;
    attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(dnnl::memory::desc({rows, k}, dt::bf16, tag::ab), weights_desc(k, m, weights_transposed),
                                                             destination_desc(rows, m)),
                                          attributes, cpu_engine());
    // Only a kernel on the bf16 instructions: oneDNN's reference code would take seconds.
    if (std::string_view(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    entry.primitive = dnnl::matmul(pd);
    entry.source = pd.src_desc();
    entry.weights = pd.weights_desc();
    entry.destination = pd.dst_desc();
    entry.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error&) {
    return nullptr;  // float32 then
  }
  return &entry;
}

BoundArguments& bound_arguments(const Matmul& mm) {
  thread_local std::map<const Matmul*, BoundArguments> bound;  // the entries of matmul_for's map: never removed
  const auto found = bound.find(&mm);
  if (found != bound.end()) return found->second;
  return bound[&mm] = BoundArguments{dnnl::memory(mm.source, cpu_engine(), nullptr), dnnl::memory(mm.weights, cpu_engine(), nullptr),
                                     dnnl::memory(mm.destination, cpu_engine(), nullptr), dnnl::memory(mm.scratchpad, cpu_engine(), nullptr)};
}

// Packs `columns` runs of `rows` float32 bit patterns, the runs `stride` apart, to bf16 (their high
// halves) one after another at `out`, scanning each (Bf16Scan); a contiguous array is one run.
// Called only where the processor has AVX512-BF16, so AVX-512 BW is there. 32 values at a time:
// their high halves gathered into one vector of words by a two-source permute, the exponent fields
// and the nonzero test read from those words (a float32 whose high half is +-0 but not its low
// half is no bf16 value: the low halves say so, and the scan's fields then matter to nothing). The
// accumulators are the loop's own variables: held in a struct passed by reference, GCC kept them
// on the stack, a store and a load every 16 values (perf annotate put half the pack's samples there).
// (GCC 12 warns inside its own headers, _mm512_reduce_* and _mm512_extracti64x4_epi64, about a
// deliberately undefined vector.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// 32 bf16 words (masked-off ones zero: field 0, not nonzero, not the largest) into the smallest
// nonzero and the largest exponent field, word by word.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void scan_words(__m512i words, __m512i& smallest, __m512i& largest) {
  const __m512i field = _mm512_and_si512(_mm512_srli_epi16(words, 7), _mm512_set1_epi16(0xFF));
  smallest = _mm512_mask_min_epu16(smallest, _mm512_test_epi16_mask(words, _mm512_set1_epi16(0x7FFF)), smallest, field);
  largest = _mm512_max_epu16(largest, field);
}
// The scan from its accumulators: the float32 patterns or-ed (32-bit lanes; their low halves
// count), the fields (16-bit lanes).
__attribute__((target("avx512f,avx512bw,avx512vl"))) Bf16Scan reduced(__m512i low, __m512i smallest, __m512i largest) {
  // Each 32-word accumulator as two vectors of 16 lanes.
  const __m512i smallest_low = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(smallest)),
                smallest_high = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(smallest, 1));
  const __m512i largest_low = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(largest)),
                largest_high = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(largest, 1));
  Bf16Scan scan;
  scan.low_bits = static_cast<std::uint32_t>(_mm512_reduce_or_epi32(low)) & 0xFFFFu;
  scan.smallest_field = static_cast<unsigned>(_mm512_reduce_min_epu32(_mm512_min_epu32(smallest_low, smallest_high)));
  scan.largest_field = static_cast<unsigned>(_mm512_reduce_max_epu32(_mm512_max_epu32(largest_low, largest_high)));
  return scan;
}
// 32 float32 bit patterns (x0's 16, then x1's) as the 32 bf16 words of their high halves, their
// low halves or-ed into `low` and the words scanned.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i packed_words(__m512i x0, __m512i x1, __m512i& low,
                                                                                                __m512i& smallest, __m512i& largest) {
  // Word i of the result is word 2i + 1 (the high half of value i) of the pair (x0, x1).
  const __m512i high_halves = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13,
                                               11, 9, 7, 5, 3, 1);
  low = _mm512_ternarylogic_epi32(low, x0, x1, 0xFE);  // low | x0 | x1
  const __m512i words = _mm512_permutex2var_epi16(x0, high_halves, x1);
  scan_words(words, smallest, largest);
  return words;
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) Bf16Scan pack_runs(const std::uint32_t* in, std::size_t rows, std::size_t columns,
                                                                        std::size_t stride, std::uint16_t* out) {
  __m512i low = _mm512_setzero_si512(), smallest = _mm512_set1_epi16(255), largest = _mm512_setzero_si512();
  const std::size_t whole = rows - rows % 32;
  const auto tail = static_cast<__mmask32>((std::uint64_t{1} << (rows % 32)) - 1);
  for (std::size_t column = 0; column < columns; ++column, in += stride, out += rows) {
    for (std::size_t i = 0; i < whole; i += 32)
      _mm512_storeu_si512(out + i, packed_words(_mm512_loadu_si512(in + i), _mm512_loadu_si512(in + i + 16), low, smallest, largest));
    if (tail != 0) {
      const __m512i x0 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(tail), in + whole);
      const __m512i x1 = _mm512_maskz_loadu_epi32(static_cast<__mmask16>(tail >> 16), in + whole + 16);
      _mm512_mask_storeu_epi16(out + whole, tail, packed_words(x0, x1, low, smallest, largest));
    }
  }
  return reduced(low, smallest, largest);
}
// pack_runs of the context x context block PackedBlock::pack_triangle describes, made on the way:
// 32 rows of a column at a time, each value the triangle's times the factor (VMULPS: one multiply
// rounded to nearest even, as the scalar one), rows past the query's zero.
__attribute__((target("avx512f,avx512bw,avx512vl"))) Bf16Scan pack_triangle_runs(const float* triangle, std::size_t context, float factor,
                                                                                 std::uint16_t* out) {
  const __m512 times = _mm512_set1_ps(factor);
  __m512i low = _mm512_setzero_si512(), smallest = _mm512_set1_epi16(255), largest = _mm512_setzero_si512();
  // The first n of 16 lanes (all for n >= 16).
  const auto lanes = [](std::size_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1); };
  for (std::size_t j = 0; j < context; ++j, out += context) {
    const float* in = triangle + j * (j + 1) / 2;
    const std::size_t values = j + 1;
    for (std::size_t i = 0; i < context; i += 32) {
      const __mmask16 first = lanes(values > i ? values - i : 0), second = lanes(values > i + 16 ? values - i - 16 : 0);
      const __m512i x0 = _mm512_castps_si512(_mm512_maskz_mul_ps(first, _mm512_maskz_loadu_ps(first, in + i), times));
      const __m512i x1 = _mm512_castps_si512(_mm512_maskz_mul_ps(second, _mm512_maskz_loadu_ps(second, in + i + 16), times));
      const __m512i words = packed_words(x0, x1, low, smallest, largest);
      if (i + 32 <= context) _mm512_storeu_si512(out + i, words);
      else _mm512_mask_storeu_epi16(out + i, static_cast<__mmask32>((std::uint64_t{1} << (context - i)) - 1), words);
    }
  }
  return reduced(low, smallest, largest);
}
// n bf16 bit patterns scanned as the float32 values they are: no low bits.
__attribute__((target("avx512f,avx512bw,avx512vl"))) Bf16Scan scan_bf16_bits(const std::uint16_t* in, std::size_t n) {
  __m512i smallest = _mm512_set1_epi16(255), largest = _mm512_setzero_si512();
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) scan_words(_mm512_loadu_si512(in + i), smallest, largest);
  if (i < n) scan_words(_mm512_maskz_loadu_epi16(static_cast<__mmask32>((std::uint64_t{1} << (n - i)) - 1), in + i), smallest, largest);
  return reduced(_mm512_setzero_si512(), smallest, largest);
}

// Eight columns of a column-major block of bf16 words, rows i .. i + 31 of each (`in` at row i of
// the first column, columns `stride` apart), as c[x] whose 128-bit lane L is the eight columns of
// row 8L + x: three rounds of in-lane unpacking, of words, dwords and qwords (the columns' pairs,
// fours and eights). After round one, lane L's dword u of a[2p + s1] is row 8L + 4 s1 + u; after
// round two, its qword u of b[4q + 2 s1 + s2] is row 8L + 4 s1 + 2 s2 + u.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void eight_columns(const std::uint16_t* in, std::size_t stride,
                                                                                              __m512i c[8]) {
  __m512i v[8], a[8], b[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) v[r] = _mm512_loadu_si512(in + static_cast<std::size_t>(r) * stride);
#pragma GCC unroll 4
  for (int p = 0; p < 4; ++p) {
    a[2 * p] = _mm512_unpacklo_epi16(v[2 * p], v[2 * p + 1]);
    a[2 * p + 1] = _mm512_unpackhi_epi16(v[2 * p], v[2 * p + 1]);
  }
#pragma GCC unroll 4
  for (int qs = 0; qs < 4; ++qs) {  // q = qs / 2, s1 = qs % 2
    const int q = qs / 2, s1 = qs % 2;
    b[4 * q + 2 * s1] = _mm512_unpacklo_epi32(a[4 * q + s1], a[4 * q + 2 + s1]);
    b[4 * q + 2 * s1 + 1] = _mm512_unpackhi_epi32(a[4 * q + s1], a[4 * q + 2 + s1]);
  }
#pragma GCC unroll 4
  for (int x = 0; x < 8; x += 2) {
    c[x] = _mm512_unpacklo_epi64(b[x / 2], b[4 + x / 2]);
    c[x + 1] = _mm512_unpackhi_epi64(b[x / 2], b[4 + x / 2]);
  }
}

// A column-major block of bf16 words (`rows` x k, element (i, j) at in[j * stride + i]) written
// row-major at `out` (element (i, j) at out[i * k + j]): the form of S whose slices oneDNN runs
// all in one kernel (matmul_for). 16 of S's columns by 32 of its rows at a time, transposed in
// registers: each eight columns unpacked (eight_columns), then one round of qword permutes joining
// a row's two halves. The rows past the last 32 and the columns past the last 16 one word at a time.
// Where k is a multiple of 512, out's rows are a multiple of 1 KiB apart and fall into a few of
// the L1 cache's sets: 32 rows of half-line stores evicted each other before the next 16 columns
// completed their lines (at k = 2048 two to four times slower). There each 32 rows are made in a
// block of the thread's whose rows are a line further apart, then copied out whole.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void transpose_words(const std::uint16_t* in, std::size_t rows, std::size_t k,
                                                                          std::size_t stride, std::uint16_t* out) {
  const std::size_t whole_rows = rows - rows % 32, whole_columns = k - k % 16;
  const bool staged = k % 512 == 0;
  const std::size_t staged_stride = k + 32;
  thread_local PackBuffer stage;
  std::uint16_t* const block = staged ? stage.room_for(32 * staged_stride) : nullptr;
  // Qwords of two vectors: lanes 0 and 1 of each, a row's halves side by side; then lanes 2 and 3.
  const __m512i first_lanes = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), last_lanes = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  // 32 rows at a time across all the columns: each line of `in` read whole once, each row of
  // `out` written front to back.
  for (std::size_t i0 = 0; i0 < whole_rows; i0 += 32) {
    // Row i0 + r of the output at first_row + r * row_stride (copied out after, where staged).
    std::uint16_t* const first_row = staged ? block : out + i0 * k;
    const std::size_t row_stride = staged ? staged_stride : k;
    for (std::size_t j0 = 0; j0 < whole_columns; j0 += 16) {
      __m512i low[8], high[8];  // columns j0 .. j0 + 7 and j0 + 8 .. j0 + 15
      eight_columns(in + j0 * stride + i0, stride, low);
      eight_columns(in + (j0 + 8) * stride + i0, stride, high);
      // Row 8L + x whole (16 columns, 256 bits): lane L of low[x], then of high[x].
#pragma GCC unroll 8
      for (int x = 0; x < 8; ++x) {
        const __m512i rows_0_8 = _mm512_permutex2var_epi64(low[x], first_lanes, high[x]);
        const __m512i rows_16_24 = _mm512_permutex2var_epi64(low[x], last_lanes, high[x]);
        std::uint16_t* row = first_row + static_cast<std::size_t>(x) * row_stride + j0;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), _mm512_castsi512_si256(rows_0_8));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 8 * row_stride), _mm512_extracti64x4_epi64(rows_0_8, 1));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 16 * row_stride), _mm512_castsi512_si256(rows_16_24));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 24 * row_stride), _mm512_extracti64x4_epi64(rows_16_24, 1));
      }
    }
    if (staged)  // k is a multiple of 16: the block holds the rows whole
      for (std::size_t r = 0; r < 32; ++r) std::memcpy(out + (i0 + r) * k, block + r * staged_stride, k * sizeof(std::uint16_t));
    for (std::size_t i = i0; i < i0 + 32; ++i)
      for (std::size_t j = whole_columns; j < k; ++j) out[i * k + j] = in[j * stride + i];
  }
  for (std::size_t i = whole_rows; i < rows; ++i)
    for (std::size_t j = 0; j < k; ++j) out[i * k + j] = in[j * stride + i];
}
#pragma GCC diagnostic pop

// Packs `m` (as stored) on the engine's threads, in pieces of 16384 values; stops early, with the
// scan not bf16, once any piece finds a value that is not a bf16 value.
std::atomic<std::uint64_t> packs{0};

Bf16Scan pack(const Eigen::MatrixXf& m, PackBuffer& out) {
  packs.fetch_add(1, std::memory_order_relaxed);
  const auto n = static_cast<std::size_t>(m.size());
  constexpr std::size_t piece = 16384;
  std::mutex merge_mutex;
  Bf16Scan scan;
  std::atomic<bool> not_bf16{false};
  const auto* bits = reinterpret_cast<const std::uint32_t*>(m.data());
  std::uint16_t* packed = out.room_for(n);
  parallel_for((n + piece - 1) / piece, 1, [&](std::size_t first, std::size_t last) {
    Bf16Scan local;
    for (std::size_t p = first; p < last && local.bf16(); ++p) {
      if (not_bf16.load(std::memory_order_relaxed)) return;
      local.merge(pack_runs(bits + p * piece, std::min(piece, n - p * piece), 1, 0, packed + p * piece));
    }
    if (!local.bf16()) not_bf16.store(true, std::memory_order_relaxed);
    const std::lock_guard lock(merge_mutex);
    scan.merge(local);
  });
  if (not_bf16.load()) scan.low_bits |= 1;
  return scan;
}

// The operand's scan, packing it on its first product: null when it is not all bf16 values.
const Bf16Scan* packed(const ProductOperand& operand) {
  using State = ProductOperand::Packing::State;
  ProductOperand::Packing& packing = operand.packing();
  if (packing.state == State::in_pieces) throw std::logic_error("a product took an operand whose packing in pieces was not finished");
  // (rows and cols, not values(): that would make values left unwritten)
  const auto holds = static_cast<std::size_t>(operand.rows() * operand.cols());
  if (packing.state == State::bf16 && packing.count != holds)
    throw std::logic_error("a product took an operand packed for " + std::to_string(packing.count) + " values that holds " + std::to_string(holds));
  if (packing.state == State::not_looked_at) {
    const Eigen::MatrixXf& values = operand.values();
    const bool bf16 = starts_bf16(values.data(), values.size(), 1);
    if (bf16) packing.scan = pack(values, packing.bits);
    packing.count = static_cast<std::size_t>(values.size());
    packing.state = bf16 && packing.scan.bf16() ? State::bf16 : State::not_bf16;
  }
  return packing.state == State::bf16 ? &packing.scan : nullptr;
}

}  // namespace

bool bf16_products_available() { return allowed.load(std::memory_order_relaxed) && hardware_bf16(); }

bool ProductOperand::start_pieces() { return start_pieces(static_cast<std::size_t>(values_->size())); }

bool ProductOperand::start_pieces(std::size_t count) {
  if (!bf16_products_available() || packing_->state != Packing::State::not_looked_at) return false;
  packing_->state = Packing::State::in_pieces;
  packing_->scan = Bf16Scan{};
  packing_->count = count;
  packing_->bits.room_for(count);
  return true;
}

void ProductOperand::pack_piece(std::size_t offset, std::size_t n) const { pack_piece(values_->data() + offset, offset, n); }

void ProductOperand::pack_piece(const float* piece, std::size_t offset, std::size_t n) const {
  if (packing_->state != Packing::State::in_pieces || packing_->from_bits)
    throw std::logic_error("pack_piece: the operand's packing in pieces was not started (or its values are made from its bits)");
  if (offset + n > packing_->count) throw std::logic_error("pack_piece: the piece runs past the operand");
  const auto* bits = reinterpret_cast<const std::uint32_t*>(piece);
  const Bf16Scan scan = pack_runs(bits, n, 1, 0, packing_->bits.bits() + offset);  // sized by start_pieces
  const std::lock_guard lock(packing_->merge_mutex);
  packing_->scan.merge(scan);
}

bool ProductOperand::start_bits(std::span<float> values) {
  if (values.data() != values_->data() || values.size() != static_cast<std::size_t>(values_->size()))
    throw std::logic_error("start_bits: the values given are not the operand's");
  if (!start_pieces()) return false;
  packing_->from_bits = true;
  packing_->unwritten = values;
  return true;
}

std::span<std::uint16_t> ProductOperand::piece_bits(std::size_t offset, std::size_t n) {
  if (packing_->state != Packing::State::in_pieces) throw std::logic_error("piece_bits: the operand's packing in pieces was not started");
  if (offset + n > packing_->count) throw std::logic_error("piece_bits: the piece runs past the operand");
  return {packing_->bits.bits() + offset, n};
}

void ProductOperand::scan_bits(std::size_t offset, std::size_t n) const {
  if (packing_->state != Packing::State::in_pieces) throw std::logic_error("scan_bits: the operand's packing in pieces was not started");
  if (offset + n > packing_->count) throw std::logic_error("scan_bits: the piece runs past the operand");
  const Bf16Scan scan = scan_bf16_bits(packing_->bits.bits() + offset, n);
  const std::lock_guard lock(packing_->merge_mutex);
  packing_->scan.merge(scan);
}

void ProductOperand::finish_pieces() {
  if (packing_->state != Packing::State::in_pieces) return;
  packs.fetch_add(1, std::memory_order_relaxed);
  packing_->state = packing_->scan.bf16() ? Packing::State::bf16 : Packing::State::not_bf16;
}

void ProductOperand::restart() {
  Packing& packing = *packing_;
  if (packing.state == Packing::State::in_pieces) throw std::logic_error("restart: the operand's pieces are being made");
  packing.state = Packing::State::not_looked_at;
  packing.scan = Bf16Scan{};
  packing.from_bits = false;
  packing.unwritten = {};
  packing.count = 0;
}

bool onednn_runs_avx512() { return onednn_runs(dnnl::cpu_isa::avx512_core); }

std::string onednn_description() {
  const dnnl_version_t* version = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {  // oneDNN's own names (dnnl_types.h)
    case dnnl::cpu_isa::sse41: isa = "sse41"; break;
    case dnnl::cpu_isa::avx: isa = "avx"; break;
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: isa = "isa " + std::to_string(static_cast<unsigned>(dnnl::get_effective_cpu_isa()));
  }
  return "oneDNN " + std::to_string(version->major) + "." + std::to_string(version->minor) + "." + std::to_string(version->patch) + " (" + isa +
         ")";
}

void onednn_on_calling_thread() {
  thread_local const bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
}

std::uint64_t bf16_operands_packed() { return packs.load(std::memory_order_relaxed); }

namespace {

// The product's calls on the calling thread, for slices [first, last) of c's columns: S's rows
// (op(b)^T, packed as stored: row-major, or column-major with rows `stride` apart) times W
// (op(a)^T, packed as stored), each slice `columns_per_call` rows of D = c^T. A slice of a
// column-major S is transposed first into a row-major block of its own (matmul_for says why):
// `columns` x k words, about 1/m of the call's work.
void run_slices(const std::uint16_t* s_data, Eigen::Index stride, const std::uint16_t* w_data, Eigen::Index m, Eigen::Index k,
                Eigen::Index n, Eigen::Index columns_per_call, const Matmul& full, const Matmul& tail, const GemmEpilogue& epilogue, float* c,
                std::size_t first, std::size_t last) {
  onednn_on_calling_thread();
  thread_local dnnl::stream stream(cpu_engine());
  thread_local std::vector<unsigned char> scratchpad;
  thread_local PackBuffer row_major_slice;
  for (auto slice = static_cast<Eigen::Index>(first); slice < static_cast<Eigen::Index>(last); ++slice) {
    const Eigen::Index column = slice * columns_per_call, columns = std::min(columns_per_call, n - column);
    const Matmul& mm = columns == std::min(n, columns_per_call) ? full : tail;
    if (scratchpad.size() < mm.scratchpad.get_size()) scratchpad.resize(mm.scratchpad.get_size());
    BoundArguments& arguments = bound_arguments(mm);
    // S's rows from `column` on: rows k apart (row-major), or the slice's part of each of S's k
    // columns (column-major), transposed.
    const std::uint16_t* source = s_data + (stride == 0 ? column * k : column);
    if (stride != 0) {
      std::uint16_t* transposed = row_major_slice.room_for(static_cast<std::size_t>(columns * k));
      transpose_words(source, static_cast<std::size_t>(columns), static_cast<std::size_t>(k), static_cast<std::size_t>(stride), transposed);
      source = transposed;
    }
    arguments.source.set_data_handle(const_cast<std::uint16_t*>(source));
    arguments.weights.set_data_handle(const_cast<std::uint16_t*>(w_data));
    arguments.destination.set_data_handle(c + column * m);
    arguments.scratch.set_data_handle(scratchpad.data());
    mm.primitive.execute(stream, {{DNNL_ARG_SRC, arguments.source},
                                  {DNNL_ARG_WEIGHTS, arguments.weights},
                                  {DNNL_ARG_DST, arguments.destination},
                                  {DNNL_ARG_SCRATCHPAD, arguments.scratch}});
    if (epilogue) {
      stream.wait();
      epilogue(c + column * m, column, columns);
    }
  }
  stream.wait();
}

// The matmuls for c's full slices and its last one: null where oneDNN has no bf16 kernel for them.
std::pair<const Matmul*, const Matmul*> matmuls_for(Eigen::Index m, Eigen::Index k, Eigen::Index n, bool transpose_a, Eigen::Index columns_per_call) {
  const Matmul* full = matmul_for(std::min(n, columns_per_call), k, m, transpose_a);
  const Matmul* tail = n % columns_per_call == 0 ? full : matmul_for(n % columns_per_call, k, m, transpose_a);
  if (full == nullptr || tail == nullptr) return {nullptr, nullptr};
  return {full, tail};
}


}  // namespace

bool bf16_product(const ProductOperand& a_operand, bool transpose_a, const ProductOperand& b_operand, bool transpose_b,
                  Eigen::Index columns_per_call, const GemmEpilogue& epilogue, Eigen::MatrixXf& c) {
  if (!bf16_products_available()) return false;
  const Eigen::Index m = c.rows(), n = c.cols(), k = transpose_a ? a_operand.rows() : a_operand.cols();
  // S = op(b)^T (n x k): b's storage as it is, row-major when b is k x n, column-major (rows n
  // apart) when b is n x k. W = op(a)^T (k x m): a's storage, row-major when a is m x k, its
  // transpose when a is k x m. D = c^T (n x m, row-major): c's storage.
  const Bf16Scan* b_scan = packed(b_operand);
  if (b_scan == nullptr) return false;
  const Bf16Scan* a_scan = packed(a_operand);
  if (a_scan == nullptr || !bf16_kernels_exact(*a_scan, *b_scan)) return false;
  const Eigen::Index slices = (n + columns_per_call - 1) / columns_per_call, stride = transpose_b ? n : 0;
  // Not a structured binding: Clang 14 refuses one captured by the lambda below.
  const std::pair<const Matmul*, const Matmul*> matmuls = matmuls_for(m, k, n, transpose_a, columns_per_call);
  const Matmul* full = matmuls.first;
  const Matmul* tail = matmuls.second;
  if (full == nullptr) return false;
  const std::uint16_t* s_data = b_operand.packing().bits.bits();
  const std::uint16_t* w_data = a_operand.packing().bits.bits();
  parallel_for(static_cast<std::size_t>(slices), 1, [&](std::size_t first, std::size_t last) {
    run_slices(s_data, stride, w_data, m, k, n, columns_per_call, *full, *tail, epilogue, c.data(), first, last);
  });
  return true;
}

void PackedBlock::pack(const MatrixBlock& block) {
  std::uint16_t* out = room_for(block.rows, block.cols);
  scan_ = pack_runs(reinterpret_cast<const std::uint32_t*>(block.data), static_cast<std::size_t>(block.rows), static_cast<std::size_t>(block.cols),
                    static_cast<std::size_t>(block.stride), out);
}

void PackedBlock::pack_triangle(const float* triangle, Eigen::Index context, float factor) {
  scan_ = pack_triangle_runs(triangle, static_cast<std::size_t>(context), factor, room_for(context, context));
}

bool bf16_packed_block_product(const PackedBlock& a, bool transpose_a, const PackedBlock& b, bool transpose_b, Eigen::Index columns_per_call,
                               float* c) {
  if (!bf16_kernels_exact(a.scan(), b.scan())) return false;
  const Eigen::Index m = transpose_a ? a.cols() : a.rows(), k = transpose_a ? a.rows() : a.cols(), n = transpose_b ? b.rows() : b.cols();
  const Eigen::Index slices = (n + columns_per_call - 1) / columns_per_call, stride = transpose_b ? n : 0;
  const auto [full, tail] = matmuls_for(m, k, n, transpose_a, columns_per_call);
  if (full == nullptr) return false;
  run_slices(b.bits(), stride, a.bits(), m, k, n, columns_per_call, *full, *tail, {}, c, 0, static_cast<std::size_t>(slices));
  return true;
}

bool bf16_block_product(const MatrixBlock& a, bool transpose_a, const MatrixBlock& b, bool transpose_b, Eigen::Index columns_per_call, float* c) {
  if (!bf16_products_available() || !starts_bf16(b.data, b.rows, b.cols) || !starts_bf16(a.data, a.rows, a.cols)) return false;
  // Each block packed as a copy of it would be stored (its columns one after another), so the
  // calls are those bf16_product makes for such copies.
  thread_local PackedBlock a_bits, b_bits;
  b_bits.pack(b);
  if (!b_bits.scan().bf16()) return false;
  a_bits.pack(a);
  return bf16_packed_block_product(a_bits, transpose_a, b_bits, transpose_b, columns_per_call, c);
}

#endif

}  // namespace fpscope
