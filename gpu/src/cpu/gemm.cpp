// float32 GEMM through OpenBLAS's CBLAS interface (gemm.hpp).
#include "fpscope/gpu/gemm.hpp"

#include <cblas.h>

#include <stdexcept>
#include <string>

namespace fpscope {

Eigen::MatrixXf gemm(const Eigen::MatrixXf& a, bool transpose_a, const Eigen::MatrixXf& b, bool transpose_b) {
  const Eigen::Index m = transpose_a ? a.cols() : a.rows(), k = transpose_a ? a.rows() : a.cols();
  const Eigen::Index kb = transpose_b ? b.cols() : b.rows(), n = transpose_b ? b.rows() : b.cols();
  if (k != kb)
    throw std::invalid_argument("gemm: op(a) is " + std::to_string(m) + "x" + std::to_string(k) + ", op(b) " + std::to_string(kb) + "x" +
                                std::to_string(n));
  Eigen::MatrixXf c(m, n);
  if (m == 0 || n == 0) return c;
  if (k == 0) {
    c.setZero();
    return c;
  }
  // Eigen's default storage is column-major, as CBLAS's ColMajor: leading dimensions are row counts.
  cblas_sgemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.data(), static_cast<blasint>(a.rows()), b.data(),
              static_cast<blasint>(b.rows()), 0.0f, c.data(), static_cast<blasint>(c.rows()));
  return c;
}

void set_gemm_threads(int threads) { openblas_set_num_threads(threads > 0 ? threads : openblas_get_num_procs()); }

int gemm_threads() { return openblas_get_num_threads(); }

int gemm_cores() { return openblas_get_num_procs(); }

}  // namespace fpscope
