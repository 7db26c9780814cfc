// Gaussian-cluster classification data (synthetic_data.hpp).
#include "fpscope/gpu/synthetic_data.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/parallel.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FPSCOPE_SYNTHETIC_LANES 1
#endif

namespace fpscope {

namespace {

// SplitMix64's output function (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014): a bijection of 64-bit words whose outputs over consecutive inputs pass
// BigCrush.
std::uint64_t mixed(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr int quantile_cells = 4096;

// Phi^-1((k + 0.5) / 4097) for k = 0 .. 4096, by bisection on 0.5 erfc(-z / sqrt 2) in float64,
// rounded to float32.
const std::array<float, quantile_cells + 1>& normal_quantiles() {
  static const std::array<float, quantile_cells + 1> table = [] {
    std::array<float, quantile_cells + 1> q{};
    for (int k = 0; k <= quantile_cells; ++k) {
      const double p = (k + 0.5) / (quantile_cells + 1);
      double low = -10, high = 10;
      for (int i = 0; i < 80; ++i) {
        const double middle = 0.5 * (low + high);
        (0.5 * std::erfc(-middle / std::sqrt(2.0)) < p ? low : high) = middle;
      }
      q[static_cast<std::size_t>(k)] = static_cast<float>(0.5 * (low + high));
    }
    return q;
  }();
  return table;
}

// A standard normal from 32 random bits: the top 12 choose a cell of the quantile table, the low
// 20 the place in it.
float normal_from(std::uint32_t bits, const std::array<float, quantile_cells + 1>& q) {
  const std::uint32_t cell = bits >> 20;
  const float place = static_cast<float>(bits & 0xfffffu) * (1.0f / 1048576.0f);
  return q[cell] + place * (q[cell + 1] - q[cell]);
}

// The word stream of one row: (seed, batch, row) mixed into a key, then the key plus the word's
// number, mixed. Batch ~0 is the centres'.
std::uint64_t row_key(std::uint64_t seed, std::uint64_t batch, std::uint64_t row) { return mixed(mixed(seed ^ mixed(batch)) + row); }

// Values j and j + 1 (j even) of a row, centre + noise * N(0, 1), their normals from the halves
// of the row's word j / 2 + 1 (word 0 is the label's): the low half value j's, the high half value
// j + 1's. `pair` takes one where j + 1 is past the row.
void noisy_pair(std::uint64_t key, const float* centre, float noise, int j, bool both, const std::array<float, quantile_cells + 1>& q,
                float pair[2]) {
  const std::uint64_t word = mixed(key + static_cast<std::uint64_t>(j / 2 + 1));
  pair[0] = centre[j] + noise * normal_from(static_cast<std::uint32_t>(word), q);
  if (both) pair[1] = centre[j + 1] + noise * normal_from(static_cast<std::uint32_t>(word >> 32), q);
}

// values[j * stride] = value j of the row, for j < n.
void noisy_row(std::uint64_t key, const float* centre, float noise, float* values, std::size_t stride, int n) {
  const auto& q = normal_quantiles();
  for (int j = 0; j < n; j += 2) {
    float pair[2];
    noisy_pair(key, centre, noise, j, j + 1 < n, q, pair);
    values[static_cast<std::size_t>(j) * stride] = pair[0];
    if (j + 1 < n) values[static_cast<std::size_t>(j + 1) * stride] = pair[1];
  }
}

#if defined(FPSCOPE_SYNTHETIC_LANES)
// (GCC 12 warns inside its own headers about a deliberately undefined vector, and about the ABI of
// vector returns between functions that all have AVX-512.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
// mixed() of eight words at once. (This file is built with -ffp-contract=off: the lanes' multiplies
// and adds below stay the scalar code's, with no fused multiply-add.)
__attribute__((target("avx512f,avx512dq"))) inline __m512i mixed_lanes(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<long long>(0x9e3779b97f4a7c15ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)), _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)), _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// normal_from() of 16 lanes of bits, the same operations in the same order.
__attribute__((target("avx512f,avx512dq"))) inline __m512 normals_from(__m512i bits, const float* q) {
  const __m512i cell = _mm512_srli_epi32(bits, 20);
  const __m512 place = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(bits, _mm512_set1_epi32(0xfffff))), _mm512_set1_ps(1.0f / 1048576.0f));
  const __m512 below = _mm512_i32gather_ps(cell, q, 4), above = _mm512_i32gather_ps(cell, q + 1, 4);
  return _mm512_add_ps(below, _mm512_mul_ps(place, _mm512_sub_ps(above, below)));
}

