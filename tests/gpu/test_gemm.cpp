// The CPU backend's GEMM (oneDNN's sgemm or OpenBLAS for float32, each checked where the build
// has it): every transpose combination against Eigen's product on integers (each partial sum
// exact in float32, so any summation order gives the same bits), rounding sums against float64,
// NaN and infinity, empty and k = 0 shapes, and shapes that do not agree.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <cblas.h>

#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "bf16_products.hpp"

using namespace fpscope;

namespace {
// `check` once for each float32 library this build has (OpenBLAS always, oneDNN's sgemm where
// built in), the library set meanwhile; the default is set back after.
template <typename F>
void for_each_float32_library(F check) {
  const Float32Library default_library = gemm_float32_library();
  for (const Float32Library library : {Float32Library::openblas, Float32Library::onednn}) {
    set_gemm_float32_library(library);
    if (gemm_float32_library() != library) continue;  // not built in
    CAPTURE(float32_library_name(library));
    check();
  }
  set_gemm_float32_library(default_library);
}

// A rows x cols matrix of standard normal values drawn from `rng`.
Eigen::MatrixXf normal_matrix(std::mt19937& rng, Eigen::Index rows, Eigen::Index cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Eigen::MatrixXf x(rows, cols);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
  return x;
}

// How many elements of x and y (the same shape) differ in their bits.
Eigen::Index differing_bits(const Eigen::MatrixXf& x, const Eigen::MatrixXf& y) {
  REQUIRE(x.rows() == y.rows());
  REQUIRE(x.cols() == y.cols());
  Eigen::Index differ = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) differ += std::memcmp(x.data() + i, y.data() + i, sizeof(float)) != 0 ? 1 : 0;
  return differ;
}

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
  for_each_float32_library([&] {
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
  });
}

