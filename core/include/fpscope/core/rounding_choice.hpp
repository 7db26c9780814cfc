// Why an operation's result is what it is: the two representable neighbours of the exact result,
// which one the rounding mode picked, and the reason -- what the Float inspector's arithmetic
// panel shows. Computed by the same arithmetic as everything else, in four rounding directions.
#pragma once

#include <cstdint>
#include <string_view>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

enum class Operation : std::uint8_t { add, sub, mul, div, sqrt };  // sqrt reads only a

enum class RoundingReason : std::uint8_t {
  exact,            // the exact result is representable: nothing to round
  nearer,           // a round-to-nearest mode took the nearer neighbour
  tie_to_even,      // exactly halfway: the neighbour with an even last bit
  tie_away,         // exactly halfway: the neighbour away from zero
  toward_zero,      // the neighbour nearer zero
  toward_positive,  // the upper neighbour
  toward_negative,  // the lower neighbour
  to_odd,           // the neighbour with an odd last bit
  stochastic,       // a random draw
  replaced,         // neither neighbour: flush to zero, saturation or a special value decided it
  past_max,         // the neighbour the mode takes lies past the largest finite value: an overflow
  tie_past_max,     // exactly halfway, and the neighbour the tie goes to lies past the largest finite value
};
std::string_view rounding_reason_text(RoundingReason reason);  // one sentence fragment

struct RoundingChoice {
  std::uint64_t result = 0;         // what the operation returns under the context
  std::uint64_t lower = 0, upper = 0;  // rounded toward -inf and toward +inf (equal when exact)
  bool tie = false;                 // the exact result lies exactly halfway between them
  RoundingReason reason = RoundingReason::exact;
  std::uint8_t flags = 0;           // raised by the operation under the context
};

// a op b in f under ctx (its rounding mode, FTZ, DAZ, saturation; ctx's flags are not changed).
// The tie is decided exactly: the result is halfway when it is exact in a format with one more
// mantissa bit (for f with 52 mantissa bits: when ties-to-even and ties-away disagree). At the top
// of the range the neighbours are taken as if the exponent went on (65520 in fp16 lies halfway
// between 65504 and 2^16): a result the mode rounds past the largest finite value is an overflow,
// whatever the format then gives (infinity, NaN, or its largest finite value), and a tie is said
// to be one there too.
RoundingChoice explain_rounding(Format f, Operation op, std::uint64_t a, std::uint64_t b, const Context& ctx);

std::uint64_t apply_operation(Format f, Operation op, std::uint64_t a, std::uint64_t b, Context& ctx);

}  // namespace fpscope
