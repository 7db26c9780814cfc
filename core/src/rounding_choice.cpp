// The neighbours of an operation's exact result and the rounding mode's choice between them.
#include "fpscope/core/rounding_choice.hpp"

#include <optional>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"

namespace fpscope {

std::string_view rounding_reason_text(RoundingReason reason) {
  switch (reason) {
    case RoundingReason::exact: return "representable: nothing to round";
    case RoundingReason::nearer: return "the nearer neighbour";
    case RoundingReason::tie_to_even: return "a tie: the neighbour whose last bit is even";
    case RoundingReason::tie_away: return "a tie: the neighbour away from zero";
    case RoundingReason::toward_zero: return "toward zero: the neighbour nearer zero";
    case RoundingReason::toward_positive: return "toward +inf: always the upper neighbour";
    case RoundingReason::toward_negative: return "toward -inf: always the lower neighbour";
    case RoundingReason::to_odd: return "round to odd: the neighbour whose last bit is 1";
    case RoundingReason::stochastic: return "stochastic: a random draw between the two";
    case RoundingReason::replaced: return "neither neighbour: flush to zero, saturation or a special value decided it";
    case RoundingReason::past_max: return "the neighbour the mode takes lies past the largest finite value: an overflow";
    case RoundingReason::tie_past_max: return "a tie, and the neighbour it goes to lies past the largest finite value: an overflow";
  }
  return "";
}

std::uint64_t apply_operation(Format f, Operation op, std::uint64_t a, std::uint64_t b, Context& ctx) {
  switch (op) {
    case Operation::add: return add(f, a, b, ctx);
    case Operation::sub: return sub(f, a, b, ctx);
    case Operation::mul: return mul(f, a, b, ctx);
    case Operation::div: return div(f, a, b, ctx);
    case Operation::sqrt: return sqrt(f, a, ctx);
  }
  return 0;
}

namespace {

Context with_mode(const Context& ctx, RoundingMode mode) {
  Context c = ctx;
  c.rounding = mode;
  c.flags = 0;
  return c;
}

// Exactly halfway between the neighbours: exact in one more mantissa bit, yet not representable.
bool is_tie(Format f, Operation op, std::uint64_t a, std::uint64_t b, const Context& ctx, std::uint64_t lower, std::uint64_t upper) {
  if (lower == upper || !is_finite(f, lower) || !is_finite(f, upper)) return false;
  if (f.mantissa_bits < 52) {
    const Format wider{f.exponent_bits, f.mantissa_bits + 1, f.flavour};
    Context exact_read;  // the operands' values are exact in the wider format
    const std::uint64_t wa = convert(f, wider, a, exact_read), wb = op == Operation::sqrt ? 0 : convert(f, wider, b, exact_read);
    Context c = with_mode(ctx, RoundingMode::nearest_even);
    c.flush_to_zero = false;
    c.saturate = false;
    apply_operation(wider, op, wa, wb, c);
    return (c.flags & flag::inexact) == 0;
  }
  Context even = with_mode(ctx, RoundingMode::nearest_even), away = with_mode(ctx, RoundingMode::nearest_away);
  return apply_operation(f, op, a, b, even) != apply_operation(f, op, a, b, away);
}

// The format of f's values with the exponent going on past f's largest (one more exponent bit, the
// IEEE flavour, the same precision): where the neighbours of a result beyond f's range lie. None
// for a format whose exponent cannot widen.
std::optional<Format> open_topped(Format f) {
  if (f.exponent_bits >= 11) return std::nullopt;
  return Format{f.exponent_bits + 1, f.mantissa_bits, Flavour::ieee};
}

// Whether the mode, with the exponent going on, rounds a op b past f's largest finite value; and
// whether that result is a tie there.
struct TopOfRange {
  bool past_max = false;
  bool tie = false;
};
TopOfRange top_of_range(Format f, Operation op, std::uint64_t a, std::uint64_t b, const Context& ctx) {
  TopOfRange out;
  const std::optional<Format> open = open_topped(f);
  if (!open) return out;
  Context exact_read;  // f's values are exact in the wider format
  const std::uint64_t oa = convert(f, *open, a, exact_read), ob = op == Operation::sqrt ? 0 : convert(f, *open, b, exact_read);
  Context c = with_mode(ctx, ctx.rounding == RoundingMode::stochastic ? RoundingMode::nearest_even : ctx.rounding);
  c.flush_to_zero = false;
  c.saturate = false;
  const std::uint64_t picked = apply_operation(*open, op, oa, ob, c);
  if (!is_finite(*open, picked)) return out;
  Context widen;
  const double value = to_double(*open, picked, widen), largest = to_double(f, max_finite(f, false), widen);
  out.past_max = value > largest || value < -largest;
  if (out.past_max) {
    Context down = with_mode(ctx, RoundingMode::toward_negative), up = with_mode(ctx, RoundingMode::toward_positive);
    down.flush_to_zero = up.flush_to_zero = false;
    down.saturate = up.saturate = false;
    out.tie = is_tie(*open, op, oa, ob, ctx, apply_operation(*open, op, oa, ob, down), apply_operation(*open, op, oa, ob, up));
  }
  return out;
}

}  // namespace

RoundingChoice explain_rounding(Format f, Operation op, std::uint64_t a, std::uint64_t b, const Context& ctx) {
  RoundingChoice out;
  Context run = with_mode(ctx, ctx.rounding);
  out.result = apply_operation(f, op, a, b, run);
  out.flags = run.flags;
  // The neighbours without FTZ or saturation: the two values the exact result lies between.
  Context down = with_mode(ctx, RoundingMode::toward_negative), up = with_mode(ctx, RoundingMode::toward_positive);
  down.flush_to_zero = up.flush_to_zero = false;
  down.saturate = up.saturate = false;
  out.lower = apply_operation(f, op, a, b, down);
  out.upper = apply_operation(f, op, a, b, up);
  if ((down.flags & flag::inexact) == 0) {
    out.reason = out.result == out.lower ? RoundingReason::exact : RoundingReason::replaced;
    return out;
  }
  out.tie = is_tie(f, op, a, b, ctx, out.lower, out.upper);
  // At the top of the range: the mode's neighbour is past the largest finite value (a stochastic
  // draw is not said to be one: it may go either way; asked-for saturation is said as replacing it).
  if (ctx.rounding != RoundingMode::stochastic && !ctx.saturate && (run.flags & flag::overflow) != 0) {
    const TopOfRange top = top_of_range(f, op, a, b, ctx);
    if (top.past_max) {
      out.tie = top.tie;
      out.reason = top.tie ? RoundingReason::tie_past_max : RoundingReason::past_max;
      return out;
    }
  }
  // A tie at the top whose even neighbour is the largest finite value: its upper neighbour is no
  // finite value of f, but is one with the exponent going on.
  if (!out.tie && !is_finite(f, out.upper)) {
    const std::optional<Format> open = open_topped(f);
    if (open) {
      Context exact_read;
      const std::uint64_t oa = convert(f, *open, a, exact_read), ob = op == Operation::sqrt ? 0 : convert(f, *open, b, exact_read);
      Context down = with_mode(ctx, RoundingMode::toward_negative), up = with_mode(ctx, RoundingMode::toward_positive);
      down.flush_to_zero = up.flush_to_zero = false;
      down.saturate = up.saturate = false;
      out.tie = is_tie(*open, op, oa, ob, ctx, apply_operation(*open, op, oa, ob, down), apply_operation(*open, op, oa, ob, up));
    }
  }
  // Flush to zero or saturation changed what the mode alone gives (saturating an overflow lands on
  // a neighbour, but not because the mode picked it).
  Context plain = with_mode(ctx, ctx.rounding);
  plain.flush_to_zero = false;
  plain.saturate = false;
  const bool changed = ctx.rounding != RoundingMode::stochastic && apply_operation(f, op, a, b, plain) != out.result;
  if (changed || (out.result != out.lower && out.result != out.upper)) {
    out.reason = RoundingReason::replaced;
    return out;
  }
  switch (ctx.rounding) {
    case RoundingMode::nearest_even: out.reason = out.tie ? RoundingReason::tie_to_even : RoundingReason::nearer; break;
    case RoundingMode::nearest_away: out.reason = out.tie ? RoundingReason::tie_away : RoundingReason::nearer; break;
    case RoundingMode::toward_zero: out.reason = RoundingReason::toward_zero; break;
    case RoundingMode::toward_positive: out.reason = RoundingReason::toward_positive; break;
    case RoundingMode::toward_negative: out.reason = RoundingReason::toward_negative; break;
    case RoundingMode::odd: out.reason = RoundingReason::to_odd; break;
    case RoundingMode::stochastic: out.reason = RoundingReason::stochastic; break;
  }
  return out;
}

}  // namespace fpscope
