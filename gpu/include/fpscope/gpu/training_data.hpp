// Where training batches come from: for an MLP the embedded synthetic task or MNIST-format IDX
// files, for a GPT the synthetic sequences or a text file (sequence_data.hpp).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/gpu/idx_data.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/sequence_data.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

namespace fpscope {

class TrainingData {
 public:
  // `spec` is "synthetic" or "mnist:DIR". Throws std::invalid_argument for an unknown spec or a
  // model whose input and output sizes do not fit the data, IdxError for unreadable files.
  TrainingData(const std::string& spec, const std::vector<int>& layer_sizes, std::uint64_t seed);
  // The data for the config's model: as above for an MLP; for a GPT "synthetic" (the sequence task)
  // or "text:FILE", which throws std::invalid_argument for an unreadable or unfit file too.
  TrainingData(const std::string& spec, const TrainingConfig& config);
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels);
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument
  // The files the data was read from (none for the synthetic task).
  std::vector<std::filesystem::path> files() const;

 private:
  std::optional<SyntheticClassification> synthetic_;
  std::optional<IdxClassification> idx_;
  std::optional<SyntheticSequences> sequences_;
  std::optional<TextSequences> text_;
};

}  // namespace fpscope
