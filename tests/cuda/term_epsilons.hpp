// How far a CUDA activation is from the CPU's where CUDA's erff / expf / tanhf are not glibc's:
// GELU and the derivatives subtract nearly equal terms (1 + erf(-large), 1 - tanh^2 near 1), which
// turns a last-bit difference of those functions into many ulp of a small result, so they are held
// in units of float32's epsilon at the size of their terms: |device - CPU| / (2^-23 max(1, |z|) |g|),
// g the gradient a backward pass multiplies by (1 for a forward pass).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fpscope::test {

// The largest difference of `got` from `expected` in float32 epsilons of the terms, at inputs `z`,
// each scaled by `incoming[i]` where given.
inline double largest_term_error(const std::vector<float>& got, const std::vector<float>& expected, const std::vector<float>& z,
                                 const std::vector<float>* incoming = nullptr) {
  double worst = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    const double factor = incoming != nullptr ? std::abs(static_cast<double>((*incoming)[i])) : 1.0;
    const double size = std::ldexp(1.0, -23) * std::max(1.0, std::abs(static_cast<double>(z[i]))) * factor;
    const double difference = std::abs(static_cast<double>(got[i]) - static_cast<double>(expected[i]));
    worst = std::max(worst, difference == 0 ? 0.0 : size == 0 ? HUGE_VAL : difference / size);
  }
  return worst;
}

}  // namespace fpscope::test
