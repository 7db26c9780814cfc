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
#include <string_view>

#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/parallel.hpp"

#if FPSCOPE_HAVE_ONEDNN
#include <immintrin.h>
#include <omp.h>

#include <map>
#include <memory>
#include <mutex>
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

namespace {
// A buffer of bf16 bit patterns that grows and is never cleared (a vector's resize would fill
// what it adds with zeros, on one thread, before the pack overwrites it).
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

 private:
  std::unique_ptr<std::uint16_t[]> bits_;
  std::size_t capacity_ = 0;
};

}  // namespace

// What the products that took an operand found: not looked at yet, its bf16 bit patterns and scan,
// or that it is not all bf16 values.
struct ProductOperand::Packing {
  enum class State : std::uint8_t { not_looked_at, bf16, not_bf16 } state = State::not_looked_at;
  Bf16Scan scan;
  PackBuffer bits;
};

ProductOperand::ProductOperand(const Eigen::MatrixXf& values) : values_(&values), packing_(std::make_unique<Packing>()) {}
ProductOperand::~ProductOperand() = default;
ProductOperand::ProductOperand(ProductOperand&&) noexcept = default;
ProductOperand& ProductOperand::operator=(ProductOperand&&) noexcept = default;

#if !FPSCOPE_HAVE_ONEDNN

bool bf16_products_available() { return false; }
std::uint64_t bf16_operands_packed() { return 0; }
bool bf16_product(const ProductOperand&, bool, const ProductOperand&, bool, Eigen::Index, const GemmEpilogue&, Eigen::MatrixXf&) { return false; }

#else

namespace {

// The processor's bf16 instructions, as oneDNN sees them (its effective ISA is a set of bits).
bool hardware_bf16() {
  static const bool has = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return has;
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;
dnnl::memory::desc source_desc(Eigen::Index rows, Eigen::Index k, Eigen::Index stride) {
  return stride == 0 ? dnnl::memory::desc({rows, k}, dt::bf16, tag::ab) : dnnl::memory::desc({rows, k}, dt::bf16, dnnl::memory::dims{1, stride});
}
dnnl::memory::desc weights_desc(Eigen::Index k, Eigen::Index m, bool transposed) {
  return dnnl::memory::desc({k, m}, dt::bf16, transposed ? tag::ba : tag::ab);
}
dnnl::memory::desc destination_desc(Eigen::Index rows, Eigen::Index m) { return dnnl::memory::desc({rows, m}, dt::f32, tag::ab); }

// One matmul per shape: D (rows x m) = S (rows x k, row-major) W (k x m; row-major, or its
// transpose stored row-major), with the scratchpad ours so that threads can run it at once.
struct Matmul {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
};

// `source_stride`: 0 for a row-major S, else S is column-major with that leading dimension (op(b)^T
// when b is transposed: b's storage as it is, rows of S `source_stride` apart).
const Matmul* matmul_for(Eigen::Index rows, Eigen::Index k, Eigen::Index m, bool weights_transposed, Eigen::Index source_stride) {
  static std::mutex mutex;
  static std::map<std::tuple<Eigen::Index, Eigen::Index, Eigen::Index, bool, Eigen::Index>, Matmul> made;
  const std::lock_guard lock(mutex);
  const auto key = std::make_tuple(rows, k, m, weights_transposed, source_stride);
  if (auto it = made.find(key); it != made.end()) return it->second.primitive ? &it->second : nullptr;
  Matmul& entry = made[key];
  try {
    dnnl::primitive_attr attributes;
    attributes.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(source_desc(rows, k, source_stride), weights_desc(k, m, weights_transposed),
                                                             destination_desc(rows, m)),
                                          attributes, cpu_engine());
    // Only a kernel on the bf16 instructions: oneDNN's reference code would take seconds.
    if (std::string_view(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    entry.primitive = dnnl::matmul(pd);
    entry.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error&) {
    return nullptr;  // float32 then
  }
  return &entry;
}

// The calling thread runs oneDNN on itself alone: the slices are already spread over the threads.
void one_openmp_thread() {
  thread_local const bool set = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)set;
}

// Packs n float32 bit patterns to bf16 (their high halves), scanning each (Bf16Scan). Called only
// where the processor has AVX512-BF16, so AVX-512 BW is there.
// (GCC 12 warns inside its own _mm512_reduce_* headers about a deliberately undefined vector.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl"))) Bf16Scan pack_run(const std::uint32_t* in, std::uint16_t* out, std::size_t n) {
  __m512i low = _mm512_setzero_si512(), smallest = _mm512_set1_epi32(255), largest = _mm512_setzero_si512();
  const __m512i low_half = _mm512_set1_epi32(0xFFFF), field_mask = _mm512_set1_epi32(0xFF), magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_loadu_si512(in + i);
    low = _mm512_ternarylogic_epi32(low, x, low_half, 0xF8);  // low | (x & low_half)
    const __m512i field = _mm512_and_si512(_mm512_srli_epi32(x, 23), field_mask);
    smallest = _mm512_mask_min_epu32(smallest, _mm512_test_epi32_mask(x, magnitude), smallest, field);
    largest = _mm512_max_epu32(largest, field);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(x, 16)));
  }
  Bf16Scan scan;
  scan.low_bits = static_cast<std::uint32_t>(_mm512_reduce_or_epi32(low));
  scan.smallest_field = static_cast<unsigned>(_mm512_reduce_min_epu32(smallest));
  scan.largest_field = static_cast<unsigned>(_mm512_reduce_max_epu32(largest));
  for (; i < n; ++i) {
    scan.add(in[i]);
    out[i] = static_cast<std::uint16_t>(in[i] >> 16);
  }
  return scan;
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
      local.merge(pack_run(bits + p * piece, packed + p * piece, std::min(piece, n - p * piece)));
    }
    if (!local.bf16()) not_bf16.store(true, std::memory_order_relaxed);
    const std::lock_guard lock(merge_mutex);
    scan.merge(local);
  });
  if (not_bf16.load()) scan.low_bits |= 1;
  return scan;
}

