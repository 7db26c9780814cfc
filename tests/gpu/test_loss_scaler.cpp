// Loss scalers on scripted finite / non-finite patterns, against hand-written sequences.
#include <doctest/doctest.h>

#include <limits>
#include <vector>

#include "fpscope/gpu/loss_scaler.hpp"

using namespace fpscope;

namespace {
struct Expect {
  bool non_finite;
  bool skipped;
  double scale_after;
};
void run(LossScaler& scaler, const std::vector<Expect>& script) {
  for (std::size_t i = 0; i < script.size(); ++i) {
    CAPTURE(i);
    CHECK(scaler.update(script[i].non_finite) == script[i].skipped);
    CHECK(scaler.scale() == script[i].scale_after);
  }
}
}  // namespace

TEST_CASE("GradScaler's rule: x0.5 and skip on inf/NaN, x2 after growth_interval finite steps") {
  LossScalerConfig config = LossScalerConfig::pytorch();
  CHECK(config.initial_scale == 65536.0);
  CHECK(config.growth_interval == 2000);
  config.growth_interval = 3;
  LossScaler scaler(config);
  CHECK(scaler.scale() == 65536.0);
  run(scaler, {{false, false, 65536}, {false, false, 65536}, {false, false, 131072},  // third finite step grows
               {true, true, 65536},                                                      // backoff, counter reset
               {false, false, 65536}, {false, false, 65536}, {true, true, 32768},       // reset before growing
               {true, true, 16384},
               {false, false, 16384}, {false, false, 16384}, {false, false, 32768},
               // after a growth the count starts over: the next growth is three steps later
               {false, false, 32768}, {false, false, 32768}, {false, false, 65536}});
  CHECK(scaler.state().skipped_steps == 3);
}

TEST_CASE("the default GradScaler grows only after 2000 finite steps") {
  LossScaler scaler;
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  CHECK(scaler.scale() == 65536.0);
  scaler.update(false);
  CHECK(scaler.scale() == 131072.0);
}

TEST_CASE("a diverged run's back-offs stop at the smallest normal float32, never at 0") {
  // 2^16 halved 300 times would be 2^-284: 0 as the float32 that multiplies the loss.
  LossScaler scaler;
  for (int i = 0; i < 300; ++i) CHECK(scaler.update(true));
  CHECK(scaler.scale() == static_cast<double>(std::numeric_limits<float>::min()));
  CHECK(static_cast<float>(scaler.scale()) == std::numeric_limits<float>::min());
  CHECK(scaler.state().skipped_steps == 300);
  for (int i = 0; i < 2000; ++i) CHECK_FALSE(scaler.update(false));
  CHECK(scaler.scale() == 2.0 * static_cast<double>(std::numeric_limits<float>::min()));  // and grows again
}

TEST_CASE("TensorFlow's defaults: 2^15 and a floor of 1") {
  LossScalerConfig config = LossScalerConfig::tensorflow();
  CHECK(config.initial_scale == 32768.0);
  config.initial_scale = 4;
  LossScaler scaler(config);
  run(scaler, {{true, true, 2}, {true, true, 1}, {true, true, 1}, {false, false, 1}});
}

TEST_CASE("DeepSpeed-style hysteresis: the first overflow is tolerated, the second backs off") {
  LossScalerConfig config = LossScalerConfig::deepspeed();
  config.growth_interval = 2;
  LossScaler scaler(config);
  run(scaler, {{true, true, 65536},    // hysteresis 2 -> 1: skip, keep the scale
               {true, true, 32768},    // now back off
               {true, true, 16384},
               {false, false, 16384}, {false, false, 32768},  // growth restores the hysteresis
               {true, true, 32768}});
}

TEST_CASE("no scaling and a static scale never change; they still report skips") {
  LossScaler none(LossScalerConfig::none());
  run(none, {{false, false, 1}, {true, true, 1}});
  LossScaler fixed(LossScalerConfig::fixed(1024));
  run(fixed, {{true, true, 1024}, {false, false, 1024}});
  CHECK(describe(LossScalerConfig::fixed(1024)) == "static 1024");
}

TEST_CASE("the state is the whole scaler: restoring it resumes the same sequence") {
  LossScalerConfig config = LossScalerConfig::pytorch();
  config.growth_interval = 4;
  LossScaler a(config), b(config);
  for (const bool bad : {false, false, true, false, false}) a.update(bad);
  b.restore(a.state());
  for (const bool bad : {false, false, false, true, false, false, false, false, false}) {
    CHECK(a.update(bad) == b.update(bad));
    CHECK(a.state() == b.state());
  }
}