TEST_CASE("gemm: float32 products go to oneDNN's sgemm by default only where it is built in and runs AVX-512 here") {
  // The default as the process started (each test that changes it sets it back).
  const Float32Library at_start = gemm_float32_library();
  set_gemm_float32_library(Float32Library::onednn);
  const bool built_in = gemm_float32_library() == Float32Library::onednn;
  set_gemm_float32_library(at_start);
  // oneDNN's AVX-512 (its avx512_core: F, BW, VL, DQ), unless ONEDNN_MAX_CPU_ISA holds it below
  // (ctest runs this case again with ONEDNN_MAX_CPU_ISA=AVX2: gemm_float32_library_avx2).
  bool avx512 = false;
#if defined(__x86_64__)
  avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
#endif
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  std::string capped = cap == nullptr ? "" : cap;
  std::transform(capped.begin(), capped.end(), capped.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (!capped.empty() && capped != "ALL" && capped.find("AVX512") == std::string::npos && capped.find("AMX") == std::string::npos) avx512 = false;
  const char* forced = std::getenv("FPSCOPE_FLOAT32_PRODUCTS");
  const bool to_openblas = forced != nullptr && std::string_view(forced) == "openblas";
  CAPTURE(built_in);
  CAPTURE(avx512);
  CAPTURE(capped);
  CHECK((at_start == Float32Library::onednn) == (built_in && avx512 && !to_openblas));
  CHECK(float32_library_name(at_start) == (at_start == Float32Library::onednn ? "oneDNN" : "OpenBLAS"));
}

TEST_CASE("cpu_products_description names the library, version and kernels each kind of product runs in now") {
  for_each_float32_library([] {
    const std::string text = cpu_products_description();
    CAPTURE(text);
    const std::string float32_part = text.substr(0, text.find(';'));
    if (gemm_float32_library() == Float32Library::onednn) {
      CHECK(float32_part.rfind("float32: oneDNN ", 0) == 0);
      CHECK(float32_part.find(" sgemm (avx") != std::string::npos);  // the instruction set oneDNN runs here, as it names them
      CHECK(float32_part.back() == ')');
    } else {
      CHECK(float32_part.rfind("float32: OpenBLAS 0.", 0) == 0);
      CHECK(float32_part.find(std::string(" (") + openblas_get_corename() + ")") != std::string::npos);  // the kernels, as OpenBLAS names them
    }
    const bool bf16_kernels = gemm_has_bf16_products();
    CHECK(text.find("; bf16: ") != std::string::npos);
    CHECK((text.find("; bf16: oneDNN ") != std::string::npos) == bf16_kernels);
    set_gemm_bf16_products(false);
    CHECK(cpu_products_description() == float32_part + "; bf16: in float32");
    set_gemm_bf16_products(true);  // as the other cases leave it
    if (bf16_kernels) CHECK(cpu_products_description() == text);
  });
}

TEST_CASE("gemm: float32 products in each library round within float32 accumulation's bound, and NaN and infinity reach C") {
  std::mt19937 rng(23);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols) { return normal_matrix(rng, rows, cols); };
  const Eigen::Index m = 70, k = 300, n = 200;  // two slices of 128 columns, the second partial
  for_each_float32_library([&] {
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        CAPTURE(ta);
        CAPTURE(tb);
        const Eigen::MatrixXf a = ta ? random(k, m) : random(m, k), b = tb ? random(n, k) : random(k, n);
        const Eigen::MatrixXd ad = ta ? Eigen::MatrixXd(a.cast<double>().transpose()) : a.cast<double>();
        const Eigen::MatrixXd bd = tb ? Eigen::MatrixXd(b.cast<double>().transpose()) : b.cast<double>();
        const Eigen::MatrixXd exact = ad * bd, magnitude = ad.cwiseAbs() * bd.cwiseAbs();
        const Eigen::MatrixXf c = gemm(a, ta, b, tb);
        // Products of float32 values rounded, k roundings of a float32 sum: |error| <= (k + 1) *
        // 2^-24 * sum |a||b| (Higham's bound, first order; fused multiply-adds only lower it).
        const double worst = ((c.cast<double>() - exact).cwiseAbs().array() / (magnitude.array() * (k + 1) * std::ldexp(1.0, -24))).maxCoeff();
        CHECK(worst <= 1.0);
        CHECK(worst > 0.0);  // the sums did round: the bound was tested, not met by exact arithmetic
        // A NaN in a poisons a row of C; an infinity in b makes a column infinite, NaN where it meets a zero.
        Eigen::MatrixXf a_bad = a, b_bad = b;
        (ta ? a_bad(4, 2) : a_bad(2, 4)) = std::numeric_limits<float>::quiet_NaN();
        (tb ? b_bad(150, 7) : b_bad(7, 150)) = std::numeric_limits<float>::infinity();
        (ta ? a_bad(7, 9) : a_bad(9, 7)) = 0.0f;
        const Eigen::MatrixXf poisoned = gemm(a_bad, ta, b_bad, tb);
        for (Eigen::Index j = 0; j < n; ++j) CHECK(std::isnan(poisoned(2, j)));
        for (Eigen::Index i = 0; i < m; ++i) CHECK(std::isinf(poisoned(i, 150)) == (i != 2 && i != 9));  // +-inf, but for the NaNs:
        CHECK(std::isnan(poisoned(9, 150)));  // inf * 0
        CHECK(std::isfinite(poisoned(3, 149)));
      }
    // C's previous contents are never read (beta 0): NaN there changes nothing.
    const Eigen::MatrixXf a = random(m, k), b = random(k, n);
    Eigen::MatrixXf c = Eigen::MatrixXf::Constant(m, n, std::numeric_limits<float>::quiet_NaN());
    gemm_block({a.data(), m, k, m}, false, {b.data(), k, n, k}, false, c.data());
    CHECK(c == gemm(a, false, b, false));
  });
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
  const auto random = [&](Eigen::Index rows, Eigen::Index cols) { return normal_matrix(rng, rows, cols); };
  // Columns: two slices of 128; 43 slices of 24, the last partial, which the threads split at
  // several places (a whole run each where gemm makes runs); fewer than one slice.
  for (const Eigen::Index n : {200, 1030, 10}) {
    CAPTURE(n);
    const Eigen::MatrixXf a = random(70, 300), b = random(300, n), bt = random(n, 300), at = random(300, 70);
    for_each_float32_library([&] {
      set_gemm_threads(1);
      const Eigen::MatrixXf one = gemm(a, false, b, false), one_t = gemm(a, false, bt, true), one_tt = gemm(at, true, bt, true);
      for (const int threads : {2, 3, 7}) {
        CAPTURE(threads);
        set_gemm_threads(threads);
        CHECK(gemm_threads() == threads);
        CHECK(gemm(a, false, b, false) == one);
        CHECK(gemm(a, false, bt, true) == one_t);
        CHECK(gemm(at, true, bt, true) == one_tt);
      }
      set_gemm_threads(1);
    });
  }
}