// 16 lanes of 32 bits from two vectors of eight words: each word's low half.
__attribute__((target("avx512f,avx512dq"))) inline __m512i low_halves(__m512i first, __m512i last) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(first)), _mm512_cvtepi64_epi32(last), 1);
}

// noisy_pair() for 16 rows at once, every feature: row i's key keys[i], its centre at
// centres + centre_offsets[i]; feature j's 16 values stored at out + j * stride.
__attribute__((target("avx512f,avx512dq"))) void noisy_rows16(const std::uint64_t* keys, const std::int32_t* centre_offsets, const float* centres,
                                                              float noise, int features, const float* q, float* out, std::size_t stride) {
  const __m512i first_keys = _mm512_loadu_si512(keys), last_keys = _mm512_loadu_si512(keys + 8);
  const __m512i offsets = _mm512_loadu_si512(centre_offsets);
  const __m512 times = _mm512_set1_ps(noise);
  for (int j = 0; j < features; j += 2) {
    const __m512i number = _mm512_set1_epi64(j / 2 + 1);
    const __m512i first = mixed_lanes(_mm512_add_epi64(first_keys, number)), last = mixed_lanes(_mm512_add_epi64(last_keys, number));
    const __m512 centre = _mm512_i32gather_ps(_mm512_add_epi32(offsets, _mm512_set1_epi32(j)), centres, 4);
    _mm512_storeu_ps(out + static_cast<std::size_t>(j) * stride, _mm512_add_ps(centre, _mm512_mul_ps(times, normals_from(low_halves(first, last), q))));
    if (j + 1 < features) {
      const __m512 next = _mm512_i32gather_ps(_mm512_add_epi32(offsets, _mm512_set1_epi32(j + 1)), centres, 4);
      const __m512i high = low_halves(_mm512_srli_epi64(first, 32), _mm512_srli_epi64(last, 32));
      _mm512_storeu_ps(out + static_cast<std::size_t>(j + 1) * stride, _mm512_add_ps(next, _mm512_mul_ps(times, normals_from(high, q))));
    }
  }
}

