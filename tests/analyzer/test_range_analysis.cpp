// Range analysis, the loss-scale advice and the scaler replay on constructed histograms with hand-computed answers.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "fpscope/analyzer/block_analysis.hpp"
#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/analyzer/loss_scale_replay.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/snapshot/snapshot.hpp"

using namespace fpscope;

namespace {
ExponentHistogram histogram_of(std::initializer_list<std::pair<int, std::uint64_t>> bins, std::uint64_t zeros = 0) {
  ExponentHistogram h;
  for (const auto& [binade, count] : bins) h.set_count(binade, count);
  h.set_specials(zeros, 0, 0);
  return h;
}
}  // namespace

TEST_CASE("fp16 edges: 2^-24 is kept, 2^-25 is the boundary, below flushes; 2^15 is the top binade, 2^16 overflows") {
  // One value per binade: 2^-26 (flushed), 2^-25 (rounds up except the exact tie), 2^-24 and
  // 2^-15 (subnormal), 2^-14 (normal), 2^15 = [32768, 65536) holds 65504 and 65520 (normal,
  // may overflow), 2^16 (overflow).
  const ExponentHistogram h = histogram_of({{-26, 1}, {-25, 2}, {-24, 3}, {-15, 4}, {-14, 5}, {15, 6}, {16, 7}}, 8);
  const RangeReport r = analyze_range(h, formats::fp16, 0);
  CHECK(r.total == 36);
  CHECK(r.zero == 8);
  CHECK(r.flushed_to_zero == 1);
  CHECK(r.subnormal == 2 + 3 + 4);
  CHECK(r.boundary_below == 2);
  CHECK(r.normal == 5 + 6);
  CHECK(r.boundary_above == 6);
  CHECK(r.overflow == 7);
  CHECK(r.nonzero_finite() == 28);
  // Scaling by 2 moves every binade up one: 2^-26 becomes the boundary, 2^15 overflows.
  const RangeReport up = analyze_range(h, formats::fp16, 1);
  CHECK(up.flushed_to_zero == 0);
  CHECK(up.boundary_below == 1);
  CHECK(up.overflow == 6 + 7);
}

TEST_CASE("bf16 and FP8 edges") {
  // bf16: subnormals down to 2^-133, top binade 2^127 (float32's range).
  const RangeReport bf16 = analyze_range(histogram_of({{-135, 1}, {-134, 2}, {-133, 3}, {-126, 4}, {127, 5}}), formats::bf16, 0);
  CHECK(bf16.flushed_to_zero == 1);
  CHECK(bf16.boundary_below == 2);
  CHECK(bf16.subnormal == 2 + 3);
  CHECK(bf16.normal == 4 + 5);
  CHECK(bf16.overflow == 0);
  // E4M3: subnormals 2^-9 .. 2^-7, normals 2^-6 .. 2^8 (max 448 in binade 8), nothing above.
  const RangeReport e4m3 = analyze_range(histogram_of({{-11, 1}, {-10, 2}, {-9, 3}, {-6, 4}, {8, 5}, {9, 6}}), formats::e4m3, 0);
  CHECK(e4m3.flushed_to_zero == 1);
  CHECK(e4m3.subnormal == 2 + 3);
  CHECK(e4m3.normal == 4 + 5);
  CHECK(e4m3.boundary_above == 5);
  CHECK(e4m3.overflow == 6);
  // E5M2: subnormals 2^-16 .. 2^-15, max 57344 in binade 15.
  const RangeReport e5m2 = analyze_range(histogram_of({{-18, 1}, {-17, 2}, {-16, 3}, {15, 4}, {16, 5}}), formats::e5m2, 0);
  CHECK(e5m2.flushed_to_zero == 1);
  CHECK(e5m2.subnormal == 2 + 3);
  CHECK(e5m2.normal == 4);
  CHECK(e5m2.overflow == 5);
}

