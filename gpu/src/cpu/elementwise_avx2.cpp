// The element-wise passes on AVX2 + FMA lanes (elementwise_passes.hpp, lanes_avx2.hpp), called only
// where bulk_isa_supported("avx2"). The shared headers come first, compiled for the baseline
// (kernel_unit_baseline.hpp in core says why).
#include "fpscope/core/instruction_set_unit.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/elementwise_math.hpp"
#include "fpscope/gpu/gpt_element.hpp"

FPSCOPE_BEGIN_AVX2_UNIT
#include "elementwise_passes.hpp"
#include "lanes_avx2.hpp"

namespace fpscope::element {

const ElementwisePasses avx2_passes = passes_for<elementwise_avx2::Lanes>();

}  // namespace fpscope::element
FPSCOPE_END_KERNEL_UNIT