// The same in AVX2's lanes, eight rows at a time: mixed() of four words, its 64-bit products made
// of 32-bit ones (the low 64 bits of a x b are lo(a) lo(b) + ((hi(a) lo(b) + lo(a) hi(b)) << 32)).
__attribute__((target("avx2"))) inline __m256i product_low_words(__m256i a, std::uint64_t b) {
  const __m256i factor = _mm256_set1_epi64x(static_cast<long long>(b)), factor_high = _mm256_set1_epi64x(static_cast<long long>(b >> 32));
  const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), factor), _mm256_mul_epu32(a, factor_high));
  return _mm256_add_epi64(_mm256_mul_epu32(a, factor), _mm256_slli_epi64(cross, 32));
}
__attribute__((target("avx2"))) inline __m256i mixed_lanes8(__m256i x) {
  x = _mm256_add_epi64(x, _mm256_set1_epi64x(static_cast<long long>(0x9e3779b97f4a7c15ull)));
  x = product_low_words(_mm256_xor_si256(x, _mm256_srli_epi64(x, 30)), 0xbf58476d1ce4e5b9ull);
  x = product_low_words(_mm256_xor_si256(x, _mm256_srli_epi64(x, 27)), 0x94d049bb133111ebull);
  return _mm256_xor_si256(x, _mm256_srli_epi64(x, 31));
}
__attribute__((target("avx2"))) inline __m256 normals_from8(__m256i bits, const float* q) {
  const __m256i cell = _mm256_srli_epi32(bits, 20);
  const __m256 place = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(bits, _mm256_set1_epi32(0xfffff))), _mm256_set1_ps(1.0f / 1048576.0f));
  const __m256 below = _mm256_i32gather_ps(q, cell, 4), above = _mm256_i32gather_ps(q + 1, cell, 4);
  return _mm256_add_ps(below, _mm256_mul_ps(place, _mm256_sub_ps(above, below)));
}
// noisy_pair() for eight rows at once, every feature, as noisy_rows16 lays them out.
__attribute__((target("avx2"))) void noisy_rows8(const std::uint64_t* keys, const std::int32_t* centre_offsets, const float* centres, float noise,
                                                 int features, const float* q, float* out, std::size_t stride) {
  const __m256i first_keys = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys));
  const __m256i last_keys = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(keys + 4));
  const __m256i offsets = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(centre_offsets));
  const __m256 times = _mm256_set1_ps(noise);
  // Each word's halves side by side, then the first four rows' beside the last four's.
  const __m256i halves = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int j = 0; j < features; j += 2) {
    const __m256i number = _mm256_set1_epi64x(j / 2 + 1);
    const __m256i first = _mm256_permutevar8x32_epi32(mixed_lanes8(_mm256_add_epi64(first_keys, number)), halves);
    const __m256i last = _mm256_permutevar8x32_epi32(mixed_lanes8(_mm256_add_epi64(last_keys, number)), halves);
    const __m256 centre = _mm256_i32gather_ps(centres, _mm256_add_epi32(offsets, _mm256_set1_epi32(j)), 4);
    const __m256i low = _mm256_permute2x128_si256(first, last, 0x20);
    _mm256_storeu_ps(out + static_cast<std::size_t>(j) * stride, _mm256_add_ps(centre, _mm256_mul_ps(times, normals_from8(low, q))));
    if (j + 1 < features) {
      const __m256 next = _mm256_i32gather_ps(centres, _mm256_add_epi32(offsets, _mm256_set1_epi32(j + 1)), 4);
      const __m256i high = _mm256_permute2x128_si256(first, last, 0x31);
      _mm256_storeu_ps(out + static_cast<std::size_t>(j + 1) * stride, _mm256_add_ps(next, _mm256_mul_ps(times, normals_from8(high, q))));
    }
  }
}
#pragma GCC diagnostic pop
#endif

// The label of the row whose key this is: from the key's own word (word 0), in [0, classes) by a
// 32 x 32-bit product.
int label_of(std::uint64_t key, int classes) {
  const auto top = static_cast<std::uint64_t>(static_cast<std::uint32_t>(mixed(key) >> 32));
  return static_cast<int>((top * static_cast<std::uint64_t>(classes)) >> 32);
}

}  // namespace

SyntheticClassification::SyntheticClassification(int features, int classes, std::uint64_t seed, float noise)
    : centres_(classes, features), noise_(noise), seed_(seed) {
  const std::vector<float> zeros(static_cast<std::size_t>(features), 0.0f);
  for (int c = 0; c < classes; ++c) noisy_row(row_key(seed_, ~0ull, static_cast<std::uint64_t>(c)), zeros.data(), 1.0f, &centres_(c, 0), 1, features);
}

