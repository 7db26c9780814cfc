// Gaussian-cluster classification data (synthetic_data.hpp).
#include "fpscope/gpu/synthetic_data.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "fpscope/gpu/parallel.hpp"

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

// values[j * stride] = centre[j] + noise * N(0, 1) for j < n, from the row's key (two values per
// word, words 1, 2, ...).
void noisy_row(std::uint64_t key, const float* centre, float noise, float* values, std::size_t stride, int n) {
  const auto& q = normal_quantiles();
  for (int j = 0; j < n; j += 2) {
    const std::uint64_t word = mixed(key + static_cast<std::uint64_t>(j / 2 + 1));
    values[static_cast<std::size_t>(j) * stride] = centre[j] + noise * normal_from(static_cast<std::uint32_t>(word), q);
    if (j + 1 < n) values[static_cast<std::size_t>(j + 1) * stride] = centre[j + 1] + noise * normal_from(static_cast<std::uint32_t>(word >> 32), q);
  }
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
  // Row r into column r of the column-major inputs (stride `rows`), rows shared among the threads.
  parallel_for(static_cast<std::size_t>(rows), 16, [&](std::size_t first, std::size_t last) {
    for (std::size_t r = first; r < last; ++r) {
      const std::uint64_t key = row_key(seed_, batch, r);
      // The label from the key's own word (word 0), in [0, classes) by a 32 x 32-bit product.
      const auto top = static_cast<std::uint64_t>(static_cast<std::uint32_t>(mixed(key) >> 32));
      const int label = static_cast<int>((top * static_cast<std::uint64_t>(classes())) >> 32);
      labels[r] = label;
      noisy_row(key, &centres_(label, 0), noise_, inputs.data() + r, static_cast<std::size_t>(rows), features());
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
