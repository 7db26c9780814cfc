// TensorBoard's debiased exponential moving average.
#include "fpscope/analyzer/smoothing.hpp"

#include <cmath>
#include <limits>

namespace fpscope {

std::vector<double> smoothed_curve(const std::vector<double>& values, double weight) {
  std::vector<double> out(values.size(), std::numeric_limits<double>::quiet_NaN());
  double average = 0, weight_power = 1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) continue;
    if (weight <= 0) {
      out[i] = values[i];
      continue;
    }
    average = average * weight + (1 - weight) * values[i];
    weight_power *= weight;
    out[i] = average / (1 - weight_power);
  }
  return out;
}

}  // namespace fpscope
