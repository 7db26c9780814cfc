// What a bad step's culprit says, in one line: whether the loss scale is to blame (a gradient
// past the format's largest: by how many binades) or not (an activation or weight past it, or a
// NaN or infinity that appeared with finite inputs). fpscope analyze prints it; the app shows it.
#pragma once

#include <string>

#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// The binades a gradient's scale is too high by: the least k with largest / 2^k within the
// format's largest (at least 1 for a gradient that overflowed). 0 for anything else.
int binades_too_high(const Culprit& culprit);

// "h1.attn.scores activation_gradient overflowed fp16 at loss scale 2^17: its largest, 4.1e+05, is
// past 65504; the scale is 3 binades too high for this tensor (at 2^14 its largest would be
// 5.1e+04)"; for a step without a culprit, what is known. `step` carries the loss scale. A step
// that did not finish (StepRecord::finished) is said to have stopped first: "did not finish (its
// loop stopped inside it: no loss, no update); fc2 activation ...".
std::string culprit_diagnosis(const StepRecord& step);

}  // namespace fpscope
