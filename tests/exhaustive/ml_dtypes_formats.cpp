// Exhaustive against ml_dtypes: for each narrow format in the tables that
// tests/formats/ml_dtypes_tables.py writes (OCP MX FP4 / FP6, FNUZ FP8, OCP FP8), every encoding
// widened to float32, and every one of the 2^32 float32 inputs rounded to nearest even, must be
// ml_dtypes' bits. One rule differs by design and is checked as fpscope's own: a NaN into a format
// without NaN (FP4, FP6) becomes a zero of the NaN's sign in fpscope (nan.hpp; the OCP MX
// specification leaves it to the implementation); ml_dtypes gives the zero of the other sign.
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
#include "fpscope/core/names.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

struct Table {
  std::string name;
  int width = 0;
  std::vector<std::uint32_t> decoded;                            // by encoding
  std::vector<std::pair<std::uint32_t, std::uint32_t>> encoded;  // (first float32 pattern, result)
};

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
    }
  }
  return tables;
}

bool is_nan32(std::uint32_t bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: exhaustive_ml_dtypes_formats TABLES.txt (from tests/formats/ml_dtypes_tables.py)\n");
    return 2;
  }
  const std::vector<Table> tables = read_tables(argv[1]);
  std::uint64_t failures = 0;
  for (const Table& table : tables) {
    const Format f = parse_format(table.name);
    if (f.width() != table.width || table.decoded.size() != (std::size_t{1} << f.width()) || table.encoded.empty()) {
      std::printf("FAIL %s: the table does not fit the format (width %d)\n", table.name.c_str(), f.width());
      ++failures;
      continue;
    }
    // Every encoding, widened.
    std::uint64_t decode_mismatches = 0;
    for (std::uint32_t code = 0; code < table.decoded.size(); ++code) {
      Context ctx;
      const auto got = static_cast<std::uint32_t>(convert(f, formats::fp32, code, ctx));
      const std::uint32_t expected = table.decoded[code];
      if (got != expected && !(is_nan32(got) && is_nan32(expected))) {
        if (++decode_mismatches <= 3) std::printf("  %s decode %X: fpscope %08X, ml_dtypes %08X\n", table.name.c_str(), code, got, expected);
      }
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
        Context ctx;
        const auto got = static_cast<std::uint32_t>(convert(formats::fp32, f, x, ctx));
        if (is_nan32(x) && !f.has_nan()) {
          // fpscope's rule: a zero of the NaN's sign, and invalid.
          const bool holds = got == static_cast<std::uint32_t>(signed_zero(f, (x >> 31) != 0)) && (ctx.flags & flag::invalid) != 0;
          if (holds) ++nan_rule;
          else if (++mismatches <= 3) {
            std::lock_guard lock(sweep::print_lock());
            std::printf("  %s NaN input %08X: fpscope %X (flags %02X), expected a zero of its sign and invalid\n", table.name.c_str(), x,
                        got, ctx.flags);
          }
          continue;
        }
        if (got != line->second && !(is_nan(f, got) && is_nan(f, line->second)) && ++mismatches <= 3) {
          std::lock_guard lock(sweep::print_lock());
          std::printf("  %s encode %08X: fpscope %X, ml_dtypes %X\n", table.name.c_str(), x, got, line->second);
        }
      }
      nan_rule_holds += nan_rule;
      return mismatches;
    });
    std::printf("%s %s: %zu encodings widened (%llu differ); 4294967296 float32 inputs to nearest even (%llu differ%s) in %.1f s\n",
                decode_mismatches + r.mismatches == 0 ? "OK  " : "FAIL", table.name.c_str(), table.decoded.size(),
                static_cast<unsigned long long>(decode_mismatches), static_cast<unsigned long long>(r.mismatches),
                f.has_nan() ? "" : (", NaN inputs by fpscope's rule: " + std::to_string(nan_rule_holds.load())).c_str(), r.seconds);
    failures += decode_mismatches + r.mismatches;
  }
  std::printf("%s\n", failures == 0 ? "ALL FORMATS AGREE WITH ML_DTYPES" : "FORMATS DIFFER FROM ML_DTYPES");
  return failures == 0 ? 0 : 1;
}
