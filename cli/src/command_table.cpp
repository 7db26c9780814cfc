// `fpscope table`: the characteristics of formats, as a teacher writes them on the board.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope::cli {

namespace {

struct TableOptions {
  std::vector<std::string> format_names;
  bool exact = false;
};

// 2^k exactly, as the decimal string of a binary64 power of two.
std::string exact_power_of_two(int k) {
  Context scratch;
  return exact_decimal(formats::fp64, round_pack(formats::fp64, false, k, 1, scratch));
}

// The exact value of the largest finite number of f.
std::string exact_max(Format f) {
  const std::uint64_t mantissa = f.max_finite_bits() & f.mantissa_mask();
  Context scratch;
  return exact_decimal(formats::fp64, round_pack(formats::fp64, false, f.emax() - f.mantissa_bits,
                                                 mantissa | f.min_normal_bits(), scratch));
}

// max as (2 - 2^-j) * 2^emax, with j the mantissa bits set in it (all but the last in OCP FN).
std::string max_expression(Format f) {
  const std::uint64_t mantissa = f.max_finite_bits() & f.mantissa_mask();
  if (mantissa == f.mantissa_mask()) return fmt::format("(2-2^-{})*2^{}", f.mantissa_bits, f.emax());
  return fmt::format("(2-2^-{})*2^{}", f.mantissa_bits - 1, f.emax());
}

double decimal_digits(Format f) { return (f.mantissa_bits + 1) * std::log10(2.0); }
int round_trip_digits(Format f) { return static_cast<int>(std::ceil(1 + (f.mantissa_bits + 1) * std::log10(2.0))); }

std::string approx(const std::string& exact) { return fmt::format("{:.4g}", std::strtod(exact.c_str(), nullptr)); }

std::string compact_table(const std::vector<Format>& formats) {
  std::size_t name_width = 7;
  for (Format f : formats) name_width = std::max(name_width, format_name(f).size());
  std::string out = fmt::format("{:<{}} {:>9} {:>6} {:>6} {:>5}  {:<22} {:<22} {:<30} {:<18} {:>6} {:>20}  {}\n", "format", name_width,
                                "s.e.m", "bias", "emin", "emax", "min subnormal", "min normal", "max", "epsilon",
                                "digits", "finite values", "dtype");
  for (Format f : formats) {
    const std::string max_exact = exact_max(f);
    const std::string max_text =
        max_exact.size() <= 12 ? max_exact : fmt::format("{} ~ {}", max_expression(f), approx(max_exact));
    const std::string dtype = dtype_name(f);
    out += fmt::format("{:<{}} {:>9} {:>6} {:>6} {:>5}  {:<22} {:<22} {:<30} {:<18} {:>6.2f} {:>20}  {}\n", format_name(f), name_width,
                       fmt::format("1.{}.{}", f.exponent_bits, f.mantissa_bits), f.bias(), f.emin(), f.emax(),
                       fmt::format("2^{} ~ {}", f.min_subnormal_exponent(), approx(exact_power_of_two(f.min_subnormal_exponent()))),
                       fmt::format("2^{} ~ {}", f.emin(), approx(exact_power_of_two(f.emin()))), max_text,
                       fmt::format("2^{} ~ {}", f.epsilon_exponent(), approx(exact_power_of_two(f.epsilon_exponent()))),
                       decimal_digits(f), f.finite_count(), dtype.empty() ? "-" : dtype);
  }
  out += "\nExact: every power of two and every max above is exact; '~' values are 4-digit approximations\n"
         "(use --exact for every digit). digits = (m+1)*log10(2); finite values counts +0 and -0.\n"
         "dtype: the format's name in PyTorch, NumPy or ml_dtypes (whichever has it), which every fpscope command reads too.\n";
  return out;
}

std::string exact_listing(const std::vector<Format>& formats) {
  std::string out;
  for (Format f : formats) {
    const std::string note = flavour_description(f.flavour);
    out += fmt::format("{}: 1 sign, {} exponent, {} mantissa bits{}{}{}\n", format_name(f), f.exponent_bits, f.mantissa_bits,
                       note.empty() ? "" : " (", note, note.empty() ? "" : ")");
    out += fmt::format("  bias               {}\n", f.bias());
    out += fmt::format("  emin, emax         {}, {}\n", f.emin(), f.emax());
    out += fmt::format("  min subnormal      2^{} = {}\n", f.min_subnormal_exponent(), exact_power_of_two(f.min_subnormal_exponent()));
    out += fmt::format("  min normal         2^{} = {}\n", f.emin(), exact_power_of_two(f.emin()));
    out += fmt::format("  max                {} = {}\n", max_expression(f), exact_max(f));
    out += fmt::format("  epsilon            2^{} = {}\n", f.epsilon_exponent(), exact_power_of_two(f.epsilon_exponent()));
    out += fmt::format("  decimal digits     {:.4f} (round trip needs {})\n", decimal_digits(f), round_trip_digits(f));
    out += fmt::format("  finite values      {} ({})\n", f.finite_count(), f.has_negative_zero() ? "counting +0 and -0" : "one zero: no -0");
    out += fmt::format("  infinities         {}\n", f.has_infinity() ? "yes" : "no");
    out += fmt::format("  NaN                {}\n\n", f.flavour == Flavour::ieee ? "yes, with payloads" : f.has_nan() ? "one" : "none");
  }
  if (!out.empty()) out.pop_back();
  return out;
}

// The block-scaled formats: element and scale types, block length, the element's range, how
// many binades one block spans below its largest (the element format's own dynamic range), and
// the bits each element costs with its share of the scale.
std::string block_table(const std::vector<BlockFormat>& formats, bool with_e8m0) {
  std::string out = fmt::format("{:<11} {:<9} {:<22} {:>6} {:>12} {:>15} {:>16} {:>14}\n", "block fmt", "element", "scale", "block",
                                "element max", "element min>0", "binades a block", "bits/element");
  for (const BlockFormat& b : formats) {
    const bool int8 = b.elements == BlockFormat::Elements::int8;
    const std::string element = int8 ? "int8" : format_name(b.element);
    const std::string scale = b.scale == BlockFormat::Scale::e8m0 ? "E8M0 (2^-127..2^127)" : "E4M3 + fp32 per tensor";
    const int element_bits = int8 ? 8 : b.element.width();
    const int scale_bits = 8;
    const int min_exponent = int8 ? -6 : b.element.min_subnormal_exponent();
    const int top_exponent = b.element_emax();
    out += fmt::format("{:<11} {:<9} {:<22} {:>6} {:>12} {:>15} {:>16} {:>14.3f}\n", block_format_name(b), element, scale, b.block_size,
                       fmt::format("{}", b.element_max()), fmt::format("2^{}", min_exponent), top_exponent - min_exponent + 1,
                       element_bits + static_cast<double>(scale_bits) / b.block_size);
  }
  if (with_e8m0)
    out += "\ne8m0: the MX scale, 8 exponent bits, no sign, no mantissa, bias 127: 2^-127 .. 2^127 (codes 0x00 .. 0xFE), 0xFF NaN;\n"
           "no zero, no infinity (OCP MX v1.0, 5.4.1; ml_dtypes float8_e8m0fnu).\n";
  out += "\nbinades a block: from the element's smallest subnormal to its largest binade, what one block holds below its largest\n"
         "value (MXINT8: integers of 2^-6 up to 1.98). bits/element: the element's bits plus its share of the block's scale\n"
         "(nvfp4 also has one float32 per tensor).\n";
  return out;
}

void run_table(const TableOptions& options) {
  std::vector<Format> formats;
  std::vector<BlockFormat> blocks;
  bool e8m0 = false;
  for (const auto& name : options.format_names) {
    if (name == "e8m0" || name == "E8M0") {
      e8m0 = true;
      continue;
    }
    try {
      blocks.push_back(parse_block_format(name));
      continue;
    } catch (const UnknownNameError&) {
    }
    formats.push_back(parse_format(name));  // the error names the input
  }
  if (options.format_names.empty()) {
    formats = named_formats();
    blocks = named_block_formats();
    e8m0 = true;
  }
  if (!formats.empty()) fmt::print("{}", options.exact ? exact_listing(formats) : compact_table(formats));
  if (!blocks.empty() || e8m0) fmt::print("{}{}", formats.empty() ? "" : "\n", block_table(blocks, e8m0));
}

}  // namespace

void add_table(CLI::App& app) {
  auto options = std::make_shared<TableOptions>();
  CLI::App* cmd = app.add_subcommand("table", "The characteristics of formats: bias, range, precision, count of values");
  cmd->add_option("FORMAT", options->format_names, "formats to list: element formats, block formats (mxfp8-e4m3, mxfp4, nvfp4, ...) or e8m0 (default: all)");
  cmd->add_flag("--exact", options->exact, "list each format with every digit of every constant");
  cmd->callback([options] { run_table(*options); });
}

}  // namespace fpscope::cli