TEST_CASE("a histogram shaped like the paper's SSD gradients: scale 8 recovers [2^-27, 2^-24)") {
  // Micikevicius et al. 2018, figure 3: most activation-gradient values of SSD lie below 2^-24,
  // about two thirds are zero, and the largest are far below fp16's maximum.
  ExponentHistogram h;
  for (int b = -40; b <= -28; ++b) h.set_count(b, 1000);  // lost even at scale 8
  for (int b = -27; b <= -25; ++b) h.set_count(b, 5000);  // the range scale 8 recovers
  for (int b = -24; b <= -10; ++b) h.set_count(b, 2000);
  h.set_specials(67000, 0, 0);
  const RangeReport unscaled = analyze_range(h, formats::fp16, 0);
  const RangeReport by_8 = analyze_range(h, formats::fp16, 3);
  CHECK(unscaled.flushed_to_zero == 13 * 1000 + 2 * 5000);  // 2^-27, 2^-26 flushed; 2^-25 is the boundary
  CHECK(by_8.flushed_to_zero == 12 * 1000);  // -28 becomes the boundary -25: only -40..-29 flush
  CHECK(by_8.overflow == 0);
  CHECK(by_8.subnormal >= 3 * 5000);
  const TensorSeries gradients = single_series("conv", TensorKind::activation_gradient, h);
  const LossScaleAdvice advice = recommend_loss_scale(gradients, formats::fp16);
  CHECK(advice.kind == LossScaleAdvice::Kind::scale);
  CHECK(advice.scale_log2 == 15 - 1 - (-10));  // largest value 2^-10 kept a binade under 2^16
  CHECK(advice.decided_by == "conv activation_gradient");
  const RangeReport at_advice = analyze_series(gradients, formats::fp16, advice.scale_log2);
  CHECK(at_advice.overflow == 0);
  CHECK(at_advice.flushed_to_zero <= by_8.flushed_to_zero);
}

TEST_CASE("the loss-scale advice: gradients only, the highest one decides, each brought to scale 1 first") {
  const std::vector<TensorSeries> series{
      single_series("fc1", TensorKind::activation_gradient, histogram_of({{-20, 1}, {-5, 1}})),
      single_series("fc2", TensorKind::weight_gradient, histogram_of({{-30, 1}, {2, 1}})),
      single_series("fc2", TensorKind::activation, histogram_of({{14, 1}})),  // not scaled by a loss scale: no say
      single_series("fc3", TensorKind::weight_gradient, ExponentHistogram{})};
  LossScaleAdvice advice = recommend_loss_scale(series, formats::fp16);
  CHECK(advice.kind == LossScaleAdvice::Kind::scale);
  CHECK(advice.scale_log2 == 15 - 1 - 2);
  CHECK(advice.decided_by == "fc2 weight_gradient");
  // The same gradients recorded while a loss scale of 2^8 multiplied them: the same advice.
  const std::vector<TensorSeries> scaled{single_series("fc1", TensorKind::activation_gradient, histogram_of({{-12, 1}, {3, 1}}), 256.0),
                                         single_series("fc2", TensorKind::weight_gradient, histogram_of({{-22, 1}, {10, 1}}), 256.0)};
  CHECK(recommend_loss_scale(scaled, formats::fp16).scale_log2 == 15 - 1 - 2);
  // A wider margin, one binade at a time.
  CHECK(recommend_loss_scale(series, formats::fp16, 3).scale_log2 == 15 - 3 - 2);
}

TEST_CASE("the loss-scale advice comes from the fp32 shadows where a run has them") {
  // The recorded gradient lost its largest values to flushes downstream; its shadow has them.
  const std::vector<TensorSeries> series{
      single_series("fc1", TensorKind::activation_gradient, histogram_of({{-30, 5}, {-20, 1}})),
      single_series(shadow_tensor_name("fc1"), TensorKind::activation_gradient, histogram_of({{-30, 5}, {-20, 1}, {-12, 3}})),
      single_series(shadow_tensor_name("fc1"), TensorKind::activation, histogram_of({{10, 3}}))};
  const LossScaleAdvice advice = recommend_loss_scale(series, formats::fp16);
  CHECK(advice.from_shadow);
  CHECK(advice.scale_log2 == 15 - 1 - (-12));
  CHECK(advice.decided_by == "fc1 (fp32 shadow) activation_gradient");
  const LossScaleAdvice recorded_only = recommend_loss_scale(series[0], formats::fp16);
  CHECK_FALSE(recorded_only.from_shadow);
  CHECK(recorded_only.scale_log2 == 15 - 1 - (-20));
}