TEST_CASE("gemm: where OpenBLAS's calls make whole runs of slices, a run gives each element the bits of a call per slice") {
  // The property of the machine's OpenBLAS kernels that gemm.cpp relies on where float32_calls_now
  // says whole_runs: an element's sum does not depend on how many slices its call makes, nor on
  // where the call starts among the slices. Shapes of the MLP's and GPT's products and odd ones,
  // every transpose, runs of 1 to 11 slices from several first slices.
  const Float32Library at_start = gemm_float32_library();
  set_gemm_float32_library(Float32Library::openblas);
  const Float32Calls calls = float32_calls_now();
  set_gemm_float32_library(at_start);
  if (!calls.whole_runs) {
    MESSAGE("skipped: OpenBLAS's calls make one slice each on this core (" << std::string(openblas_get_corename()) << ")");
    CHECK(calls.slice_columns == 128);
    return;
  }
  CHECK(calls.slice_columns % 12 == 0);
  std::mt19937 rng(17);
  struct Shape {
    int m, k, n;
  };
  for (const Shape shape : {Shape{256, 784, 1024}, Shape{1024, 256, 1024}, Shape{10, 256, 1024}, Shape{256, 10, 1030}, Shape{37, 129, 300},
                            Shape{768, 256, 500}, Shape{128, 64, 291}})
    for (const bool transpose_a : {false, true})
      for (const bool transpose_b : {false, true}) {
        const int m = shape.m, k = shape.k;
        const Eigen::Index n = shape.n;
        CAPTURE(m);
        CAPTURE(k);
        CAPTURE(n);
        CAPTURE(transpose_a);
        CAPTURE(transpose_b);
        const Eigen::MatrixXf a = transpose_a ? normal_matrix(rng, k, m) : normal_matrix(rng, m, k);
        const Eigen::MatrixXf b = transpose_b ? normal_matrix(rng, n, k) : normal_matrix(rng, k, n);
        const auto call = [&](Eigen::Index column, Eigen::Index columns, Eigen::MatrixXf& c) {
          const float* b_columns = transpose_b ? b.data() + column : b.data() + column * b.rows();
          cblas_sgemm(CblasColMajor, transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m,
                      static_cast<int>(columns), k, 1.0f, a.data(), static_cast<int>(a.rows()), b_columns, static_cast<int>(b.rows()), 0.0f,
                      c.data() + column * m, m);
        };
        const Eigen::Index width = calls.slice_columns, slices = (n + width - 1) / width;
        Eigen::MatrixXf per_slice(m, n), in_runs(m, n);
        for (Eigen::Index slice = 0; slice < slices; ++slice) call(slice * width, std::min(width, n - slice * width), per_slice);
        for (const Eigen::Index run : {1, 2, 3, 5, 8, 11}) {
          CAPTURE(run);
          for (const Eigen::Index first_slice : {Eigen::Index{0}, Eigen::Index{1}, slices / 2, slices - 1}) {
            const Eigen::Index last_slice = std::min(slices, first_slice + run), column = first_slice * width;
            const Eigen::Index columns = std::min(n, last_slice * width) - column;
            in_runs.setConstant(std::numeric_limits<float>::quiet_NaN());
            call(column, columns, in_runs);
            CHECK(std::memcmp(in_runs.data() + column * m, per_slice.data() + column * m, sizeof(float) * static_cast<std::size_t>(columns * m)) == 0);
          }
        }
      }
}

// --- products of bf16 values (oneDNN's bf16 kernels where the processor has them) ---

namespace {
float bf16_value(float x) {  // x rounded to bfloat16 (to nearest even; the inputs here are finite)
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
Eigen::MatrixXf filled(Eigen::Index rows, Eigen::Index cols, float value) { return Eigen::MatrixXf::Constant(rows, cols, value); }
// Standard normal values rounded to bfloat16.
Eigen::MatrixXf random_bf16(std::mt19937& rng, Eigen::Index rows, Eigen::Index cols) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Eigen::MatrixXf x(rows, cols);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = bf16_value(normal(rng));
  return x;
}
// The counts of products made each way by `product`.
template <typename F>
GemmCounts counted(F product) {
  const GemmCounts before = gemm_counts();
  product();
  const GemmCounts after = gemm_counts();
  return {after.float32 - before.float32, after.bf16 - before.bf16, after.bf16_packs - before.bf16_packs, after.multiply_adds - before.multiply_adds};
}
}  // namespace

