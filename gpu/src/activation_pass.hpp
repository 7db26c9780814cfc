// The CPU backend's activation passes over whole tensors, on the engine's threads, and the
// exponentials of the transformer's softmax rows: activation.hpp's functions on the widest vectors
// the processor has (AVX-512, AVX2 or one float at a time, as bulk_kernel_isa() says;
// FPSCOPE_BULK_ISA forces one). Every width gives activate()'s bits for every element, on any number
// of threads: the same bits as the CUDA kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fpscope/gpu/activation.hpp"

namespace fpscope {

namespace element {
struct ElementwisePasses;
}

// out[i] = activate(a, z[i]) (out may be z).
void activation_forward(Activation a, const float* z, float* out, std::size_t n);
// out[i] = gradient[i] * activation_derivative(a, z[i]) (out may be gradient).
void activation_backward(Activation a, const float* z, const float* gradient, float* out, std::size_t n);

// out[i] = exp(in[i] - shift) (a softmax row's exponentials; out may be in), on the calling thread.
void shifted_exponentials(const float* in, float shift, float* out, std::size_t n);

// The GPT's element-wise arithmetic on the calling thread (elementwise_passes.hpp says each):
// out[i] = a[i] + b[i] (out may be a or b); out[i] = in[i] * factor (out may be in).
void add_values(const float* a, const float* b, float* out, std::size_t n);
void scale_values(const float* in, float factor, float* out, std::size_t n);
// out[i] = in[i] / divisor (out may be in); out[i] = p[i] * (dp[i] - dot), a softmax row's gradient.
void divide_values(const float* in, float divisor, float* out, std::size_t n);
void softmax_gradient_values(const float* p, const float* dp, float dot, float* out, std::size_t n);
// sum[f] = the sum over n < columns of values[n * rows + f] (or of a[.] * b[.]), from zero in the
// columns' order: a run of tokens' sum (gpt_pass.hpp's TokenSums).
void sum_columns(const float* values, std::size_t rows, std::size_t columns, float* sum);
void sum_column_products(const float* a, const float* b, std::size_t rows, std::size_t columns, float* sum);
// LayerNorm's column (xhat and out from in) and its input gradient (into out, or added to it):
// gpt_element.hpp's formulas.
void normalize_values(const float* in, float mean, float rstd, const float* gain, const float* bias, float* xhat, float* out, std::size_t n);
void normalize_gradient_values(const float* g, const float* gain, const float* xhat, float mean_g, float mean_gx, float rstd, float* out,
                               bool add, std::size_t n);

// softmax_cross_entropy_row (stride 1) of `rows` rows of `classes` logits, row r at logits + r *
// classes with label labels[r]: its gradient to gradient + r * classes, its loss to losses[r]; on
// the calling thread.
void cross_entropy_rows(const float* logits, std::size_t classes, std::size_t rows, const int* labels, float factor, float* gradient,
                        float* losses);

// One instruction set's passes ("avx512", "avx2", else the scalar ones), for the tests that hold
// each to the scalar reference. Call only those bulk_isa_supported() allows.
const element::ElementwisePasses& elementwise_passes_for(std::string_view isa);

}  // namespace fpscope
