// Scale semantics: series per recorded scale, shifts, and loss-scale advice from gradients.
#include "fpscope/analyzer/scale_semantics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

bool loss_scale_multiplies(TensorKind kind) { return is_gradient(kind) || kind == TensorKind::other; }

ScaleLog2 scale_log2_of(double scale) {
  if (!(scale > 0) || !std::isfinite(scale)) return {0, false};
  int exponent = 0;
  const double mantissa = std::frexp(scale, &exponent);  // scale = mantissa * 2^exponent, mantissa in [0.5, 1)
  if (mantissa == 0.5) return {exponent - 1, true};
  // The nearest power of two in log2: round(log2(scale)).
  return {static_cast<int>(std::lround(std::log2(scale))), false};
}

namespace {

void add_part(TensorSeries& series, int log2, const ExponentHistogram& histogram) {
  auto it = std::find_if(series.parts.begin(), series.parts.end(), [&](const auto& part) { return part.first == log2; });
  if (it == series.parts.end()) {
    series.parts.emplace_back(log2, histogram);
    return;
  }
  try {
    it->second.merge(histogram);
  } catch (const std::overflow_error&) {
    throw std::overflow_error("tensor " + printable_text(series.name) + " " + std::string(tensor_kind_name(series.kind)) +
                              " counts more than 2^64 - 1 values over the run");
  }
}

// Adds one snapshot's records to `out` (index: a tensor's place in it).
void add_snapshot(std::vector<TensorSeries>& out, std::map<std::pair<std::string, TensorKind>, std::size_t>& index, const Snapshot& s) {
  for (const TensorRecord& t : s.tensors) {
    auto [it, inserted] = index.try_emplace({t.name, t.kind}, out.size());
    if (inserted) {
      out.push_back(TensorSeries{t.name, t.kind, t.captured, {}, false, 0});
    }
    TensorSeries& series = out[it->second];
    const ScaleLog2 scale = scale_log2_of(t.scale);
    series.scale_inexact = series.scale_inexact || !scale.exact;
    if (t.captured == Capture::as_stored) series.captured = Capture::as_stored;  // any step so is said
    ++series.steps;
    add_part(series, scale.log2, t.histogram);
  }
}

}  // namespace

std::vector<TensorSeries> tensor_series(std::span<const Snapshot> snapshots) {
  std::vector<TensorSeries> out;
  std::map<std::pair<std::string, TensorKind>, std::size_t> index;
  for (const Snapshot& s : snapshots) add_snapshot(out, index, s);
  return out;
}

std::vector<TensorSeries> tensor_series(std::span<const Snapshot* const> snapshots) {
  std::vector<TensorSeries> out;
  std::map<std::pair<std::string, TensorKind>, std::size_t> index;
  for (const Snapshot* s : snapshots) add_snapshot(out, index, *s);
  return out;
}

TensorSeries single_series(std::string name, TensorKind kind, const ExponentHistogram& histogram, double scale, Capture captured) {
  TensorSeries series{std::move(name), kind, captured, {}, false, 1};
  const ScaleLog2 s = scale_log2_of(scale);
  series.scale_inexact = !s.exact;
  series.parts.emplace_back(s.log2, histogram);
  return series;
}

int shift_of_part(TensorKind kind, int recorded_log2, std::optional<int> loss_scale_log2) {
  if (!loss_scale_log2) return 0;
  const int target = loss_scale_multiplies(kind) ? clamp_scale_log2(*loss_scale_log2) : 0;
  return clamp_scale_log2(target - clamp_scale_log2(recorded_log2));
}

RangeReport analyze_series(const TensorSeries& series, Format format, std::optional<int> loss_scale_log2) {
  RangeReport total;
  for (const auto& [recorded, histogram] : series.parts)
    total += analyze_range(histogram, format, shift_of_part(series.kind, recorded, loss_scale_log2));
  return total;
}

