// MNIST-format IDX files (gzipped or not) as a source of training batches.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace fpscope {

class IdxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads an IDX file of unsigned bytes (type 0x08), plain or gzipped: its dimensions and data.
// Throws IdxError naming the file for a missing file, a bad magic number or truncated data.
struct IdxArray {
  std::vector<std::uint32_t> dimensions;
  std::vector<std::uint8_t> data;
};
IdxArray read_idx(const std::filesystem::path& path);

// train-images-idx3-ubyte and train-labels-idx1-ubyte (each optionally .gz) from a folder:
// images scaled to [0, 1], drawn in a seeded shuffled order, epoch after epoch.
class IdxClassification {
 public:
  IdxClassification(const std::filesystem::path& folder, std::uint64_t seed);
  void next_batch(int rows, Eigen::MatrixXf& inputs, std::vector<int>& labels);
  int features() const { return static_cast<int>(images_.cols()); }
  int classes() const { return classes_; }
  std::size_t size() const { return labels_.size(); }
  // The two files it read (an output must never be one of them).
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // Where the epoch stands (order, position, generator), for checkpoints.
  std::string save_state() const;
  void restore_state(const std::string& state);  // throws std::invalid_argument

 private:
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> images_;
  std::vector<int> labels_;
  int classes_ = 0;
  std::vector<std::size_t> order_;
  std::size_t next_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::filesystem::path> files_;
};

}  // namespace fpscope
