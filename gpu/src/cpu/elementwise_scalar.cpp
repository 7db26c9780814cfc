// The element-wise passes one float at a time (elementwise_passes.hpp): the reference the vector
// units are held to, and what runs on a processor without AVX2.
#include "elementwise_passes.hpp"

namespace fpscope::element {

const ElementwisePasses scalar_passes = passes_for<ScalarMemory>();

}  // namespace fpscope::element
