// The embedded training task: classes as Gaussian clusters, no download, reproducible by seed.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fpscope {

class SyntheticClassification {
 public:
  // `classes` cluster centres in `features` dimensions (drawn from the seed), and samples
  // centre + noise * N(0, 1): larger noise makes the task harder.
  SyntheticClassification(int features, int classes, std::uint64_t seed, float noise = 1.0f);
  // The next batch; the same seed gives the same sequence of batches.
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels);
  int features() const { return static_cast<int>(centres_.cols()); }
  int classes() const { return static_cast<int>(centres_.rows()); }
  // Where the sequence of batches stands (the generator's state), for checkpoints.
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument

 private:
  Eigen::MatrixXf centres_;  // classes x features
  float noise_;
  std::mt19937_64 rng_;
};

}  // namespace fpscope
