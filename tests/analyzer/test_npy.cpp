// .npy files written byte by byte here (every version, dtype, order), read into histograms.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "fpscope/analyzer/npy.hpp"
#include "fpscope/core/convert.hpp"

using namespace fpscope;

namespace {

std::filesystem::path temporary(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("fpscope-npy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

// A .npy file as NumPy writes it: magic, version, header length, the header dict padded with
// spaces to a multiple of 64 and ending in a newline, then the data.
void write_npy(const std::filesystem::path& path, const std::string& descr, const std::string& shape, const std::string& data,
               int version = 1, bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
  const std::size_t prefix = version == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  const auto length = static_cast<std::uint32_t>(header.size());
  out += static_cast<char>(length & 0xFF);
  out += static_cast<char>((length >> 8) & 0xFF);
  if (version > 1) {
    out += static_cast<char>((length >> 16) & 0xFF);
    out += static_cast<char>((length >> 24) & 0xFF);
  }
  std::ofstream(path, std::ios::binary) << out << header << data;
}

template <typename T>
std::string bytes_of(const std::vector<T>& values, bool big_endian = false) {
  std::string data(values.size() * sizeof(T), '\0');
  std::memcpy(data.data(), values.data(), data.size());
  if (big_endian)
    for (std::size_t i = 0; i < data.size(); i += sizeof(T)) std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i), data.begin() + static_cast<std::ptrdiff_t>(i + sizeof(T)));
  return data;
}

std::vector<float> sample(std::size_t n) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i % 7 == 0 ? 0.0f : normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30);
  return v;
}

}  // namespace

TEST_CASE("float32, float16, float64 and bfloat16 .npy files give the direct histogram") {
  const std::vector<float> values = sample(3001);
  ExponentHistogram expected;
  expected.add(values);

  const auto f4 = temporary("f4.npy");
  write_npy(f4, "<f4", "(3001,)", bytes_of(values));
  NpyInfo info;
  CHECK(npy_histogram(f4, NpyElements::by_dtype, &info) == expected);
  CHECK(info.count == 3001);
  CHECK(info.shape == std::vector<std::uint64_t>{3001});

  const auto f4_big = temporary("f4_big.npy");
  write_npy(f4_big, ">f4", "(3, 1000)", bytes_of(std::vector<float>(values.begin(), values.begin() + 3000), true), 2, true);
  ExponentHistogram first_3000;
  first_3000.add(std::span<const float>(values).first(3000));
  CHECK(npy_histogram(f4_big) == first_3000);

  // float16 and bfloat16: the histogram of the values they hold, widened exactly.
  std::vector<std::uint16_t> half(values.size()), brain(values.size());
  std::vector<float> half_values(values.size()), brain_values(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    Context ctx;
    half[i] = static_cast<std::uint16_t>(from_float(formats::fp16, values[i], ctx));
    brain[i] = static_cast<std::uint16_t>(from_float(formats::bf16, values[i], ctx));
    half_values[i] = to_float(formats::fp16, half[i], ctx);
    brain_values[i] = to_float(formats::bf16, brain[i], ctx);
  }
  ExponentHistogram expected_half, expected_brain;
  expected_half.add(half_values);
  expected_brain.add(brain_values);
  const auto f2 = temporary("f2.npy");
  write_npy(f2, "<f2", "(3001,)", bytes_of(half), 3);
  CHECK(npy_histogram(f2) == expected_half);
  const auto bf = temporary("bf16.npy");
  write_npy(bf, "bfloat16", "(3001,)", bytes_of(brain));
  CHECK(npy_histogram(bf) == expected_brain);
  const auto raw = temporary("raw_u2.npy");
  write_npy(raw, "<u2", "(3001,)", bytes_of(brain));
  CHECK(npy_histogram(raw, NpyElements::bfloat16) == expected_brain);
  CHECK_THROWS_WITH_AS(npy_histogram(raw), doctest::Contains("pass --as bf16"), NpyError);

  // float64: binned by ilogb, the same binades as the float32 values.
  std::vector<double> doubles(values.begin(), values.end());
  const auto f8 = temporary("f8.npy");
  write_npy(f8, "<f8", "(3001,)", bytes_of(doubles));
  CHECK(npy_histogram(f8) == expected);
}

