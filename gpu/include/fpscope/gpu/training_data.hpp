// Where training batches come from: the embedded synthetic task or MNIST-format IDX files.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/gpu/idx_data.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

namespace fpscope {

class TrainingData {
 public:
  // `spec` is "synthetic" or "mnist:DIR". Throws std::invalid_argument for an unknown spec or a
  // model whose input and output sizes do not fit the data, IdxError for unreadable files.
  TrainingData(const std::string& spec, const std::vector<int>& layer_sizes, std::uint64_t seed);
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels);
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument
  // The files the data was read from (none for the synthetic task).
  std::vector<std::filesystem::path> files() const;

 private:
  std::optional<SyntheticClassification> synthetic_;
  std::optional<IdxClassification> idx_;
};

}  // namespace fpscope