void SyntheticClassification::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels) {
  labels.resize(static_cast<std::size_t>(rows));
  inputs.resize(rows, features());
  if (legacy_) {  // an earlier fpscope's stream: its order of draws, one value at a time
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, classes() - 1);
    for (int i = 0; i < rows; ++i) {
      labels[static_cast<std::size_t>(i)] = pick(*legacy_);
      for (int j = 0; j < features(); ++j) inputs(i, j) = centres_(labels[static_cast<std::size_t>(i)], j) + noise_ * normal(*legacy_);
    }
    return;
  }
  const std::uint64_t batch = batch_++;
  // Row r into row r of the column-major inputs, 16 rows at a time shared among the threads, each
  // feature's 16 values side by side: in AVX-512 lanes where the engine's kernels run AVX-512
  // (bulk_kernel_isa), in AVX2's (two groups of eight) where they run AVX2, else one by one. Every
  // value is its own function of (seed, batch, row, feature), made by the same operations on every
  // path: the same bits.
  constexpr std::size_t group = 16;
  const auto& q = normal_quantiles();
#if defined(FPSCOPE_SYNTHETIC_LANES)
  // The lanes gather the centres at 32-bit offsets.
  const bool offsets_fit = centres_.size() <= 0x7fffffff;
  const bool lanes = bulk_kernel_isa() == "avx512" && offsets_fit, avx2_lanes = bulk_kernel_isa() == "avx2" && offsets_fit;
#endif
  parallel_for((static_cast<std::size_t>(rows) + group - 1) / group, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t g = first; g < last; ++g) {
      const std::size_t r0 = g * group, n = std::min(group, static_cast<std::size_t>(rows) - r0);
      std::array<std::uint64_t, group> keys{};
      std::array<const float*, group> centres{};
      std::array<std::int32_t, group> centre_offsets{};
      for (std::size_t i = 0; i < n; ++i) {
        keys[i] = row_key(seed_, batch, r0 + i);
        labels[r0 + i] = label_of(keys[i], classes());
        centres[i] = &centres_(labels[r0 + i], 0);
        centre_offsets[i] = static_cast<std::int32_t>(centres[i] - centres_.data());
      }
#if defined(FPSCOPE_SYNTHETIC_LANES)
      if (lanes && n == group) {
        noisy_rows16(keys.data(), centre_offsets.data(), centres_.data(), noise_, features(), q.data(), inputs.data() + r0, static_cast<std::size_t>(rows));
        continue;
      }
      if (avx2_lanes && n == group) {
        for (std::size_t half = 0; half < group; half += 8)
          noisy_rows8(keys.data() + half, centre_offsets.data() + half, centres_.data(), noise_, features(), q.data(), inputs.data() + r0 + half,
                      static_cast<std::size_t>(rows));
        continue;
      }
#endif
      for (int j = 0; j < features(); j += 2) {
        const bool both = j + 1 < features();
        float* column = inputs.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(rows) + r0;
        for (std::size_t i = 0; i < n; ++i) {
          float pair[2];
          noisy_pair(keys[i], centres[i], noise_, j, both, q, pair);
          column[i] = pair[0];
          if (both) column[i + static_cast<std::size_t>(rows)] = pair[1];
        }
      }
    }
  });
}

std::string SyntheticClassification::save_state() const {
  if (!legacy_) return "batch " + std::to_string(batch_);
  std::ostringstream out;
  out << *legacy_;
  return out.str();
}

void SyntheticClassification::restore_state(const std::string& state) {
  if (state.rfind("batch ", 0) == 0) {
    std::uint64_t batch = 0;
    const auto [end, error] = std::from_chars(state.data() + 6, state.data() + state.size(), batch);
    if (error != std::errc{} || end != state.data() + state.size()) throw std::invalid_argument("the saved state of the synthetic data does not parse");
    batch_ = batch;
    legacy_.reset();
    return;
  }
  std::istringstream in(state);
  std::mt19937_64 rng;
  in >> rng;
  if (!in) throw std::invalid_argument("the saved state of the synthetic data does not parse");
  // The earlier generator's centres: its first draws from the seed, in a column-major matrix's order.
  std::mt19937_64 from_seed(seed_);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int j = 0; j < features(); ++j)
    for (int c = 0; c < classes(); ++c) centres_(c, j) = normal(from_seed);
  legacy_ = rng;
}

}  // namespace fpscope