TEST_CASE("codes of a narrow format (--as): FP8 / FP6 / FP4 one per byte as ml_dtypes saves them, 16-bit codes in either byte order") {
  // Every code of each format, decoded one by one by the scalar reference (to_float), against
  // the file read as codes: the histogram and the values, bit for bit.
  for (const Format f : {formats::e4m3, formats::e5m2, formats::e4m3fnuz, formats::e3m2, formats::e2m3, formats::e2m1, Format{4, 3, Flavour::ieee, 0}}) {
    CAPTURE(f.exponent_bits);
    CAPTURE(f.mantissa_bits);
    std::vector<std::uint8_t> codes;
    std::vector<float> decoded;
    Context ctx;
    for (std::uint32_t code = 0; code < (1u << f.width()); ++code) {
      codes.push_back(static_cast<std::uint8_t>(code));
      decoded.push_back(to_float(f, code, ctx));
    }
    ExponentHistogram expected;
    expected.add(decoded);
    for (const char* descr : {"<V1", "|u1", "|i1"}) {
      const auto file = temporary("codes.npy");
      write_npy(file, descr, "(" + std::to_string(codes.size()) + ",)", bytes_of(codes));
      CHECK(npy_histogram(file, NpyElements{f}) == expected);
      const NpyTensor tensor = npy_read_float32(file, NpyElements{f});
      REQUIRE(tensor.values.size() == decoded.size());
      for (std::size_t i = 0; i < decoded.size(); ++i) CHECK(float_bits(tensor.values[i]) == float_bits(decoded[i]));
    }
  }
  // 2 bytes: bfloat16 and a 10-bit format, big-endian too.
  std::vector<std::uint16_t> brain{0x3F80, 0xC000, 0x0001, 0x7F80, 0x7FC0}, narrow{0x000, 0x1FF, 0x3C0, 0x201};
  Context ctx;
  for (const bool big : {false, true}) {
    const auto file = temporary("codes16.npy");
    write_npy(file, big ? ">V2" : "<V2", "(5,)", bytes_of(brain, big));
    const NpyTensor tensor = npy_read_float32(file, NpyElements::bfloat16);
    for (std::size_t i = 0; i < brain.size(); ++i) CHECK(float_bits(tensor.values[i]) == float_bits(to_float(formats::bf16, brain[i], ctx)));
    const Format e5m4{5, 4, Flavour::ieee, 0};
    write_npy(file, big ? ">u2" : "<u2", "(4,)", bytes_of(narrow, big));
    const NpyTensor t10 = npy_read_float32(file, NpyElements{e5m4});
    for (std::size_t i = 0; i < narrow.size(); ++i) CHECK(float_bits(t10.values[i]) == float_bits(to_float(e5m4, narrow[i], ctx)));
  }
  // A code wider than the format, a dtype of another size, no --as, a format too wide.
  const auto wide = temporary("wide.npy");
  write_npy(wide, "|u1", "(4,)", bytes_of(std::vector<std::uint8_t>{1, 2, 15, 16}));
  CHECK_THROWS_WITH_AS(npy_histogram(wide, NpyElements{formats::e2m1}), doctest::Contains("element 3 is 0x10, not a 4-bit e2m1 code"), NpyError);
  CHECK_THROWS_WITH_AS(npy_read_float32(wide, NpyElements{formats::e2m1}), doctest::Contains("element 3 is 0x10"), NpyError);
  CHECK_THROWS_WITH_AS(npy_histogram(wide), doctest::Contains("pass --as FORMAT"), NpyError);
  CHECK_THROWS_WITH_AS(npy_histogram(wide, NpyElements::bfloat16), doctest::Contains("bf16 codes are 2-byte elements"), NpyError);
  const auto floats = temporary("floats_as.npy");
  write_npy(floats, "<f4", "(2,)", bytes_of(std::vector<float>{1, 2}));
  CHECK_THROWS_WITH_AS(npy_histogram(floats, NpyElements{formats::e4m3}), doctest::Contains("has dtype '<f4': e4m3 codes are 1-byte"), NpyError);
  CHECK_THROWS_WITH_AS(npy_histogram(floats, NpyElements{formats::fp32}), doctest::Contains("16 bits or fewer"), NpyError);
}