TEST_CASE("gemm: bf16 operands go to the bf16 kernels where the processor has them, with exact sums bit for bit") {
  if (!gemm_has_bf16_products()) MESSAGE("skipped in part: no bf16 products here (no oneDNN, or no AVX512-BF16 / AMX); the float32 path is checked");
  // Three slices of columns, the last partial; at k = 1024 a transposed S goes through
  // transpose_words' block (its rows a multiple of 1 KiB apart). Sums up to 64 * 64 * 1024 < 2^24.
  const Eigen::Index m = 37, n = 300;
  for (const Eigen::Index k : {Eigen::Index{129}, Eigen::Index{1024}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        CAPTURE(k);
        CAPTURE(ta);
        CAPTURE(tb);
        const Eigen::MatrixXf a = ta ? integers(k, m, 3) : integers(m, k, 3);  // integers up to 64: bf16 values
        const Eigen::MatrixXf b = tb ? integers(n, k, 4) : integers(k, n, 4);
        const Eigen::MatrixXf expected = (ta ? Eigen::MatrixXf(a.transpose()) : a) * (tb ? Eigen::MatrixXf(b.transpose()) : b);
        Eigen::MatrixXf c;
        const GemmCounts made = counted([&] { c = gemm(a, ta, b, tb); });
        CHECK(made.bf16 == (gemm_has_bf16_products() ? 1u : 0u));
        CHECK(made.float32 + made.bf16 == 1u);
        CHECK(made.multiply_adds == static_cast<std::uint64_t>(m * n * k));
        CHECK(c == expected);
      }
}

TEST_CASE("gemm: operands of several products (ProductOperand) are packed once, and each product has the bits it has alone") {
  // A linear layer's three products: W x forward, dy x^T and W^T dy backward.
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols, bool bf16) {
    Eigen::MatrixXf x(rows, cols);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = bf16 ? bf16_value(normal(rng)) : normal(rng);
    return x;
  };
  const Eigen::Index out = 70, in = 300, tokens = 200;
  for (const bool bf16 : {true, false}) {
    CAPTURE(bf16);
    const Eigen::MatrixXf w = random(out, in, true), x = random(in, tokens, true), dy = random(out, tokens, bf16);
    const Eigen::MatrixXf y = gemm(w, false, x, false), dw = gemm(dy, false, x, true), dx = gemm(w, true, dy, false);
    const ProductOperand weight(w), input(x), gradient(dy);
    Eigen::MatrixXf y2, dw2, dx2;
    const GemmCounts made = counted([&] {
      y2 = gemm(weight, false, input, false);
      dw2 = gemm(gradient, false, input, true);
      dx2 = gemm(weight, true, gradient, false);
    });
    CHECK(y2 == y);
    CHECK(dw2 == dw);
    CHECK(dx2 == dx);
    const bool kernels = gemm_has_bf16_products();
    // bf16: three operands packed for three products; a float32 gradient is looked at (its first
    // values) and never packed, and its two products go to float32.
    CHECK(made.bf16 == (kernels ? (bf16 ? 3u : 1u) : 0u));
    CHECK(made.float32 + made.bf16 == 3u);
    CHECK(made.bf16_packs == (kernels ? 2u + (bf16 ? 1u : 0u) : 0u));
  }
}

TEST_CASE("gemm: an operand packed in pieces as its values are made has the products' bits, packed once") {
  // The trainers' casts pack each piece of a bf16 operand as they round it, in any order on any
  // thread (ProductOperand::pack_piece); the products must then see what packing the finished
  // values would have given them: here pieces of uneven sizes packed in shuffled order on the
  // element threads, against a fresh operand of the same values.
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Eigen::Index out = 70, in = 300, tokens = 200;
  for (const bool bf16 : {true, false}) {
    CAPTURE(bf16);
    Eigen::MatrixXf w(out, in), x(in, tokens);
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = bf16_value(normal(rng));
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = bf16_value(normal(rng));
    if (!bf16) x(in - 1, tokens - 1) = 0.1f;  // one value that is not bf16, in the last piece
    const Eigen::MatrixXf y = gemm(w, false, x, false), dx = gemm(w, true, w, false);
    ProductOperand weight(w), input(x);
    const bool kernels = gemm_has_bf16_products();
    CHECK(weight.start_pieces() == kernels);
    CHECK(input.start_pieces() == kernels);
    CHECK_FALSE(weight.start_pieces());  // once
    for (const ProductOperand* operand : {&weight, &input}) {
      const auto size = static_cast<std::size_t>(operand->values().size());
      std::vector<std::pair<std::size_t, std::size_t>> own;  // (offset, size)
      for (std::size_t offset = 0, piece = 1; offset < size; offset += piece, piece = piece * 3 + 5) own.emplace_back(offset, std::min(piece, size - offset));
      std::shuffle(own.begin(), own.end(), rng);
      if (kernels) parallel_for(own.size(), 1, [&](std::size_t first, std::size_t last) {
          for (std::size_t p = first; p < last; ++p) operand->pack_piece(own[p].first, own[p].second);
        });
    }
    if (kernels) CHECK_THROWS_AS(gemm(weight, false, input, false), std::logic_error);  // not finished
    Eigen::MatrixXf y2, dx2;
    const GemmCounts made = counted([&] {
      weight.finish_pieces();
      input.finish_pieces();
      y2 = gemm(weight, false, input, false);
      dx2 = gemm(weight, true, weight, false);
    });
    CHECK(made.bf16_packs == (kernels ? 2u : 0u));  // in pieces, once each; no product packed again
    CHECK(made.bf16 == (kernels ? (bf16 ? 2u : 1u) : 0u));  // an input not all bf16 goes to float32
    CHECK(made.float32 + made.bf16 == 2u);
    const auto bits = [](const Eigen::MatrixXf& m) {
      std::vector<std::uint32_t> b(static_cast<std::size_t>(m.size()));
      std::memcpy(b.data(), m.data(), b.size() * 4);
      return b;
    };
    CHECK(bits(y2) == bits(y));
    CHECK(bits(dx2) == bits(dx));
  }
}

