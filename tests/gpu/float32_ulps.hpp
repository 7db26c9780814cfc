// How far a float32 result is from the exact value, in units of float32's ulp at the exact value
// (the subnormal spacing below the normal range): the measure the element-wise math's accuracy
// bounds are stated in (elementwise_math.hpp), for tests/gpu/test_activation_pass.cpp and the
// exhaustive sweep tests/exhaustive/elementwise_math.cpp.
#pragma once

#include <algorithm>
#include <cmath>

namespace fpscope::test {

// An infinity counts as 2^128 where the exact value rounds to it (0 then); a NaN is 0 from a NaN.
inline double float32_ulps(float got, double exact) {
  if (std::isnan(exact)) return std::isnan(got) ? 0 : 1e9;
  if (std::isinf(got) && std::isinf(static_cast<float>(exact)) && (got > 0) == (exact > 0)) return 0;
  const double as_number = std::isinf(got) ? std::copysign(std::ldexp(1.0, 128), got) : static_cast<double>(got);
  int exponent = 0;
  std::frexp(std::abs(exact), &exponent);
  return std::abs(as_number - exact) / std::ldexp(1.0, std::max(exponent - 1, -126) - 23);
}

}  // namespace fpscope::test