// The operand's scan, packing it on its first product: null when it is not all bf16 values.
// float32 and fp16 operands seldom are: a look at the first few values spares the pack.
const Bf16Scan* packed(const ProductOperand& operand) {
  using State = ProductOperand::Packing::State;
  ProductOperand::Packing& packing = operand.packing();
  if (packing.state == State::not_looked_at) {
    const Eigen::MatrixXf& values = operand.values();
    const auto* bits = reinterpret_cast<const std::uint32_t*>(values.data());
    bool bf16 = true;
    for (Eigen::Index i = 0; i < std::min<Eigen::Index>(values.size(), 64) && bf16; ++i) bf16 = (bits[i] & 0xFFFFu) == 0;
    if (bf16) packing.scan = pack(values, packing.bits);
    packing.state = bf16 && packing.scan.bf16() ? State::bf16 : State::not_bf16;
  }
  return packing.state == State::bf16 ? &packing.scan : nullptr;
}

}  // namespace

bool bf16_products_available() { return allowed.load(std::memory_order_relaxed) && hardware_bf16(); }

std::uint64_t bf16_operands_packed() { return packs.load(std::memory_order_relaxed); }

bool bf16_product(const ProductOperand& a_operand, bool transpose_a, const ProductOperand& b_operand, bool transpose_b,
                  Eigen::Index columns_per_call, const GemmEpilogue& epilogue, Eigen::MatrixXf& c) {
  if (!bf16_products_available()) return false;
  const Eigen::Index m = c.rows(), n = c.cols(), k = transpose_a ? a_operand.values().rows() : a_operand.values().cols();
  // S = op(b)^T (n x k): b's storage as it is, row-major when b is k x n, column-major (rows n
  // apart) when b is n x k. W = op(a)^T (k x m): a's storage, row-major when a is m x k, its
  // transpose when a is k x m. D = c^T (n x m, row-major): c's storage.
  const Bf16Scan* b_scan = packed(b_operand);
  if (b_scan == nullptr) return false;
  const Bf16Scan* a_scan = packed(a_operand);
  if (a_scan == nullptr || !bf16_kernels_exact(*a_scan, *b_scan)) return false;
  const Eigen::Index slices = (n + columns_per_call - 1) / columns_per_call, stride = transpose_b ? n : 0;
  const Matmul* full = matmul_for(std::min(n, columns_per_call), k, m, transpose_a, stride);
  const Matmul* tail = n % columns_per_call == 0 ? full : matmul_for(n % columns_per_call, k, m, transpose_a, stride);
  if (full == nullptr || tail == nullptr) return false;
  const std::uint16_t* s_data = b_operand.packing().bits.bits();
  const std::uint16_t* w_data = a_operand.packing().bits.bits();
  parallel_for(static_cast<std::size_t>(slices), 1, [&](std::size_t first, std::size_t last) {
    one_openmp_thread();
    thread_local dnnl::stream stream(cpu_engine());
    thread_local std::vector<unsigned char> scratchpad;
    const dnnl::memory weights(weights_desc(k, m, transpose_a), cpu_engine(), const_cast<std::uint16_t*>(w_data));
    for (auto slice = static_cast<Eigen::Index>(first); slice < static_cast<Eigen::Index>(last); ++slice) {
      const Eigen::Index column = slice * columns_per_call, columns = std::min(columns_per_call, n - column);
      const Matmul& mm = columns == std::min(n, columns_per_call) ? *full : *tail;
      if (scratchpad.size() < mm.scratchpad.get_size()) scratchpad.resize(mm.scratchpad.get_size());
      // S's rows from `column` on: rows k apart (row-major), or consecutive (column-major).
      const dnnl::memory source(source_desc(columns, k, stride), cpu_engine(),
                                const_cast<std::uint16_t*>(s_data + (stride == 0 ? column * k : column)));
      const dnnl::memory destination(destination_desc(columns, m), cpu_engine(), c.data() + column * m);
      const dnnl::memory scratch(mm.scratchpad, cpu_engine(), scratchpad.data());
      mm.primitive.execute(stream, {{DNNL_ARG_SRC, source}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, destination}, {DNNL_ARG_SCRATCHPAD, scratch}});
      if (epilogue) {
        stream.wait();
        epilogue(c.data() + column * m, column, columns);
      }
    }
    stream.wait();
  });
  return true;
}

#endif

}  // namespace fpscope
