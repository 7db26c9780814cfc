// Training checkpoints: everything a run needs to go on with the same bits, in one checksummed file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainingCheckpoint {
  std::string settings;            // the run's settings as text: a resume must match them
  MlpTrainer::State trainer;       // weights, biases, scaler, step count, stochastic counter
  std::string data_state;          // TrainingData::save_state()
  std::uint64_t run_log_bytes = 0; // length of the run log when the checkpoint was taken
};

// Binary: magic, version, fields, CRC-32 of all before it. decode throws CheckpointError naming
// `where` for anything short, long, corrupt or of another version.
std::string encode_checkpoint(const TrainingCheckpoint& checkpoint);
TrainingCheckpoint decode_checkpoint(std::string_view bytes, const std::string& where);

// Written atomically (a temporary file, then a rename): a kill leaves the old file or the new one.
void write_checkpoint(const std::filesystem::path& path, const TrainingCheckpoint& checkpoint);
TrainingCheckpoint read_checkpoint(const std::filesystem::path& path);

}  // namespace fpscope
