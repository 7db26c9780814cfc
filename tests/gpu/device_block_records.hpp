// The comparison the device-step tests make of block statistics recorded on the device (through
// the host twin) against the CPU backend's, for one recorded step, in one place.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>

#include "fpscope/gpu/mlp.hpp"

namespace fpscope::testing {

// Every tensor has block statistics on both sides, of the same format, elements and blocks. Step
// 0: the same weights and inputs; a value that differs in its last float32 bit (products summed in
// another order) almost never changes a binade, so the statistics are the same exactly (those of
// the values after the cast would not be). Later steps may drift: the flushed and zero counts stay
// within 2 + 0.5% of the elements.
inline void check_block_records(const StepResult& got, const StepResult& want, int step) {
  REQUIRE(got.snapshot.has_value());
  REQUIRE(want.snapshot.has_value());
  REQUIRE(got.snapshot->tensors.size() == want.snapshot->tensors.size());
  for (std::size_t t = 0; t < want.snapshot->tensors.size(); ++t) {
    const TensorRecord &g = got.snapshot->tensors[t], &w = want.snapshot->tensors[t];
    CAPTURE(w.name);
    CAPTURE(static_cast<int>(w.kind));
    REQUIRE(g.blocks.has_value());
    REQUIRE(w.blocks.has_value());
    CHECK(g.blocks->format == w.blocks->format);
    CHECK(g.blocks->statistics.elements == w.blocks->statistics.elements);
    CHECK(g.blocks->statistics.blocks == w.blocks->statistics.blocks);
    if (step == 0) CHECK(g.blocks->statistics == w.blocks->statistics);
    const auto gap = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; };
    const std::uint64_t allowed = 2 + w.blocks->statistics.elements / 200;
    CHECK(gap(g.blocks->statistics.flushed_to_zero, w.blocks->statistics.flushed_to_zero) <= allowed);
    CHECK(gap(g.blocks->statistics.zeros, w.blocks->statistics.zeros) <= allowed);
  }
}

}  // namespace fpscope::testing
