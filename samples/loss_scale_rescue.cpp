// Why loss scaling rescues fp16 gradients: small values below 2^-24 flush to zero in fp16;
// multiplying them by a power of two first moves them into range without changing a bit of
// their significands.
//
// Micikevicius et al., "Mixed Precision Training" (ICLR 2018), figure 3: most activation
// gradients of their SSD detector lay below fp16's smallest subnormal, 2^-24; scaling the loss
// by 8 kept enough of them to train. This program makes a synthetic gradient tensor whose
// magnitudes spread over [2^-34, 2^-14), casts it to fp16 with the loss scale 1 and 8, and counts
// what the cast flushed to zero and what it stored exactly.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/exponent_histogram.hpp"

using namespace fpscope;

int main() {
  std::mt19937 rng(2018);
  std::uniform_real_distribution<float> log2_magnitude(-34.0f, -14.0f);
  std::vector<float> gradients(1 << 20);
  for (float& g : gradients) g = (rng() & 1 ? 1.0f : -1.0f) * std::exp2(log2_magnitude(rng));

  ExponentHistogram histogram;
  histogram.add(gradients);
  std::printf("gradient tensor: %zu values, binades %d .. %d\n\n", gradients.size(), histogram.lowest_binade(),
              histogram.highest_binade());
  std::printf("%-11s %-18s %-18s %-14s\n", "loss scale", "flushed to zero", "subnormal in fp16", "fp16 flags");
  for (const float scale : {1.0f, 8.0f, 1024.0f, 65536.0f, 1073741824.0f}) {
    std::vector<float> scaled(gradients.size());
    for (std::size_t i = 0; i < gradients.size(); ++i) scaled[i] = gradients[i] * scale;  // exact: a power of two
    std::vector<std::uint16_t> half(gradients.size());
    Context ctx;
    f32_to_bits(formats::fp16, scaled, half, ctx);
    std::size_t flushed = 0, subnormal = 0;
    for (const std::uint16_t h : half) {
      flushed += (h & 0x7FFF) == 0;
      subnormal += (h & 0x7C00) == 0 && (h & 0x03FF) != 0;
    }
    std::printf("%-11g %6.2f%%            %6.2f%%            %s%s\n", scale, 100.0 * flushed / half.size(),
                100.0 * subnormal / half.size(), (ctx.flags & flag::underflow) ? "underflow " : "",
                (ctx.flags & flag::overflow) ? "overflow" : "");
  }
  std::printf("\nEach factor of 2 in the scale moves every value up one binade: the share flushed to zero\n"
              "falls as the scale grows, until the largest values would pass 65504 and overflow.\n");
  return 0;
}
