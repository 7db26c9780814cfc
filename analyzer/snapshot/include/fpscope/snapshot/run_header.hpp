// RunHeader: what a run was, written once as the first line of its log.
#pragma once

#include <optional>
#include <string>

#include "fpscope/core/format.hpp"

namespace fpscope {

// Version 2: a step record for every step, and each tensor's scale and capture; version 1 logs
// are read as well (run_log.hpp says how their tensors' scales are inferred).
inline constexpr int run_log_schema_version = 2;

struct RunHeader {
  int schema_version = run_log_schema_version;
  std::string source;     // "fpscope train", "fpscope_torch", "npy"
  std::string model;      // free text, such as "784-512-512-10 relu"
  std::string precision;  // "fp32", "fp16", "bf16", "fp16-pure", ...
  std::string format;     // the low-precision format tensors are cast to, such as "fp16"
  std::string rounding;   // rounding-mode name
  std::string scaler;     // loss scaling: "none", "static 1024", "dynamic"
  // Who owns the log: a fresh random id per run (new_run_id()); a checkpoint records it, and
  // --resume refuses a log with another. Optional in the file: logs written before it, and by
  // other writers, have none.
  std::string run_id;
  std::string optimizer;  // "sgd", "adamw betas 0.9,0.999 eps 1e-08 weight decay 0.01, clip 1"; optional in the file
  std::string recipe;     // GEMM operands: "fp8-delayed (hybrid, history 16, margin 0)", "mxfp4"; absent: none
  // Where the products ran, which decides a run's last bits as much as its seed does: "float32:
  // oneDNN 2.6.3 sgemm (avx512_core_bf16); bf16: oneDNN 2.6.3 (avx512_core_bf16)", "cuBLAS". Optional in the
  // file (older logs, other writers).
  std::string products;
  // The writer could not tell the format (the PyTorch bridge, where nothing it recorded said it):
  // `format` is its default, not the run's. Optional in the file (`format_assumed`); false there.
  // Last, so that a header made field by field in order needs no change.
  bool format_assumed = false;
  friend bool operator==(const RunHeader&, const RunHeader&) = default;
};

// The format a run cast its tensors to, as the target an analysis of its log takes when none is
// asked for: the header's `format` where it names one (parse_format) that can flush or overflow
// what float32 holds. nullopt for a float32 (or wider) run -- it casts to nothing of its own, so a
// question about it names the format it asks about --, a header without a format, or a name
// fpscope does not know, or a format the writer only assumed (format_assumed).
std::optional<Format> run_cast_format(const RunHeader& header);

// Whether the run is known to have cast to the format of that name (the header's, not assumed).
bool run_cast_to(const RunHeader& header, const std::string& name);

// 32 lowercase hex digits from the system's random source.
std::string new_run_id();

}  // namespace fpscope
