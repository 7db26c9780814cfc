// Activation passes (activation_pass.hpp). Compiled without FMA contraction (CMakeLists.txt): the
// vector lanes round each operation of the formula as the scalar code does.
#include "activation_pass.hpp"

#include <immintrin.h>

#include <cmath>
#include <type_traits>

#include "fpscope/gpu/parallel.hpp"

// glibc's vector math (libmvec), by its vector-ABI names: 16 lanes (AVX-512), 8 lanes (AVX2),
// declared with the instructions their arguments need (Clang refuses the calls otherwise).
extern "C" {
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_erff(__m512);
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_erff(__m256);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
}

namespace fpscope {

namespace {

constexpr std::size_t grain = 16384;

// Calls body(std::integral_constant<Activation, a>{}): loops written inside see the activation as a
// constant, so that the compiler vectorises them (a switch per element would stop it).
template <typename Body>
void with_activation(Activation a, Body body) {
  switch (a) {
    case Activation::relu: return body(std::integral_constant<Activation, Activation::relu>{});
    case Activation::gelu: return body(std::integral_constant<Activation, Activation::gelu>{});
    case Activation::tanh: return body(std::integral_constant<Activation, Activation::tanh>{});
  }
}

enum class Lanes { scalar, avx2, avx512 };
Lanes lanes() {
  static const Lanes best = __builtin_cpu_supports("avx512f")                                      ? Lanes::avx512
                            : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Lanes::avx2
                                                                                                : Lanes::scalar;
  return best;
}

#define FPSCOPE_AVX512 __attribute__((target("avx512f")))
#define FPSCOPE_AVX2 __attribute__((target("avx2,fma")))

// The vector loops: whole vectors through activation.hpp's formula with libmvec's erf and exp,
// then the tail element by element through the scalar formula (activate()'s).
FPSCOPE_AVX512 void gelu_forward_16(const float* z, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(z + i);
    _mm512_storeu_ps(out + i, FPSCOPE_GELU(x, _ZGVeN16v_erff));
  }
  for (; i < n; ++i) out[i] = gelu_of(z[i]);
}
FPSCOPE_AVX512 void gelu_backward_16(const float* z, const float* gradient, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(z + i);
    _mm512_storeu_ps(out + i, _mm512_loadu_ps(gradient + i) * FPSCOPE_GELU_DERIVATIVE(x, _ZGVeN16v_erff, _ZGVeN16v_expf));
  }
  for (; i < n; ++i) out[i] = gradient[i] * gelu_derivative_of(z[i]);
}
FPSCOPE_AVX2 void gelu_forward_8(const float* z, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(z + i);
    _mm256_storeu_ps(out + i, FPSCOPE_GELU(x, _ZGVdN8v_erff));
  }
  for (; i < n; ++i) out[i] = gelu_of(z[i]);
}
FPSCOPE_AVX2 void gelu_backward_8(const float* z, const float* gradient, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(z + i);
    _mm256_storeu_ps(out + i, _mm256_loadu_ps(gradient + i) * FPSCOPE_GELU_DERIVATIVE(x, _ZGVdN8v_erff, _ZGVdN8v_expf));
  }
  for (; i < n; ++i) out[i] = gradient[i] * gelu_derivative_of(z[i]);
}

FPSCOPE_AVX512 void shifted_exponentials_16(const float* in, float shift, float* out, std::size_t n) {
  const __m512 s = _mm512_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_loadu_ps(in + i), s)));
  if (i < n) {  // the tail through the same function, its unused lanes masked off
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, tail, _ZGVeN16v_expf(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, in + i), s)));
  }
}
FPSCOPE_AVX2 void shifted_exponentials_8(const float* in, float shift, float* out, std::size_t n) {
  const __m256 s = _mm256_set1_ps(shift);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(in + i), s)));
  if (i < n) {
    alignas(32) float lanes_in[8] = {}, lanes_out[8];
    for (std::size_t j = i; j < n; ++j) lanes_in[j - i] = in[j];
    _mm256_store_ps(lanes_out, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_load_ps(lanes_in), s)));
    for (std::size_t j = i; j < n; ++j) out[j] = lanes_out[j - i];
  }
}

}  // namespace

bool gelu_is_vectorised() { return lanes() != Lanes::scalar; }

void shifted_exponentials(const float* in, float shift, float* out, std::size_t n) {
  switch (lanes()) {
    case Lanes::avx512: return shifted_exponentials_16(in, shift, out, n);
    case Lanes::avx2: return shifted_exponentials_8(in, shift, out, n);
    case Lanes::scalar:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::exp(in[i] - shift);
      return;
  }
}

namespace {

// [0, n) on the threads in ranges that start at multiples of 16 elements: the vector loops' tails
// (element by element through the scalar formula, whose erf and exp can differ from the lanes' in
// the last bit) then fall only at n, whatever the thread count, which chooses the ranges.
template <typename Body>
void in_whole_vectors(std::size_t n, Body body) {
  constexpr std::size_t lanes = 16;  // AVX-512's; a multiple of AVX2's 8
  parallel_for((n + lanes - 1) / lanes, grain / lanes,
               [&](std::size_t first, std::size_t last) { body(first * lanes, std::min(last * lanes, n)); });
}

}  // namespace

void activation_forward(Activation a, const float* z, float* out, std::size_t n) {
  if (a == Activation::gelu && lanes() != Lanes::scalar) {
    const bool wide = lanes() == Lanes::avx512;
    in_whole_vectors(n, [&](std::size_t begin, std::size_t end) {
      if (wide) gelu_forward_16(z + begin, out + begin, end - begin);
      else gelu_forward_8(z + begin, out + begin, end - begin);
    });
    return;
  }
  with_activation(a, [&](auto activation) {
    parallel_for(n, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = activate(activation, z[i]);
    });
  });
}

void activation_backward(Activation a, const float* z, const float* gradient, float* out, std::size_t n) {
  if (a == Activation::gelu && lanes() != Lanes::scalar) {
    const bool wide = lanes() == Lanes::avx512;
    in_whole_vectors(n, [&](std::size_t begin, std::size_t end) {
      if (wide) gelu_backward_16(z + begin, gradient + begin, out + begin, end - begin);
      else gelu_backward_8(z + begin, gradient + begin, out + begin, end - begin);
    });
    return;
  }
  with_activation(a, [&](auto activation) {
    parallel_for(n, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) out[i] = gradient[i] * activation_derivative(activation, z[i]);
    });
  });
}

}  // namespace fpscope
