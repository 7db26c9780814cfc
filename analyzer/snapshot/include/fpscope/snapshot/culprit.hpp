// The culprit of a bad step: of a step that skipped its update or whose loss was not finite, the
// first tensor in execution order (forward, then backward in reverse layer order) that held a NaN,
// an infinity, or a finite value past its format's largest. The engine's step sentinel reads every
// step's tensors (their largest magnitudes, one reduction per cast); find_culprit is the rule.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// One tensor of a step as the sentinel saw it: the largest magnitude bits of its float32 values
// before their cast (hd.hpp's magnitude_bits: a NaN's above an infinity's, an infinity's above
// every number's; 0 for no values).
struct SentinelReading {
  std::string name;
  TensorKind kind = TensorKind::other;
  std::uint32_t largest_bits = 0;
  friend bool operator==(const SentinelReading&, const SentinelReading&) = default;
};

// The fault a reading shows in a format whose largest finite magnitude is `format_largest`, if any.
std::optional<CulpritFault> reading_fault(std::uint32_t largest_bits, double format_largest);

// The first reading with a fault, with what came before it that leads to it (Culprit::upstream);
// none when every reading is clean. Its capture is before_cast (the engine's readings).
// `format` names the format the values were about to be cast to (format_largest its largest).
std::optional<Culprit> find_culprit(std::span<const SentinelReading> readings, const std::string& format, double format_largest);

// The culprit's counts taken from a snapshot of its step: its record's NaNs, infinities and cast
// overflows (by name and kind); nothing where the snapshot holds no such record.
void count_culprit(Culprit& culprit, const Snapshot& snapshot);

}  // namespace fpscope