std::optional<int> highest_binade_at_scale_one(const TensorSeries& series) {
  std::optional<int> highest;
  for (const auto& [recorded, histogram] : series.parts)
    if (histogram.highest_binade() >= min_binade) {
      const int b = histogram.highest_binade() - recorded;
      highest = highest ? std::max(*highest, b) : b;
    }
  return highest;
}

std::optional<int> lowest_binade_at_scale_one(const TensorSeries& series) {
  std::optional<int> lowest;
  for (const auto& [recorded, histogram] : series.parts)
    if (histogram.highest_binade() >= min_binade) {
      const int b = histogram.lowest_binade() - recorded;
      lowest = lowest ? std::min(*lowest, b) : b;
    }
  return lowest;
}

ShiftedHistogram shift_histogram(const ExponentHistogram& histogram, int shift) {
  ShiftedHistogram out;
  for (int b = min_binade; b <= max_binade; ++b) {
    const std::uint64_t count = histogram.count(b);
    if (count == 0) continue;
    const int to = std::clamp(b + shift, min_binade, max_binade);
    if (to != b + shift) out.clamped += count;
    out.histogram.set_count(to, out.histogram.count(to) + count);
  }
  out.histogram.set_specials(histogram.zero_count(), histogram.infinity_count(), histogram.nan_count());
  return out;
}

ShiftedHistogram shifted_histogram(const TensorSeries& series, std::optional<int> loss_scale_log2) {
  // The parts' totals fit 2^64 together (tensor_series merged them), so these sums cannot wrap.
  ShiftedHistogram out;
  for (const auto& [recorded, histogram] : series.parts) {
    const ShiftedHistogram part = shift_histogram(histogram, shift_of_part(series.kind, recorded, loss_scale_log2));
    out.histogram.merge(part.histogram);
    out.clamped += part.clamped;
  }
  return out;
}

LossScaleAdvice recommend_loss_scale(std::span<const TensorSeries> series, Format format, int margin_binades) {
  LossScaleAdvice advice;
  advice.from_shadow = std::any_of(series.begin(), series.end(), [](const TensorSeries& s) {
    return is_gradient(s.kind) && is_shadow_tensor(s.name) && highest_binade_at_scale_one(s).has_value();
  });
  std::optional<int> highest;
  RangeReport at_one;
  for (const TensorSeries& s : series) {
    if (!is_gradient(s.kind) && s.kind != TensorKind::other) continue;
    if (advice.from_shadow && !is_shadow_tensor(s.name)) continue;
    const std::optional<int> h = highest_binade_at_scale_one(s);
    if (!h) continue;
    if (!highest || *h > *highest) highest = *h, advice.decided_by = s.name + " " + std::string(tensor_kind_name(s.kind));
    const RangeReport r = analyze_series(s, format, 0);
    at_one.flushed_to_zero += r.flushed_to_zero;
    at_one.subnormal += r.subnormal;
    at_one.overflow += r.overflow;
  }
  if (!highest) return advice;  // no_gradients
  if (at_one.flushed_to_zero == 0 && at_one.subnormal == 0 && at_one.overflow == 0) {
    advice.kind = LossScaleAdvice::Kind::no_scaling_needed;
    advice.scale_log2 = 0;
    return advice;
  }
  advice.kind = LossScaleAdvice::Kind::scale;
  const int margin = clamp_margin_binades(margin_binades);
  // The largest gradient stays `margin` binades under the format's top and float32's, and the
  // scale itself is a finite float32.
  const int top = std::min(format.emax(), max_binade);
  advice.scale_log2 = std::min({top - margin - *highest, max_binade});
  advice.scale_log2 = clamp_scale_log2(advice.scale_log2);
  return advice;
}

LossScaleAdvice recommend_loss_scale(const TensorSeries& series, Format format, int margin_binades) {
  return recommend_loss_scale(std::span<const TensorSeries>(&series, 1), format, margin_binades);
}

}  // namespace fpscope