TEST_CASE("gemm: an operand packed from pieces made elsewhere, before its matrix holds them, has the products' bits") {
  // The GPT's stores pack a product's operand as they round it, in a tensor the pass moves into
  // the operand's matrix afterwards (start_pieces(count), pack_piece(piece, offset, n)).
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Eigen::Index out = 70, in = 300, tokens = 200;
  Eigen::MatrixXf w(out, in), made(in, tokens);
  for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = bf16_value(normal(rng));
  for (Eigen::Index i = 0; i < made.size(); ++i) made.data()[i] = bf16_value(normal(rng));
  const Eigen::MatrixXf y = gemm(w, false, made, false);
  const bool kernels = gemm_has_bf16_products();
  const auto bits_of = [](const Eigen::MatrixXf& m) {
    std::vector<std::uint32_t> b(static_cast<std::size_t>(m.size()));
    std::memcpy(b.data(), m.data(), b.size() * 4);
    return b;
  };
  Eigen::MatrixXf x;  // empty until the pieces are done
  ProductOperand weight(w), input(x);
  CHECK(input.start_pieces(static_cast<std::size_t>(made.size())) == kernels);
  if (kernels) {
    const auto size = static_cast<std::size_t>(made.size());
    for (std::size_t offset = 0, piece = 7; offset < size; offset += piece, piece = piece * 2 + 3)
      input.pack_piece(made.data() + offset, offset, std::min(piece, size - offset));
    CHECK_THROWS_AS(input.pack_piece(made.data(), size - 1, 2), std::logic_error);  // past the end
    input.finish_pieces();
  }
  x = std::move(made);
  const GemmCounts counts = counted([&] { CHECK(bits_of(gemm(weight, false, input, false)) == bits_of(y)); });
  CHECK(counts.bf16_packs == (kernels ? 1u : 0u));  // the weights only: the input was packed in pieces
  // A matrix that does not hold the count packed is refused, not multiplied.
  Eigen::MatrixXf shorter;
  ProductOperand wrong(shorter);
  if (kernels) {
    REQUIRE(wrong.start_pieces(static_cast<std::size_t>(x.size())));
    wrong.pack_piece(x.data(), 0, static_cast<std::size_t>(x.size()));
    wrong.finish_pieces();
    shorter = x.leftCols(tokens - 1);
    CHECK_THROWS_AS(gemm(weight, false, wrong, false), std::logic_error);
  }
}

TEST_CASE("a causal triangle packed for the bf16 kernels: the bits and scan of its block made in float32 and packed") {
  // PackedBlock::pack_triangle multiplies and packs in one pass what unpack_triangle (gpt_pass.hpp)
  // makes and PackedBlock::pack packs: every context length's tails, factors that keep bf16
  // values or do not, zeros and subnormal products.
  if (!gemm_has_bf16_products()) {
    MESSAGE("skipped: no bf16 products here (no oneDNN, or no AVX512-BF16 / AMX)");
    return;
  }
  std::mt19937 rng(43);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int context : {1, 5, 16, 31, 32, 33, 64, 100, 128}) {
    for (const float factor : {1.0f, 0.125f, 0.17677669f, 0x1p-120f}) {
      CAPTURE(context);
      CAPTURE(factor);
      const auto t = static_cast<std::size_t>(context);
      std::vector<float> triangle(t * (t + 1) / 2);
      for (std::size_t i = 0; i < triangle.size(); ++i) triangle[i] = i % 7 == 3 ? 0.0f : bf16_value(normal(rng));
      std::vector<float> block(t * t, 0.0f);  // keys x queries, column j query j's
      for (std::size_t j = 0; j < t; ++j)
        for (std::size_t i = 0; i <= j; ++i) block[j * t + i] = triangle[j * (j + 1) / 2 + i] * factor;
      PackedBlock from_triangle, from_block;
      from_triangle.pack_triangle(triangle.data(), context, factor);
      from_block.pack({block.data(), context, context, context});
      CHECK(std::memcmp(from_triangle.bits(), from_block.bits(), t * t * sizeof(std::uint16_t)) == 0);
      CHECK(from_triangle.scan().low_bits == from_block.scan().low_bits);
      CHECK(from_triangle.scan().smallest_field == from_block.scan().smallest_field);
      CHECK(from_triangle.scan().largest_field == from_block.scan().largest_field);
      CHECK(from_triangle.rows() == context);
      CHECK(from_triangle.cols() == context);
    }
  }
}