TEST_CASE("bad .npy files: one clear sentence naming the file") {
  const auto truncated = temporary("truncated.npy");
  write_npy(truncated, "<f4", "(1000,)", std::string(100, '\0'));
  CHECK_THROWS_WITH_AS(npy_histogram(truncated), doctest::Contains("truncated.npy: truncated"), NpyError);
  const auto object = temporary("object.npy");
  write_npy(object, "|O", "(3,)", std::string(24, '\0'));
  CHECK_THROWS_WITH_AS(npy_histogram(object), doctest::Contains("object.npy: holds Python objects"), NpyError);
  const auto ints = temporary("ints.npy");
  write_npy(ints, "<i8", "(3,)", std::string(24, '\0'));
  CHECK_THROWS_WITH_AS(npy_histogram(ints), doctest::Contains("has dtype '<i8'"), NpyError);
  const auto not_npy = temporary("not.npy");
  std::ofstream(not_npy) << "hello";
  CHECK_THROWS_WITH_AS(npy_histogram(not_npy), doctest::Contains("not a NumPy .npy file"), NpyError);
  CHECK_THROWS_AS(npy_histogram(temporary("absent.npy")), NpyError);
}

TEST_CASE("the shape tuple: every form NumPy writes is read, anything else is refused") {
  const std::vector<float> values = sample(12);
  for (const auto& [shape, count] : std::vector<std::pair<std::string, std::uint64_t>>{
           {"(12,)", 12}, {"(3, 4)", 12}, {"(2,3,2)", 12}, {"(12L,)", 12}, {"( 12 , )", 12}, {"(12)", 12}, {"()", 1}, {"(0,)", 0}, {"(3, 0, 4)", 0}}) {
    CAPTURE(shape);
    const auto file = temporary("shape.npy");
    write_npy(file, "<f4", shape, bytes_of(values));
    NpyInfo info;
    const ExponentHistogram h = npy_histogram(file, NpyElements::by_dtype, &info);
    CHECK(info.count == count);
    CHECK(h.total_count() == count);
  }
  // Found by fuzzing (tests/fuzz/findings): an empty shape value read past its end.
  for (const std::string shape : {"", ",(5,)", "(5,", "5,)", "(5,,)", "(,5)", "(3 4)", "(-3,)", "(3.0,)", "(0x10,)", "(L,)", "(99999999999999999999,)"}) {
    CAPTURE(shape);
    const auto file = temporary("bad_shape.npy");
    write_npy(file, "<f4", shape, bytes_of(values));
    CHECK_THROWS_WITH_AS(npy_histogram(file), doctest::Contains("bad_shape.npy: "), NpyError);
  }
  // Extents whose product does not fit 64 bits must not wrap around to a small count.
  const auto huge = temporary("huge_shape.npy");
  write_npy(huge, "<f4", "(4294967296, 4294967296)", bytes_of(values));
  CHECK_THROWS_WITH_AS(npy_histogram(huge), doctest::Contains("more elements than can be addressed"), NpyError);
  const auto order = temporary("bad_order.npy");
  write_npy(order, "<f4", "(12,)", bytes_of(values));
  {
    std::string bytes;
    std::ifstream in(order, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
    bytes.replace(bytes.find("False"), 5, "Fals3");
    std::ofstream(order, std::ios::binary | std::ios::trunc) << bytes;
  }
  CHECK_THROWS_WITH_AS(npy_histogram(order), doctest::Contains("expected True or False"), NpyError);
}

TEST_CASE("a folder of .npy files is one snapshot, one tensor per file") {
  const auto folder = temporary("folder");
  std::filesystem::create_directories(folder);
  write_npy(folder / "b_weights.npy", "<f4", "(2,)", bytes_of(std::vector<float>{1.0f, 0.25f}));
  write_npy(folder / "a_grads.npy", "<f4", "(1,)", bytes_of(std::vector<float>{0.0f}));
  // An unrelated broken link and a link loop among them: skipped, each with a warning.
  std::filesystem::remove(folder / "dangling.npy");
  std::filesystem::remove(folder / "loop.npy");
  std::filesystem::create_symlink(folder / "nothing-here.npy", folder / "dangling.npy");
  std::filesystem::create_symlink(folder / "loop.npy", folder / "loop.npy");
  std::vector<std::string> warnings;
  const Snapshot s = npy_folder_snapshot(folder, NpyElements::by_dtype, warnings);
  CHECK(warnings.size() == 2);
  for (const std::string& w : warnings) CHECK(w.find("skipped") != std::string::npos);
  REQUIRE(s.tensors.size() == 2);
  CHECK(s.tensors[0].name == "a_grads");
  CHECK(s.tensors[0].histogram.zero_count() == 1);
  CHECK(s.tensors[1].histogram.count(0) == 1);
  CHECK(s.tensors[1].histogram.count(-2) == 1);
  CHECK_THROWS_AS(npy_folder_snapshot(temporary("empty_folder_that_is_absent"), NpyElements::by_dtype, warnings), NpyError);
}
