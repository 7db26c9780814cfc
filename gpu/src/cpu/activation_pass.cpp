// Activation passes (activation_pass.hpp): the widest element-wise passes the processor runs
// (elementwise_passes.hpp), on the engine's threads.
#include "activation_pass.hpp"

#include <algorithm>

#include "elementwise_passes.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/parallel.hpp"

namespace fpscope {

namespace {

constexpr std::size_t grain = 16384;

const element::ElementwisePasses& passes() {
  static const element::ElementwisePasses& chosen = elementwise_passes_for(bulk_kernel_isa());
  return chosen;
}

// [0, n) on the threads in ranges that start at multiples of 16 elements (whole vectors of either
// width): each range's last few elements go through one partial vector, so only the last range
// has one.
template <typename Body>
void in_whole_vectors(std::size_t n, Body body) {
  constexpr std::size_t lanes = 16;
  parallel_for((n + lanes - 1) / lanes, grain / lanes,
               [&](std::size_t first, std::size_t last) { body(first * lanes, std::min(last * lanes, n)); });
}

}  // namespace

const element::ElementwisePasses& elementwise_passes_for(std::string_view isa) {
  if (isa == "avx512") return element::avx512_passes;
  if (isa == "avx2") return element::avx2_passes;
  return element::scalar_passes;
}

void activation_forward(Activation a, const float* z, float* out, std::size_t n) {
  in_whole_vectors(n, [&](std::size_t begin, std::size_t end) { passes().forward(a, z + begin, out + begin, end - begin); });
}

void activation_backward(Activation a, const float* z, const float* gradient, float* out, std::size_t n) {
  in_whole_vectors(n, [&](std::size_t begin, std::size_t end) {
    passes().backward(a, z + begin, gradient + begin, out + begin, end - begin);
  });
}

void shifted_exponentials(const float* in, float shift, float* out, std::size_t n) { passes().shifted_exponentials(in, shift, out, n); }

std::uint32_t largest_magnitude_bits(const float* in, std::size_t n) { return passes().largest_magnitude_bits(in, n); }

}  // namespace fpscope
