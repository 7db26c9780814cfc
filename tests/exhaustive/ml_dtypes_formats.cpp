// Exhaustive against ml_dtypes: for each narrow format in the tables that
// tests/formats/ml_dtypes_tables.py writes (OCP MX FP4 / FP6, FNUZ FP8, OCP FP8), every encoding
// widened to float32, and every one of the 2^32 float32 inputs rounded to nearest even, must be
// ml_dtypes' bits. One rule differs by design and is checked as fpscope's own: a NaN into a format
// without NaN (FP4, FP6) becomes a zero of the NaN's sign in fpscope (nan.hpp; the OCP MX
// specification leaves it to the implementation); ml_dtypes gives the zero of the other sign.
// A second difference, in ml_dtypes: E8M0 (float8_e8m0fnu) from a float32 subnormal strictly
// between 2^-127 and 1.5 * 2^-127 is 2^-126 in ml_dtypes (it rounds the encoding's fraction as if
// the number were normal), while the nearer power of two, which fpscope gives, is 2^-127; those
// 2^21 - 1 inputs are checked as fpscope's rule and counted apart.
// NaN against NaN counts as equal, widening and narrowing: payloads and signs of NaNs are not
// values (for e5m2, whose NaNs carry payloads, fpscope keeps the payload's top bits and sets the
// quiet bit, as SoftFloat's x86 path does; ml_dtypes drops the low bits without quieting).
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fpscope/core/convert.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/names.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

struct Table {
  std::string name;
  int width = 0;
  std::vector<std::uint32_t> decoded;                            // by encoding
  std::vector<std::pair<std::uint32_t, std::uint32_t>> encoded;  // (first float32 pattern, result)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> sampled;  // (float32 pattern, result)
};

// fpscope's side of a table: a Format through `convert`, or E8M0 (not a Format) through e8m0.hpp.
struct Codec {
  bool e8m0 = false;
  Format format;
  int width() const { return e8m0 ? 8 : format.width(); }
  bool has_nan() const { return e8m0 || format.has_nan(); }
  bool is_nan_code(std::uint32_t code) const { return e8m0 ? e8m0::is_nan(static_cast<std::uint8_t>(code)) : is_nan(format, code); }
  std::uint32_t decode(std::uint32_t code) const {
    Context ctx;
    return e8m0 ? float_bits(e8m0::to_float(static_cast<std::uint8_t>(code)))
                : static_cast<std::uint32_t>(convert(format, formats::fp32, code, ctx));
  }
  std::uint32_t encode(std::uint32_t x, Context& ctx) const {
    return e8m0 ? e8m0::from_float(bits_float(x), ctx) : static_cast<std::uint32_t>(convert(formats::fp32, format, x, ctx));
  }
  std::uint32_t nan_rule_zero(std::uint32_t x) const { return static_cast<std::uint32_t>(signed_zero(format, (x >> 31) != 0)); }
  // The inputs where ml_dtypes' E8M0 rounds a subnormal's encoding rather than its value.
  bool e8m0_subnormal_rule(std::uint32_t x) const { return e8m0 && x > 0x00400000u && x < 0x00600000u; }
};

Codec codec_named(const std::string& name) {
  if (name == "e8m0") return {true, formats::fp32};
  return {false, parse_format(name)};
}

std::vector<Table> read_tables(const char* path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "ml_dtypes_formats: cannot read %s\n", path);
    std::exit(2);
  }
  std::vector<Table> tables;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string word;
    fields >> word;
    if (word == "format") {
      tables.emplace_back();
      fields >> tables.back().name >> tables.back().width;
    } else if (word == "decode") {
      std::uint32_t code = 0, value = 0;
      fields >> std::hex >> code >> value;
      tables.back().decoded.push_back(value);
    } else if (word == "encode") {
      std::uint32_t start = 0, result = 0;
      fields >> std::hex >> start >> result;
      tables.back().encoded.emplace_back(start, result);
    } else if (word == "sample") {
      std::uint32_t input = 0, result = 0;
      fields >> std::hex >> input >> result;
      tables.back().sampled.emplace_back(input, result);
    }
  }
  return tables;
}