TEST_CASE("the loss-scale advice: no gradients, no scaling needed, and never past float32") {
  CHECK(recommend_loss_scale(single_series("fc1", TensorKind::activation, histogram_of({{-30, 5}})), formats::fp16).kind ==
        LossScaleAdvice::Kind::no_gradients);
  CHECK(recommend_loss_scale(single_series("fc1", TensorKind::weight_gradient, ExponentHistogram{}), formats::fp16).kind ==
        LossScaleAdvice::Kind::no_gradients);
  // Ordinary gradients in bf16 lose nothing at 2^0: no scale is advised, not 2^(127 - 1 + 10).
  const LossScaleAdvice bf16 = recommend_loss_scale(single_series("fc1", TensorKind::weight_gradient, histogram_of({{-20, 3}, {-10, 2}})),
                                                    formats::bf16);
  CHECK(bf16.kind == LossScaleAdvice::Kind::no_scaling_needed);
  CHECK(bf16.scale_log2 == 0);
  // The same gradients in fp16 flush and turn subnormal: a scale is advised.
  CHECK(recommend_loss_scale(single_series("fc1", TensorKind::weight_gradient, histogram_of({{-20, 3}, {-10, 2}})), formats::fp16).kind ==
        LossScaleAdvice::Kind::scale);
  // Gradients at float32's bottom in bf16: the scale that would lift them to bf16's top is past
  // what float32 holds; the advice stops at 2^127 (the largest finite float32 power of two).
  const LossScaleAdvice tiny = recommend_loss_scale(single_series("fc1", TensorKind::weight_gradient, histogram_of({{-149, 4}})), formats::bf16);
  CHECK(tiny.kind == LossScaleAdvice::Kind::scale);
  CHECK(tiny.scale_log2 == 127);
}

TEST_CASE("the replay grows the scale every growth_interval finite steps, counting afresh after each growth") {
  LossScalerConfig config = LossScalerConfig::pytorch();
  config.initial_scale = 1;
  config.growth_interval = 3;
  const std::vector<int> maxima(7, -40);  // tiny gradients: never an overflow
  const auto steps = replay_dynamic_scaling(maxima, formats::fp16, config);
  const double expected[] = {1, 1, 1, 2, 2, 2, 4};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i);
    CHECK(steps[i].scale == expected[i]);
  }
}

TEST_CASE("dynamic loss scaling replay follows GradScaler's rule") {
  LossScalerConfig settings = LossScalerConfig::pytorch();
  settings.initial_scale = 1024;  // 2^10
  settings.growth_interval = 3;
  // Binade 4 fits at 2^10 and 2^11 (top binade 15); binade 5 at 2^11 and 6 at 2^10 overflow.
  const std::vector<int> maxima{4, 4, 4, 5, 6, 4, 4, 4, min_binade - 1};
  const auto steps = replay_dynamic_scaling(maxima, formats::fp16, settings);
  REQUIRE(steps.size() == maxima.size());
  const double expected_scales[] = {1024, 1024, 1024, 2048, 1024, 512, 512, 512, 1024};
  const bool expected_overflow[] = {false, false, false, true, true, false, false, false, false};
  for (std::size_t i = 0; i < steps.size(); ++i) {
    CAPTURE(i);
    CHECK(steps[i].scale == expected_scales[i]);
    CHECK(steps[i].overflow == expected_overflow[i]);
  }
}

TEST_CASE("a block's relative window: the published element ranges, counted from the block's top binade") {
  // E4M3: emax 8, emin -6, 3 mantissa bits: normal down to 14 binades below the block's largest,
  // subnormal 3 more, and the binade under the smallest subnormal rounds up to it. E2M1: emax 2,
  // emin 0, 1 bit. MXINT8: integers of 2^-6 in [1, 2); 2^-7 .. 2^-6 rounds to 1.
  CHECK(relative_window(block_formats::mxfp8_e4m3).normal_from == -14);
  CHECK(relative_window(block_formats::mxfp8_e4m3).subnormal_from == -18);
  CHECK(relative_window(block_formats::mxfp8_e5m2).normal_from == -29);
  CHECK(relative_window(block_formats::mxfp8_e5m2).subnormal_from == -32);
  CHECK(relative_window(block_formats::mxfp4).normal_from == -2);
  CHECK(relative_window(block_formats::mxfp4).subnormal_from == -4);
  CHECK(relative_window(block_formats::mxint8).normal_from == -7);
  CHECK(relative_window(block_formats::mxint8).subnormal_from == -7);
  // Against the quantizer: a block of 2^r for every r in mxfp4's window keeps what the window
  // says, and flushes below it (the floor rule, the block's largest 4 = 2^2 in E2M1's top binade).
  const RelativeWindow w = relative_window(block_formats::mxfp4);
  for (int r = -8; r <= 0; ++r) {
    const std::vector<float> block{4.0f, std::ldexp(1.25f, 2 + r)};  // 1.25 * 2^(2 + r): inside binade r, not a subnormal tie
    std::vector<std::uint8_t> codes(2), scales(1);
    float tensor_scale = 0;
    Context ctx;
    BlockStatistics st;
    const BlockFormat two{block_formats::mxfp4.elements, block_formats::mxfp4.element, block_formats::mxfp4.scale, 2};
    block_quantize(two, ScaleRule::floor, {1, 2, BlockAxis::rows, 2}, block, codes, scales, tensor_scale, ctx, &st);
    CAPTURE(r);
    CHECK((st.flushed_to_zero == 1) == (r < w.subnormal_from));
    CHECK((st.made_subnormal == 1) == (r >= w.subnormal_from && r < w.normal_from));
  }
}

