// The element-wise passes on AVX-512 lanes (elementwise_passes.hpp, lanes_avx512.hpp), called only
// where bulk_isa_supported("avx512"). The shared headers come first, compiled for the baseline
// (kernel_unit_baseline.hpp in core says why).
#include "fpscope/core/instruction_set_unit.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/elementwise_math.hpp"
#include "fpscope/gpu/gpt_element.hpp"

// GCC 12 warns of uninitialised lanes inside the shift and conversion intrinsics (their
// _mm512_undefined_epi32() source; GCC bug 105593, fixed in GCC 13): not a read of ours.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
FPSCOPE_BEGIN_AVX512_UNIT
#include "elementwise_passes.hpp"
#include "lanes_avx512.hpp"

namespace fpscope::element {

const ElementwisePasses avx512_passes = passes_for<elementwise_avx512::Lanes>();

}  // namespace fpscope::element
FPSCOPE_END_KERNEL_UNIT
