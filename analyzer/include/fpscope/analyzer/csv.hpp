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

// Tidy CSV of every step a run logged, header `step,loss,loss_scale,skipped`: the loss (`nan`
// where the log has none), the loss scale its backward used, and 1 where the optimizer step was
// skipped. Numbers in the shortest text that reads back to the same double.
std::string steps_csv(const std::vector<StepRecord>& steps);

// Tidy CSV of a per-tensor FP8 recipe's scaling (StepRecord::scaling), one row per step and GEMM
// operand, header `step,tensor,operand,format,amax,scale,elements,zeros,flushed_to_zero,saturated`.
// Empty but for the header when the run has none.
std::string scaling_csv(const std::vector<StepRecord>& steps);

// Tidy CSV of the block statistics a run recorded (TensorRecord::blocks, and a block-scaled
// recipe's GEMM operands, Snapshot::block_operands, as kind operand_input, operand_weight,
// operand_output_gradient), header
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