TEST_CASE("quantization error: exact from the codes, values beyond float32 counted rather than turned into infinities") {
  // One MXFP4 block of 4 holding 3e38 (0x7F61B1E6): the floor rule's scale 2^125 saturates it to
  // 6 * 2^125; round-up's 2^126 (3e38 / 2^125 > 6) rounds it to 4 * 2^126 = 2^128, beyond
  // float32's largest. The other values land exactly.
  const float big = 3e38f;
  const std::vector<float> values{big, 1.0f, 0.5f, 0.0f};
  const BlockFormat four{block_formats::mxfp4.elements, block_formats::mxfp4.element, block_formats::mxfp4.scale, 4};
  const BlockLayout layout{1, 4, BlockAxis::rows, 4};
  const auto report = [&](ScaleRule rule) { return analyze_blocks(four, rule, layout, values, Context{}); };
  const BlockRuleReport floor = report(ScaleRule::floor), up = report(ScaleRule::round_up);
  CHECK(floor.error.compared == 4);
  CHECK(floor.error.beyond_float32 == 0);
  // 1 and 0.5 under scale 2^125 flush to zero: their errors are themselves.
  CHECK(floor.error.max_abs == static_cast<double>(big) - std::ldexp(6.0, 125));
  CHECK(up.error.compared == 4);
  CHECK(up.error.beyond_float32 == 1);
  CHECK(up.error.max_abs == std::ldexp(1.0, 128) - static_cast<double>(big));
  CHECK(std::isfinite(up.error.rms));
  const double rms = std::sqrt((std::pow(std::ldexp(1.0, 128) - big, 2) + 1.0 + 0.25) / 4);
  CHECK(up.error.rms == doctest::Approx(rms).epsilon(1e-15));  // the sum's own rounding in double
  // A block whose scale is NaN is not compared; its finite neighbours' blocks are.
  const std::vector<float> with_nan{1.0f, std::nanf(""), 2.0f, 3.0f, 1.0f, 0.5f, 0.25f, 2.0f};
  const BlockLayout two_blocks{1, 8, BlockAxis::rows, 4};
  const QuantizationError e = analyze_blocks(four, ScaleRule::floor, two_blocks, with_nan, Context{}).error;
  CHECK(e.compared == 4);
  CHECK(e.max_abs == 0);  // 1, 0.5, 0.25 and 2 under scale 2^-1 are E2M1 values
}

TEST_CASE("tensor series over the store's snapshots (pointers) are the series over copies of them") {
  std::vector<Snapshot> run(3);
  for (std::size_t i = 0; i < run.size(); ++i) {
    run[i].step = static_cast<std::int64_t>(i);
    TensorRecord g;
    g.name = "fc1";
    g.kind = TensorKind::activation_gradient;
    g.scale = i == 2 ? 256.0 : 1.0;  // a part of its own
    g.histogram.set_count(-10 - static_cast<int>(i), 3 + i);
    TensorRecord a = g;
    a.kind = TensorKind::activation;
    a.scale = 1.0;
    a.captured = i == 1 ? Capture::as_stored : Capture::before_cast;
    run[i].tensors = {g, a};
  }
  const std::vector<const Snapshot*> pointers{&run[0], &run[1], &run[2]};
  const std::vector<TensorSeries> copied = tensor_series(std::span<const Snapshot>(run));
  const std::vector<TensorSeries> pointed = tensor_series(std::span<const Snapshot* const>(pointers));
  REQUIRE(copied.size() == 2);
  REQUIRE(pointed.size() == copied.size());
  for (std::size_t i = 0; i < copied.size(); ++i) {
    CHECK(pointed[i].name == copied[i].name);
    CHECK(pointed[i].kind == copied[i].kind);
    CHECK(pointed[i].captured == copied[i].captured);
    CHECK(pointed[i].steps == copied[i].steps);
    CHECK(pointed[i].parts == copied[i].parts);
  }
  CHECK(copied[0].parts.size() == 2);  // scales 2^0 and 2^8 kept apart
  CHECK(copied[1].captured == Capture::as_stored);
}
