// The culprit's one-line diagnosis.
#include "fpscope/analyzer/culprit_diagnosis.hpp"

#include <fmt/format.h>

#include <cmath>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {

// 2^k where the scale is a power of two, else the number.
std::string scale_text(double scale) {
  int exponent = 0;
  if (scale > 0 && std::frexp(scale, &exponent) == 0.5) return fmt::format("2^{}", exponent - 1);
  return fmt::format("{:.6g}", scale);
}

// How far under the format's largest a gradient's inputs may be and still overflow it inside the
// operation that makes the gradient: a product sums up to thousands of terms (2^10).
constexpr double overflow_reach = 1024;

std::string tensor_text(const std::string& name, TensorKind kind) { return printable_text(name, 200) + " " + std::string(tensor_kind_name(kind)); }

}  // namespace

int binades_too_high(const Culprit& c) {
  if (c.fault != CulpritFault::overflow || !is_gradient(c.kind) || !(c.format_largest > 0) || !c.largest || !std::isfinite(*c.largest)) return 0;
  int k = 1;
  while (k < 1100 && std::ldexp(*c.largest, -k) > c.format_largest) ++k;
  return k;
}

namespace {

// What broke the step, from its culprit (culprit_diagnosis's text without what it says of an
// unfinished step).
std::string what_broke(const StepRecord& step) {
  if (!step.culprit) {
    return step.skipped ? "no culprit recorded: no tensor the sentinel reads held a NaN, an infinity or a value past its format's largest "
                          "(or the log was written without a sentinel)"
                        : "no culprit recorded";
  }
  const Culprit& c = *step.culprit;
  const std::string format = c.format.empty() ? std::string("its format") : printable_text(c.format, 40);
  const std::string where = tensor_text(c.name, c.kind);
  // Gradients carry the step's loss scale, and so do the magnitudes said of them.
  const std::string upstream =
      c.upstream.empty() ? std::string(is_gradient(c.kind) ? "as the step's first gradient" : "as the step's first tensor")
      : is_gradient(c.kind)
          ? fmt::format("with finite inputs (the largest gradient before it {:.4g} at loss scale {}, in {})", c.upstream_largest,
                        scale_text(step.loss_scale), tensor_text(c.upstream, c.upstream_kind))
          : fmt::format("with finite inputs (the largest |x| before it {:.4g}, in {})", c.upstream_largest, tensor_text(c.upstream, c.upstream_kind));
  switch (c.fault) {
    case CulpritFault::overflow: {
      if (const int k = binades_too_high(c); k > 0) {
        const double fitting = step.loss_scale / std::ldexp(1.0, k);
        return fmt::format("{} overflowed {} at loss scale {}: its largest, {:.4g}, is past {:.6g}; the scale is {} binade{} too high for this "
                           "tensor (at {} its largest would be {:.4g})",
                           where, format, scale_text(step.loss_scale), *c.largest, c.format_largest, k, k == 1 ? "" : "s", scale_text(fitting),
                           std::ldexp(*c.largest, -k));
      }
      return fmt::format("{} reached {:.4g}, past {}'s largest {:.6g}: a loss scale does not multiply {}s, so not a scaling problem "
                         "(keep this tensor in a wider format, or bound its values)",
                         where, c.largest.value_or(0), format, c.format_largest, tensor_kind_name(c.kind));
    }
    case CulpritFault::nan:
    case CulpritFault::infinity: {
      const char* what = c.fault == CulpritFault::nan ? "a NaN" : "an infinity";
      // A gradient computed in the format (as_stored) from gradients within a few binades of its
      // largest -- or, the first gradient, from a loss scale that close -- : a product or sum inside
      // the operation that made it overflowed (an fp16 output holds no value past 65504: its
      // overflow is an infinity, and infinity - infinity a NaN). The scale, then. In float32 (the
      // engine reads before every cast) a NaN or infinity is not the format's doing.
      const double reference = c.upstream.empty() ? step.loss_scale : c.upstream_largest;
      if (is_gradient(c.kind) && c.captured == Capture::as_stored && c.format_largest > 0 && reference * overflow_reach >= c.format_largest) {
        const std::string near = c.upstream.empty() ? fmt::format("as the step's first gradient, at loss scale {}", scale_text(step.loss_scale))
                                                    : upstream;
        return fmt::format("{} appeared in {} {}, within {} binades of {}'s largest: most likely an operation making it overflowed {}; "
                           "the scale is too high",
                           what, where, near, static_cast<int>(std::log2(overflow_reach)), format, format);
      }
      return fmt::format("{} appeared in {} {}: not a scaling problem", what, where, upstream);
    }
  }
  return "?";
}

}  // namespace

std::string culprit_diagnosis(const StepRecord& step) {
  if (step.finished) return what_broke(step);
  return "did not finish (its loop stopped inside it: no loss, no update); " + what_broke(step);
}

}  // namespace fpscope