bool is_nan32(std::uint32_t bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

// How many inputs were held to fpscope's own rule instead of ml_dtypes' result.
std::string rule_text(const Codec& f, std::uint64_t count) {
  if (f.e8m0) return ", subnormals between 2^-127 and 1.5 * 2^-127 by value: " + std::to_string(count);
  return f.has_nan() ? "" : ", NaN inputs by fpscope's rule: " + std::to_string(count);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: exhaustive_ml_dtypes_formats TABLES.txt (from tests/formats/ml_dtypes_tables.py)\n");
    return 2;
  }
  const std::vector<Table> tables = read_tables(argv[1]);
  std::uint64_t failures = 0;
  for (const Table& table : tables) {
    const Codec f = codec_named(table.name);
    if (f.width() != table.width || table.decoded.size() != (std::size_t{1} << f.width()) ||
        (table.encoded.empty() && table.sampled.empty())) {
      std::printf("FAIL %s: the table does not fit the format (width %d)\n", table.name.c_str(), f.width());
      ++failures;
      continue;
    }
    // Every encoding, widened.
    std::uint64_t decode_mismatches = 0;
    for (std::uint32_t code = 0; code < table.decoded.size(); ++code) {
      const std::uint32_t got = f.decode(code);
      const std::uint32_t expected = table.decoded[code];
      if (got != expected && !(is_nan32(got) && is_nan32(expected))) {
        if (++decode_mismatches <= 3) std::printf("  %s decode %X: fpscope %08X, ml_dtypes %08X\n", table.name.c_str(), code, got, expected);
      }
    }
    // The sampled inputs (every rounding boundary), to nearest even.
    const auto check_input = [&](std::uint32_t x, std::uint32_t expected, std::uint64_t& nan_rule) {
      Context ctx;
      const std::uint32_t got = f.encode(x, ctx);
      if (f.e8m0_subnormal_rule(x)) {  // fpscope: the nearer 2^-127 (code 0); ml_dtypes: 2^-126 (code 1)
        const bool holds = got == 0 && expected == 1;
        if (holds) ++nan_rule;
        return holds;
      }
      if (is_nan32(x) && !f.has_nan()) {
        // fpscope's rule: a zero of the NaN's sign, and invalid.
        const bool holds = got == f.nan_rule_zero(x) && (ctx.flags & flag::invalid) != 0;
        if (holds) ++nan_rule;
        return holds;
      }
      return got == expected || (f.is_nan_code(got) && f.is_nan_code(expected));
    };
    if (table.encoded.empty()) {
      std::uint64_t sample_mismatches = 0, nan_rule = 0;
      for (const auto& [x, expected] : table.sampled) {
        if (check_input(x, expected, nan_rule)) continue;
        if (++sample_mismatches <= 3) {
          Context ctx;
          std::printf("  %s sample %08X: fpscope %X, ml_dtypes %X\n", table.name.c_str(), x, f.encode(x, ctx), expected);
        }
      }
      std::printf("%s %s: %zu encodings widened (%llu differ); %zu boundary inputs to nearest even (%llu differ%s)\n",
                  decode_mismatches + sample_mismatches == 0 ? "OK  " : "FAIL", table.name.c_str(), table.decoded.size(),
                  static_cast<unsigned long long>(decode_mismatches), table.sampled.size(),
                  static_cast<unsigned long long>(sample_mismatches),
                  rule_text(f, nan_rule).c_str());
      failures += decode_mismatches + sample_mismatches;
      continue;
    }
    // Every float32, to nearest even.
    std::atomic<std::uint64_t> nan_rule_holds{0};
    const sweep::Result r = sweep::run(std::uint64_t{1} << 32, [&](std::uint64_t first, std::uint64_t last) {
      // The table's line for `first`: the last one starting at or before it.
      auto line = std::upper_bound(table.encoded.begin(), table.encoded.end(), static_cast<std::uint32_t>(first),
                                   [](std::uint32_t x, const auto& entry) { return x < entry.first; });
      --line;
      std::uint64_t mismatches = 0, nan_rule = 0;
      for (std::uint64_t i = first; i < last; ++i) {
        const auto x = static_cast<std::uint32_t>(i);
        while (line + 1 != table.encoded.end() && (line + 1)->first <= x) ++line;
        if (!check_input(x, line->second, nan_rule) && ++mismatches <= 3) {
          std::lock_guard lock(sweep::print_lock());
          Context ctx;
          std::printf("  %s encode %08X: fpscope %X, ml_dtypes %X%s\n", table.name.c_str(), x, f.encode(x, ctx), line->second,
                      is_nan32(x) && !f.has_nan() ? " (a NaN input: expected a zero of its sign and invalid)" : "");
        }
      }
      nan_rule_holds += nan_rule;
      return mismatches;
    });
    std::printf("%s %s: %zu encodings widened (%llu differ); 4294967296 float32 inputs to nearest even (%llu differ%s) in %.1f s\n",
                decode_mismatches + r.mismatches == 0 ? "OK  " : "FAIL", table.name.c_str(), table.decoded.size(),
                static_cast<unsigned long long>(decode_mismatches), static_cast<unsigned long long>(r.mismatches),
                rule_text(f, nan_rule_holds.load()).c_str(), r.seconds);
    failures += decode_mismatches + r.mismatches;
  }
  std::printf("%s\n", failures == 0 ? "ALL FORMATS AGREE WITH ML_DTYPES" : "FORMATS DIFFER FROM ML_DTYPES");
  return failures == 0 ? 0 : 1;
}
