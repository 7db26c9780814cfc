// A rounding mode known at run time handed to code templated on it: body.template operator()<Mode>()
// for the mode asked, so each mode's element loop is compiled for that mode alone.
#pragma once

#include "fpscope/core/context.hpp"

namespace fpscope {

template <typename Body>
decltype(auto) with_rounding_mode(RoundingMode mode, Body&& body) {
  switch (mode) {
    case RoundingMode::nearest_even: return body.template operator()<RoundingMode::nearest_even>();
    case RoundingMode::nearest_away: return body.template operator()<RoundingMode::nearest_away>();
    case RoundingMode::toward_zero: return body.template operator()<RoundingMode::toward_zero>();
    case RoundingMode::toward_positive: return body.template operator()<RoundingMode::toward_positive>();
    case RoundingMode::toward_negative: return body.template operator()<RoundingMode::toward_negative>();
    case RoundingMode::odd: return body.template operator()<RoundingMode::odd>();
    case RoundingMode::stochastic: break;
  }
  return body.template operator()<RoundingMode::stochastic>();
}

}  // namespace fpscope
