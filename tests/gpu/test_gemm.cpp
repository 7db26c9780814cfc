// The CPU backend's GEMM (OpenBLAS): every transpose combination against Eigen's product on
// integers (each partial sum exact in float32, so any summation order gives the same bits), empty
// and k = 0 shapes, and shapes that do not agree.
#include <doctest/doctest.h>

#include <random>

#include "fpscope/gpu/gemm.hpp"

using namespace fpscope;

namespace {
Eigen::MatrixXf integers(Eigen::Index rows, Eigen::Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(-64, 64);
  Eigen::MatrixXf m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(pick(rng));
  return m;
}
}  // namespace

TEST_CASE("gemm: op(a) op(b) for every transpose, bit for bit where the sums are exact") {
  const Eigen::Index m = 37, k = 129, n = 21;  // not multiples of any kernel's tile
  for (const bool ta : {false, true})
    for (const bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const Eigen::MatrixXf a = ta ? integers(k, m, 1) : integers(m, k, 1);
      const Eigen::MatrixXf b = tb ? integers(n, k, 2) : integers(k, n, 2);
      const Eigen::MatrixXf expected = (ta ? Eigen::MatrixXf(a.transpose()) : a) * (tb ? Eigen::MatrixXf(b.transpose()) : b);
      const Eigen::MatrixXf c = gemm(a, ta, b, tb);
      REQUIRE(c.rows() == m);
      REQUIRE(c.cols() == n);
      CHECK(c == expected);
    }
}

TEST_CASE("gemm: empty shapes, k = 0 gives zeros, and shapes that disagree are refused") {
  CHECK(gemm(Eigen::MatrixXf(0, 3), false, Eigen::MatrixXf(3, 4), false).rows() == 0);
  const Eigen::MatrixXf zeros = gemm(Eigen::MatrixXf(2, 0), false, Eigen::MatrixXf(0, 5), false);
  CHECK(zeros.rows() == 2);
  CHECK(zeros.cols() == 5);
  CHECK(zeros.isZero());
  CHECK_THROWS_AS(gemm(Eigen::MatrixXf(2, 3), false, Eigen::MatrixXf(4, 5), false), std::invalid_argument);
  CHECK_THROWS_AS(gemm(Eigen::MatrixXf(2, 3), true, Eigen::MatrixXf(3, 5), false), std::invalid_argument);
}

TEST_CASE("gemm gives the same bits on any number of threads, where the sums round") {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols) {
    Eigen::MatrixXf m(rows, cols);
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
    return m;
  };
  const Eigen::MatrixXf a = random(70, 300), b = random(300, 200), bt = random(200, 300);  // 200 columns: two slices of 128
  set_gemm_threads(1);
  const Eigen::MatrixXf one = gemm(a, false, b, false), one_t = gemm(a, false, bt, true);
  for (const int threads : {2, 3, 7}) {
    CAPTURE(threads);
    set_gemm_threads(threads);
    CHECK(gemm_threads() == threads);
    CHECK(gemm(a, false, b, false) == one);
    CHECK(gemm(a, false, bt, true) == one_t);
  }
  set_gemm_threads(1);
}