TEST_CASE("gemm_block: blocks of a larger matrix multiplied in place have gemm's bits on copies of them, both ways") {
  // Attention's head products: a head's rows of a features x tokens matrix, without copying them
  // out. Values that round (normal, not integers), so a different summation order would show;
  // 37 rows (two vectors and a partial one), 300 columns (three slices of 128, the last partial).
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols, bool bf16) {
    Eigen::MatrixXf x(rows, cols);
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = bf16 ? bf16_value(normal(rng)) : normal(rng);
    return x;
  };
  const Eigen::Index m = 37, k = 45, n = 300;
  for_each_float32_library([&] {
  for (const bool bf16 : {true, false})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        CAPTURE(bf16);
        CAPTURE(ta);
        CAPTURE(tb);
        // Each operand a block from row 5, column 3 of a matrix 11 rows taller and 6 columns wider.
        const Eigen::MatrixXf big_a = random((ta ? k : m) + 11, (ta ? m : k) + 6, bf16), big_b = random((tb ? n : k) + 11, (tb ? k : n) + 6, true);
        const Eigen::MatrixXf a = big_a.block(5, 3, big_a.rows() - 11, big_a.cols() - 6), b = big_b.block(5, 3, big_b.rows() - 11, big_b.cols() - 6);
        const auto block_of = [](const Eigen::MatrixXf& big, const Eigen::MatrixXf& part) {
          return MatrixBlock{big.data() + 3 * big.rows() + 5, part.rows(), part.cols(), big.rows()};
        };
        const Eigen::MatrixXf expected = gemm(a, ta, b, tb);
        Eigen::MatrixXf c = Eigen::MatrixXf::Constant(m, n, -1.0f);
        const GemmCounts made = counted([&] { gemm_block(block_of(big_a, a), ta, block_of(big_b, b), tb, c.data()); });
        CHECK(made.bf16 == (gemm_has_bf16_products() && bf16 ? 1u : 0u));
        CHECK(made.float32 + made.bf16 == 1u);
        CHECK(made.multiply_adds == static_cast<std::uint64_t>(m * n * k));
        std::vector<std::uint32_t> got(static_cast<std::size_t>(c.size())), want(got.size());
        std::memcpy(got.data(), c.data(), got.size() * 4);
        std::memcpy(want.data(), expected.data(), want.size() * 4);
        CHECK(got == want);
      }
  });
  float c = 7;
  gemm_block({nullptr, 1, 0, 1}, false, {nullptr, 0, 1, 0}, false, &c);  // k = 0: zeros
  CHECK(c == 0.0f);
  CHECK_THROWS_AS(gemm_block({&c, 1, 2, 1}, false, {&c, 3, 1, 3}, false, &c), std::invalid_argument);
}

TEST_CASE("gemm: bf16 products of rounding sums stay within float32 accumulation's bound, on any number of threads") {
  std::mt19937 rng(11);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols) { return random_bf16(rng, rows, cols); };
  const Eigen::Index m = 64, k = 512, n = 257;
  const Eigen::MatrixXf a = random(m, k), b = random(k, n);
  const Eigen::MatrixXd exact = a.cast<double>() * b.cast<double>();
  const Eigen::MatrixXd magnitude = a.cast<double>().cwiseAbs() * b.cast<double>().cwiseAbs();
  set_gemm_threads(1);
  const Eigen::MatrixXf one = gemm(a, false, b, false);
  // Each product exact, k roundings of a float32 sum: |error| <= k * 2^-24 * sum |a||b| (Higham's bound, first order).
  const double worst = ((one.cast<double>() - exact).cwiseAbs().array() / (magnitude.array() * k * std::ldexp(1.0, -24))).maxCoeff();
  CHECK(worst <= 1.0);
  for (const int threads : {2, 3}) {
    CAPTURE(threads);
    set_gemm_threads(threads);
    CHECK(gemm(a, false, b, false) == one);
  }
  set_gemm_threads(1);
}

