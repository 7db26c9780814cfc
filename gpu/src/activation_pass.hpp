// The CPU backend's activation passes over whole tensors, on the engine's threads: relu and tanh
// element by element (activation.hpp), GELU through glibc's vector math library (libmvec: erff and
// expf on 16 or 8 lanes where the processor has AVX-512 or AVX2) in activation.hpp's one formula;
// and the exponentials of the transformer's softmax rows, through the same library.
// libmvec's functions are within 4 ulp of glibc's scalar ones, not always the same bits: a GELU
// output can differ from activate()'s in its last bits (tests/gpu/test_activation_pass.cpp holds
// them together), and from one instruction set to another, as the GEMMs' sums may.
#pragma once

#include <cstddef>

#include "fpscope/gpu/activation.hpp"

namespace fpscope {

// out[i] = activate(a, z[i]) (out may be z).
void activation_forward(Activation a, const float* z, float* out, std::size_t n);
// out[i] = gradient[i] * activation_derivative(a, z[i]) (out may be gradient).
void activation_backward(Activation a, const float* z, const float* gradient, float* out, std::size_t n);
// Whether GELU runs on libmvec here (else element by element, activate()'s bits).
bool gelu_is_vectorised();

// out[i] = exp(in[i] - shift) (a softmax row's exponentials; out may be in), on the calling thread,
// through libmvec's expf where GELU is (its bits, as above), else std::exp.
void shifted_exponentials(const float* in, float shift, float* out, std::size_t n);

}  // namespace fpscope
