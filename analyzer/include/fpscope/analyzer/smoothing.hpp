// Smoothing a training curve as TensorBoard's scalar dashboard does: an exponential moving
// average s = w s + (1 - w) x, divided by 1 - w^n (n the values seen) so that the first points
// are not pulled towards the average's starting 0.
#pragma once

#include <vector>

namespace fpscope {

// weight in [0, 1): 0 returns the values. Non-finite values are skipped (their result is NaN) and
// do not enter the average: one NaN loss does not erase the curve after it.
std::vector<double> smoothed_curve(const std::vector<double>& values, double weight);

}  // namespace fpscope