TEST_CASE("gemm: bf16 products made in slices of 128 to 512 columns, as the threads have them, give the same bits") {
  if (!gemm_has_bf16_products()) {
    MESSAGE("skipped: no bf16 products here (no oneDNN, or no AVX512-BF16 / AMX)");
    return;
  }
  // The bf16 kernels' slices are 512 columns wide on one thread, 256 on three, 128 on eight for
  // n = 1100 (gemm.cpp): each element's sum must not depend on the slice that makes it, for
  // rounding sums of 768 products, with a row-major or a transposed S. At n = 512 one thread makes
  // the product in one call, two in two, eight in four: with a transposed S, and 784 products in
  // a sum, oneDNN's kernel for a slice of a strided S summed in another order than its kernel for
  // the whole (a 784-512-10 MLP's bf16 run differed on one thread and on two). At k = 1024 and 512
  // the transposition of S goes through a block of its own (transpose_words).
  std::mt19937 rng(17);
  const auto random = [&](Eigen::Index rows, Eigen::Index cols) { return random_bf16(rng, rows, cols); };
  struct Shape {
    Eigen::Index m, k, n;
  };
  for (const Shape shape : {Shape{96, 768, 1100}, Shape{64, 784, 512}, Shape{256, 1024, 650}, Shape{48, 512, 650}})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const auto [m, k, n] = shape;
        CAPTURE(k);
        CAPTURE(n);
        CAPTURE(ta);
        CAPTURE(tb);
        const Eigen::MatrixXf a = ta ? random(k, m) : random(m, k), b = tb ? random(n, k) : random(k, n);
        std::map<int, Eigen::MatrixXf> made;
        std::map<int, std::set<Eigen::Index>> widths;
        for (const int threads : {8, 1, 2, 3}) {
          set_gemm_threads(threads);
          std::mutex mutex;
          made[threads] = gemm(ProductOperand(a), ta, ProductOperand(b), tb, [&](float*, Eigen::Index first, Eigen::Index columns) {
            const std::lock_guard lock(mutex);
            widths[threads].insert(columns);
          });
        }
        set_gemm_threads(1);
        const std::set<Eigen::Index> slices_of_1100_on_8{128, 1100 % 128}, slices_of_512_on_2{256};
        if (n != 650) CHECK(widths[8] == (n == 1100 ? slices_of_1100_on_8 : std::set<Eigen::Index>{128}));
        CHECK(widths[1] == (n == 1100 ? std::set<Eigen::Index>{512, 1100 % 512} : n == 512 ? std::set<Eigen::Index>{512} : std::set<Eigen::Index>{512, 650 % 512}));
        if (n == 512) CHECK(widths[2] == slices_of_512_on_2);
        for (const int threads : {1, 2, 3}) {
          CAPTURE(threads);
          CHECK(differing_bits(made[threads], made[8]) == 0);
        }
      }
}

TEST_CASE("gemm: bf16 operands whose products could meet a subnormal stay in float32, where subnormals are kept") {
  // Hardware bf16 products read subnormal inputs as zero and flush subnormal results: each case
  // here would come out 0 there.
  SUBCASE("a subnormal bf16 operand: 2^-130 * 2^20") {
    Eigen::MatrixXf c;
    const GemmCounts made = counted([&] { c = gemm(filled(3, 5, std::ldexp(1.0f, -130)), false, filled(5, 4, std::ldexp(1.0f, 20)), false); });
    CHECK(made.bf16 == 0u);
    CHECK(c == filled(3, 4, 5 * std::ldexp(1.0f, -110)));
  }
  SUBCASE("normal operands whose products are subnormal: 2^-70 * 2^-60") {
    Eigen::MatrixXf c;
    const GemmCounts made = counted([&] { c = gemm(filled(3, 4, std::ldexp(1.0f, -70)), false, filled(4, 2, std::ldexp(1.0f, -60)), false); });
    CHECK(made.bf16 == 0u);
    CHECK(c == filled(3, 2, std::ldexp(1.0f, -128)));
  }
  SUBCASE("the edge: smallest binades adding to -112 go to the kernels, -113 does not") {
    // 1.5 * 2^-56 has binade -56; the products are multiples of 2^-126 only from -112 on.
    const float at = 1.5f * std::ldexp(1.0f, -56), below = 1.5f * std::ldexp(1.0f, -57);
    Eigen::MatrixXf c;
    GemmCounts made = counted([&] { c = gemm(filled(2, 3, at), false, filled(3, 2, at), false); });
    CHECK(made.bf16 == (gemm_has_bf16_products() ? 1u : 0u));
    CHECK(c == filled(2, 2, 3 * at * at));
    made = counted([&] { c = gemm(filled(2, 3, at), false, filled(3, 2, below), false); });
    CHECK(made.bf16 == 0u);
    CHECK(c == filled(2, 2, 3 * at * below));
  }
  SUBCASE("NaN and infinity, and values bf16 cannot hold") {
    Eigen::MatrixXf a = filled(2, 3, 1.0f), b = filled(3, 2, 2.0f);
    a(0, 0) = std::numeric_limits<float>::infinity();
    CHECK(counted([&] { (void)gemm(a, false, b, false); }).bf16 == 0u);
    a(0, 0) = 1.0f + std::ldexp(1.0f, -10);  // an fp16 value, not a bf16 one
    Eigen::MatrixXf c;
    CHECK(counted([&] { c = gemm(a, false, b, false); }).bf16 == 0u);
    CHECK(c(0, 0) == 6.0f + std::ldexp(1.0f, -9));
  }
}

