// The embedded classification data (synthetic_data.hpp): its noise is a standard normal cut at
// +-3.67 (the moments of its table), its labels uniform, every batch the same bits
// on any number of threads, in vector lanes or not, and after a checkpoint's save and restore, and an earlier fpscope's
// checkpoint state (a std::mt19937_64's) going on with that generator's own stream.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

using namespace fpscope;

namespace {
bool same_bits(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.size())) == 0;
}
}  // namespace

TEST_CASE("synthetic data: the noise is a standard normal (cut at 3.67), the labels uniform") {
  // Noise alone: one class whose centre is subtracted out.
  SyntheticClassification data(64, 1, 3, 1.0f);
  Eigen::MatrixXf inputs, centre;
  std::vector<int> labels;
  double sum = 0, squares = 0, fourth = 0, largest = 0;
  std::size_t n = 0;
  SyntheticClassification quiet(64, 1, 3, 0.0f);
  quiet.next_batch(1, centre, labels);
  for (int b = 0; b < 50; ++b) {
    data.next_batch(1000, inputs, labels);
    for (int i = 0; i < inputs.rows(); ++i)
      for (int j = 0; j < inputs.cols(); ++j) {
        const double v = inputs(i, j) - centre(0, j);
        sum += v, squares += v * v, fourth += v * v * v * v, largest = std::max(largest, std::abs(v));
        ++n;
      }
  }
  const double mean = sum / n, variance = squares / n - mean * mean, kurtosis = fourth / n / (variance * variance);
  MESSAGE("3.2 million values: mean " << mean << ", variance " << variance << ", kurtosis " << kurtosis << ", largest " << largest);
  CHECK(std::abs(mean) < 0.003);               // 5 standard errors of the mean
  // The table's distribution (uniform within each of its 4096 cells) has variance 0.99663 and
  // kurtosis 2.9653 (a normal's is 3, a uniform's 1.8): within a few of their standard errors.
  CHECK(std::abs(variance - 0.99663) < 0.004);
  CHECK(std::abs(kurtosis - 2.9653) < 0.015);
  CHECK(largest <= 3.68);
  // Labels of 10 classes over 100,000 rows: each within 4.5 standard deviations of 10,000.
  SyntheticClassification ten(8, 10, 4, 1.0f);
  std::vector<int> counts(10, 0);
  for (int b = 0; b < 100; ++b) {
    ten.next_batch(1000, inputs, labels);
    for (const int label : labels) ++counts[static_cast<std::size_t>(label)];
  }
  for (const int count : counts) CHECK(std::abs(count - 10000) < 4.5 * std::sqrt(10000 * 0.9));
}

TEST_CASE("synthetic data: the same batches on 1, 2 and 7 threads, and after a checkpoint's save and restore") {
  const auto batches = [](int threads) {
    set_parallel_threads(threads);
    SyntheticClassification data(784, 10, 9, 1.0f);
    std::vector<Eigen::MatrixXf> inputs(3);
    std::vector<int> labels;
    for (Eigen::MatrixXf& m : inputs) data.next_batch(256, m, labels);
    return inputs;
  };
  const std::vector<Eigen::MatrixXf> one = batches(1);
  for (const int threads : {2, 7}) {
    const std::vector<Eigen::MatrixXf> other = batches(threads);
    for (std::size_t b = 0; b < one.size(); ++b) CHECK(same_bits(one[b], other[b]));
  }
  set_parallel_threads(1);
  SyntheticClassification data(784, 10, 9, 1.0f), resumed(784, 10, 9, 1.0f);
  Eigen::MatrixXf first, second, again;
  std::vector<int> labels, labels_again;
  data.next_batch(256, first, labels);
  const std::string state = data.save_state();
  data.next_batch(256, second, labels);
  resumed.restore_state(state);
  resumed.next_batch(256, again, labels_again);
  CHECK(same_bits(second, again));
  CHECK(labels == labels_again);
  CHECK_THROWS_WITH(resumed.restore_state("batch x"), "the saved state of the synthetic data does not parse");
}

TEST_CASE("synthetic data: a row's values do not depend on the batch's size, in 16-row lanes or one by one") {
  // A batch's full groups of 16 rows are drawn in AVX-512 lanes where the engine's kernels run
  // AVX-512, a short last group one value at a time: rows 0 .. 14 of a 15-row batch (one by one)
  // against the same rows of a 37-row batch (lanes, where there are lanes), for an odd number of
  // features (the last one from a word's low half alone), the first batch and the second.
  for (const int features : {33, 784}) {
    CAPTURE(features);
    SyntheticClassification short_batches(features, 7, 5, 0.75f), long_batches(features, 7, 5, 0.75f);
    for (int batch = 0; batch < 2; ++batch) {
      CAPTURE(batch);
      Eigen::MatrixXf few, many;
      std::vector<int> few_labels, many_labels;
      short_batches.next_batch(15, few, few_labels);
      long_batches.next_batch(37, many, many_labels);
      CHECK(same_bits(few, many.topRows(15)));
      CHECK(few_labels == std::vector<int>(many_labels.begin(), many_labels.begin() + 15));
    }
  }
}

TEST_CASE("synthetic data: an earlier fpscope's checkpoint state goes on with its own generator") {
  // The earlier generator, written out: centres from the seed in column-major order, then per row a
  // label and the row's noise, one value at a time.
  const int features = 5, classes = 3, rows = 4;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Eigen::MatrixXf centres(classes, features);
  for (Eigen::Index i = 0; i < centres.size(); ++i) centres.data()[i] = normal(rng);
  std::ostringstream saved;
  saved << rng;
  Eigen::MatrixXf expected(rows, features);
  std::vector<int> expected_labels(rows);
  {
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, classes - 1);
    for (int i = 0; i < rows; ++i) {
      expected_labels[static_cast<std::size_t>(i)] = pick(rng);
      for (int j = 0; j < features; ++j) expected(i, j) = centres(expected_labels[static_cast<std::size_t>(i)], j) + 0.5f * noise(rng);
    }
  }
  SyntheticClassification data(features, classes, 11, 0.5f);
  data.restore_state(saved.str());
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  data.next_batch(rows, inputs, labels);
  CHECK(labels == expected_labels);
  CHECK(same_bits(inputs, expected));
}
