// Tidy CSV of a run's histograms: one row per (step, tensor, kind, binade) with a nonzero count.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// Header `step,tensor,kind,binade,count`; binade is an integer, or `zero`, `inf`, `nan` for the
// special counts. Tensor names with commas or quotes are quoted as RFC 4180 says.
std::string histograms_csv(const std::vector<Snapshot>& snapshots);

// Tidy CSV of the block statistics a run recorded (TensorRecord::blocks), header
// `step,tensor,kind,format,block,rule,series,bin,count`: series `relative_exponent` (bin 0, -1,
// ...: an element's binade below its block's largest), `scale_code` (bin: the scale's code, E8M0
// or E4M3) and `total` (bin: elements, blocks, nan_blocks, zeros, flushed_to_zero,
// made_subnormal, saturated). Zero counts are left out of the two histograms, never out of the
// totals. Empty but for the header when nothing was recorded.
std::string block_statistics_csv(const std::vector<Snapshot>& snapshots);

// Reads such a CSV back into snapshots holding only histograms (loss, scale and cast counts are
// not in it). Throws std::runtime_error naming the file and line for a missing column, a
// number that does not parse, or a row with the wrong number of fields.
std::vector<Snapshot> read_histograms_csv(const std::filesystem::path& path);

}  // namespace fpscope
