// Gaussian-cluster classification data.
#include "fpscope/gpu/synthetic_data.hpp"

#include <sstream>
#include <stdexcept>

namespace fpscope {

SyntheticClassification::SyntheticClassification(int features, int classes, std::uint64_t seed, float noise)
    : centres_(classes, features), noise_(noise), rng_(seed) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Eigen::Index i = 0; i < centres_.size(); ++i) centres_.data()[i] = normal(rng_);
}

void SyntheticClassification::next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, classes() - 1);
  inputs.resize(rows, features());
  labels.resize(static_cast<std::size_t>(rows));
  for (int i = 0; i < rows; ++i) {
    labels[static_cast<std::size_t>(i)] = pick(rng_);
    for (int j = 0; j < features(); ++j) inputs(i, j) = centres_(labels[static_cast<std::size_t>(i)], j) + noise_ * normal(rng_);
  }
}

std::string SyntheticClassification::save_state() const {
  std::ostringstream out;
  out << rng_;
  return out.str();
}

void SyntheticClassification::restore_state(const std::string& state) {
  std::istringstream in(state);
  std::mt19937_64 rng;
  in >> rng;
  if (!in) throw std::invalid_argument("the saved state of the synthetic data does not parse");
  rng_ = rng;
}

}  // namespace fpscope