TEST_CASE("gemm: set_gemm_bf16_products(false) sends every product to float32") {
  set_gemm_bf16_products(false);
  CHECK_FALSE(gemm_has_bf16_products());
  const GemmCounts made = counted([] { (void)gemm(integers(8, 9, 5), false, integers(9, 7, 6), false); });
  CHECK(made.bf16 == 0u);
  CHECK(made.multiply_adds == 8u * 7u * 9u);  // m n k, counted in float32 as in bf16
  set_gemm_bf16_products(true);
}

TEST_CASE("gemm: the epilogue sees every column once, in the slices of the product, after the slice is made") {
  // float32 operands (OpenBLAS) and bf16 ones (oneDNN where the processor has it), on 1 and 3 threads.
  const Eigen::Index m = 37, k = 129, n = 300;  // three slices of columns, the last partial
  for (const bool bf16 : {false, true})
    for (const int threads : {1, 3}) {
      CAPTURE(bf16);
      CAPTURE(threads);
      set_gemm_threads(threads);
      Eigen::MatrixXf a = integers(m, k, 5), b = integers(k, n, 6);
      if (!bf16) a(0, 0) = 0.5f + std::ldexp(1.0f, -20);  // not a bf16 value: float32 products
      const Eigen::MatrixXf plain = gemm(a, false, b, false);
      std::vector<int> seen(static_cast<std::size_t>(n), 0);
      std::mutex mutex;
      // Slices of 128 columns, or for the bf16 kernels 128 to 512 (256 here on one thread); float32
      // ones where OpenBLAS makes whole runs: a run of 24-column slices per thread.
      const Float32Calls calls = float32_calls_now();
      const bool runs = !(bf16 && gemm_has_bf16_products()) && calls.whole_runs;
      const Eigen::Index width = runs ? calls.slice_columns : bf16 && gemm_has_bf16_products() && threads == 1 ? 256 : 128;
      const Eigen::MatrixXf c = gemm(ProductOperand(a), false, ProductOperand(b), false, [&](float* values, Eigen::Index first, Eigen::Index columns) {
        const std::lock_guard lock(mutex);
        CHECK(first % width == 0);
        if (runs) CHECK((columns == n - first || columns % width == 0));
        else CHECK(columns == std::min<Eigen::Index>(width, n - first));
        if (runs && threads == 1) CHECK(columns == n);  // one call makes it all
        for (Eigen::Index j = first; j < first + columns; ++j) ++seen[static_cast<std::size_t>(j)];
        // The slice is made: its values are the product's, then the epilogue's change stays.
        for (Eigen::Index i = 0; i < m * columns; ++i) {
          CHECK_MESSAGE(values[i] == plain.data()[first * m + i], "slice value before the epilogue");
          values[i] += 1.0f;
        }
      });
      CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
      CHECK(c == (plain.array() + 1.0f).matrix());
      // run_epilogue on a made matrix: the same slices.
      Eigen::MatrixXf again = plain;
      std::fill(seen.begin(), seen.end(), 0);
      run_epilogue(again, [&](float* values, Eigen::Index first, Eigen::Index columns) {
        const std::lock_guard lock(mutex);
        for (Eigen::Index j = first; j < first + columns; ++j) ++seen[static_cast<std::size_t>(j)];
        for (Eigen::Index i = 0; i < m * columns; ++i) values[i] += 1.0f;
      });
      CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
      CHECK(again == c);
    }
  set_gemm_threads(1);
}
