// Training checkpoints: everything a run needs to go on with the same bits, in one checksummed file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/gpu/mlp.hpp"
#include "fpscope/snapshot/output_file.hpp"

namespace fpscope {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainingCheckpoint {
  std::string settings;            // the run's settings as text: a resume must match them
  MlpTrainer::State trainer;       // weights, biases, scaler, step count, stochastic counter
  std::string data_state;          // TrainingData::save_state()
  // The run log the checkpoint covers, so that --resume can refuse any other: the owner's run
  // id, and the log's length and the CRC-32 of those bytes when the checkpoint was taken.
  std::string run_id;
  std::uint64_t run_log_bytes = 0;
  std::uint32_t run_log_crc32 = 0;
};

// Binary: magic, version, fields, CRC-32 of all before it. decode throws CheckpointError naming
// `where` for anything short, long, corrupt or of another version.
std::string encode_checkpoint(const TrainingCheckpoint& checkpoint);
TrainingCheckpoint decode_checkpoint(std::string_view bytes, const std::string& where);

// Written through the output policy: atomically and durably, so a kill or a power cut leaves the
// old checkpoint or the new one.
void write_checkpoint(const OutputTarget& target, const TrainingCheckpoint& checkpoint);
TrainingCheckpoint read_checkpoint(const std::filesystem::path& path);
// Throws OutputError when `target` is an existing, non-empty regular file that does not begin as a
// checkpoint does (its magic): a new checkpoint replaces only an earlier one, as a new run log
// replaces only a run log (run_log.hpp's check_replaces_only_a_run_log).
void check_replaces_only_a_checkpoint(const OutputTarget& target);

}  // namespace fpscope
