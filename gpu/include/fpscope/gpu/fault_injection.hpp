// Fault injection: a non-finite value put into one layer's (or a GPT weight's) gradient at one step -- to show
// (and test) that the step is skipped, the scaler backs off and the master weights stay put.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fpscope {

struct FaultInjection {
  enum class Value : std::uint8_t { nan, infinity };
  Value value = Value::nan;
  int layer = 1;           // 1-based: fc1, fc2, ...
  std::int64_t step = 0;   // the step (0-based, as the run log counts) whose gradient gets it
  std::string tensor;      // a GPT's weight by its recorded name ("h0.attn.qkv"); empty for an MLP's layer
  friend bool operator==(const FaultInjection&, const FaultInjection&) = default;
};

// "nan@fc2:100", "inf@2:0": VALUE@LAYER:STEP with LAYER 1 ..= layer_count (fcN or N) and STEP >= 0.
// Throws std::invalid_argument naming the text and what was expected.
FaultInjection parse_fault_injection(std::string_view text, int layer_count);
// "nan@h0.attn.qkv:100": VALUE@TENSOR:STEP with TENSOR one of `tensors` (a GPT's recorded weights).
FaultInjection parse_fault_injection(std::string_view text, std::span<const std::string> tensors);
std::string describe(const FaultInjection& fault);  // "nan@fc2:100", "nan@h0.attn.qkv:100"
std::string fault_value_name(FaultInjection::Value value);  // "nan", "inf"

}  // namespace fpscope
