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

// Reads such a CSV back into snapshots holding only histograms (loss, scale and cast counts are
// not in it). Throws std::runtime_error naming the file and line for a missing column, a
// number that does not parse, or a row with the wrong number of fields.
std::vector<Snapshot> read_histograms_csv(const std::filesystem::path& path);

}  // namespace fpscope
