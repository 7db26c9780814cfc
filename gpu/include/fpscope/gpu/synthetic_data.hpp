// The embedded training task: classes as Gaussian clusters, no download, reproducible by seed.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace fpscope {

class SyntheticClassification {
 public:
  // `classes` cluster centres in `features` dimensions (drawn from the seed), and samples
  // centre + noise * N(0, 1): larger noise makes the task harder.
  //
  // Every value is a function of (seed, batch number, row, feature) alone -- a counter-based
  // generator (SplitMix64's mixer), its 32 bits turned into a standard normal by the inverse CDF,
  // interpolated linearly in a table of 4097 quantiles (so the noise is a Gaussian cut at
  // +-3.67 standard deviations) -- so the rows are drawn on the engine's threads, with the same bits
  // on any number of them.
  SyntheticClassification(int features, int classes, std::uint64_t seed, float noise = 1.0f);
  // The next batch; the same seed gives the same sequence of batches.
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels);
  int features() const { return static_cast<int>(centres_.cols()); }
  int classes() const { return static_cast<int>(centres_.rows()); }
  // Where the sequence of batches stands (the batch number), for checkpoints. A checkpoint of an
  // fpscope before the counter-based generator holds its std::mt19937_64's state instead: restored,
  // its run goes on with that generator's stream and centres (std::normal_distribution, one value
  // at a time on the calling thread), the batches it would have drawn.
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument

 private:
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> centres_;  // classes x features
  float noise_;
  std::uint64_t seed_;
  std::uint64_t batch_ = 0;  // batches drawn so far
  std::optional<std::mt19937_64> legacy_;  // an earlier fpscope's stream, from its checkpoint
};

}  // namespace fpscope
