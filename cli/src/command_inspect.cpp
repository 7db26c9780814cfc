// `fpscope inspect VALUE`: how each format stores a number, bit by bit, and what it cost.
#include <fmt/core.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/neighbours.hpp"
#include "fpscope/core/round_pack.hpp"
#include "terminal.hpp"

namespace fpscope::cli {

namespace {

struct InspectOptions {
  std::string value;
  std::string bits;
  std::vector<std::string> format_names;
  std::string round = "rne";
  std::string color = "auto";
  bool flush_to_zero = false;
  bool saturate = false;
};

std::string binary(std::uint64_t value, int width) {
  std::string text;
  for (int i = width - 1; i >= 0; --i) text.push_back(((value >> i) & 1) != 0 ? '1' : '0');
  return text;
}

std::string hex_bits(Format f, std::uint64_t bits) {
  return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4);
}

std::string describe_format(Format f) {
  const std::string note = flavour_description(f.flavour), dtype = dtype_name(f);
  return fmt::format("{} bits: 1 sign, {} exponent, {} mantissa{}{}{}{}", f.width(), f.exponent_bits, f.mantissa_bits, note.empty() ? "" : "; ",
                     note, dtype.empty() ? "" : "; dtype ", dtype);
}

std::string power_of_two(int exponent) { return fmt::format("2^{}", exponent); }

// Reads raw bits: hex with 0x, or binary with 0b; must fit the format.
std::uint64_t parse_bits(const std::string& text, Format f) {
  std::string digits = text;
  int base = 16;
  if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) digits = digits.substr(2);
  else if (digits.rfind("0b", 0) == 0 || digits.rfind("0B", 0) == 0) digits = digits.substr(2), base = 2;
  if (digits.empty() || digits.size() > 64) throw UsageError(fmt::format("--bits '{}' is not a hex (0x3C00) or binary (0b0011110000000000) bit pattern", text));
  std::uint64_t value = 0;
  for (const char c : digits) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0 || d >= base) throw UsageError(fmt::format("--bits '{}' is not a hex (0x3C00) or binary (0b0011110000000000) bit pattern", text));
    if (value >> (64 - (base == 16 ? 4 : 1)) != 0) throw UsageError(fmt::format("--bits '{}' has more than 64 bits", text));
    value = value * static_cast<unsigned>(base) + static_cast<unsigned>(d);
  }
  if ((value & ~f.all_bits_mask()) != 0)
    throw UsageError(fmt::format("--bits '{}' does not fit {}, which is {} bits wide", text, format_name(f), f.width()));
  return value;
}

// The neighbour `next` of `bits` (next_up or next_down): "none" where there is nothing beyond.
std::string neighbour_line(Format f, std::uint64_t bits, std::uint64_t next) {
  if (is_nan(f, next)) return "none (NaN)";
  if (next == bits && !is_infinite(f, bits)) return "none (the largest magnitude: a finite format has nothing beyond)";
  bits = next;
  return fmt::format("{}  ({})", exact_decimal(f, bits), hex_bits(f, bits));
}

std::string inspect_one(Format f, std::uint64_t bits, std::uint8_t flags, const ParsedNumber* written,
                        const Context& ctx, const Palette& palette) {
  std::string out;
  const bool finite = is_finite(f, bits);
  out += fmt::format("{}{}{} ({}; {})\n", palette.heading(), format_name(f), palette.reset(), describe_format(f),
                     rounding_mode_name(ctx.rounding));
  const std::uint64_t biased = biased_exponent_of(f, bits);
  out += fmt::format("  bits        {}{}{} | {}{}{} | {}{}{}\n", palette.sign(), sign_of(f, bits) ? 1 : 0, palette.reset(),
                     palette.exponent(), binary(biased, f.exponent_bits), palette.reset(), palette.mantissa(),
                     binary(mantissa_of(f, bits), f.mantissa_bits), palette.reset());
  out += fmt::format("  hex         {}\n", hex_bits(f, bits));
  const FloatClass c = classify(f, bits);
  if (c == FloatClass::normal) {
    out += fmt::format("  exponent    biased {}, unbiased {} (bias {})\n", biased, static_cast<int>(biased) - f.bias(), f.bias());
  } else if (c == FloatClass::subnormal || c == FloatClass::zero) {
    out += fmt::format("  exponent    biased 0: subnormal range, scale 2^{} (emin {}, bias {}), no hidden bit\n",
                       f.emin(), f.emin(), f.bias());
  } else {
    out += fmt::format("  exponent    biased {} ({}; bias {})\n", biased,
                       f.flavour == Flavour::ieee     ? "all ones: infinity or NaN"
                       : f.flavour == Flavour::fnuz   ? "the pattern of -0: the one NaN"
                                                      : "all ones: NaN only with an all-ones mantissa",
                       f.bias());
  }
  out += fmt::format("  class       {}\n", float_class_name(c));
  out += fmt::format("  stored      {}\n", exact_decimal(f, bits));
  if (written != nullptr && written->kind == ParsedNumber::Kind::finite && finite) {
    const ConversionError error = conversion_error(f, bits, *written);
    // Every digit of the difference, signed as stored minus written; "none" only where nothing
    // was lost (a value flushed to zero loses all of it).
    if (error.absolute == "0")
      out += "  error       none: the value is stored exactly\n";
    else
      out += fmt::format("  error       absolute {} (stored minus written, every digit), relative {:.3e}\n", error.absolute, error.relative);
  } else if (written != nullptr && written->kind == ParsedNumber::Kind::finite) {
    out += "  error       the value is not finite in this format\n";
  }
  out += fmt::format("  next up     {}\n", neighbour_line(f, bits, next_up(f, bits)));
  out += fmt::format("  next down   {}\n", neighbour_line(f, bits, next_down(f, bits)));
  if (finite) {
    const int k = ulp_exponent(f, bits);
    Context scratch;  // 2^k is exact in binary64 for every format's ulp
    out += fmt::format("  ulp         {} = {}\n", power_of_two(k), exact_decimal(formats::fp64, round_pack(formats::fp64, false, k, 1, scratch)));
  }
  out += fmt::format("  flags       {}\n", describe_flags(flags));
  return out;
}

// E8M0, the OCP MX block scale (e8m0.hpp), which is no Format: its code, value, neighbours and
// flags. `written`: the number it was rounded from, where there is one.
std::string inspect_e8m0(std::uint8_t code, std::uint8_t flags, const Context& ctx, const Palette& palette) {
  std::string out;
  out += fmt::format("{}e8m0{} (8 bits: 8 exponent, no sign, no mantissa; bias {}; the OCP MX block scale; dtype float8_e8m0fnu; {})\n",
                     palette.heading(), palette.reset(), e8m0::bias, rounding_mode_name(ctx.rounding));
  out += fmt::format("  bits        {}{}{}\n", palette.exponent(), binary(code, 8), palette.reset());
  out += fmt::format("  hex         0x{:02X}\n", code);
  const auto value_text = [](std::uint8_t c) {
    return fmt::format("2^{} = {}", e8m0::exponent_of(c), exact_decimal(formats::fp32, float_bits(e8m0::to_float(c))));
  };
  if (e8m0::is_nan(code)) {
    out += "  class       NaN (0xFF: E8M0 has no zero, no negative numbers and no infinity)\n";
  } else {
    out += fmt::format("  exponent    biased {}, unbiased {} (bias {})\n", code, e8m0::exponent_of(code), e8m0::bias);
    out += fmt::format("  stored      {}\n", value_text(code));
    out += fmt::format("  next up     {}\n", e8m0::exponent_of(code) < e8m0::max_exponent ? value_text(static_cast<std::uint8_t>(code + 1)) + fmt::format("  (0x{:02X})", code + 1)
                                                                                     : std::string("none (2^127 is the largest)"));
    out += fmt::format("  next down   {}\n", code > 0 ? value_text(static_cast<std::uint8_t>(code - 1)) + fmt::format("  (0x{:02X})", code - 1)
                                                    : std::string("none (2^-127 is the smallest: there is no zero)"));
  }
  out += fmt::format("  flags       {}\n", describe_flags(flags));
  return out;
}

void run_inspect(const InspectOptions& options) {
  std::vector<std::optional<Format>> formats;  // nullopt: E8M0
  for (const auto& name : options.format_names) {
    if (names_e8m0(name)) formats.push_back(std::nullopt);
    else formats.push_back(parse_format(name));
  }
  if (formats.empty()) formats = {fpscope::formats::fp16, fpscope::formats::bf16, fpscope::formats::fp32};
  Context base;
  base.rounding = parse_rounding_mode(options.round);
  base.flush_to_zero = options.flush_to_zero;
  base.saturate = options.saturate;
  const Palette palette{use_color(parse_color_choice(options.color))};

  std::string out;
  if (!options.bits.empty()) {
    if (!options.value.empty()) throw UsageError("give either VALUE or --bits, not both");
    // The bits are read in the first format; the value they stand for is shown in the others. An
    // E8M0 code stands for a power of two that float32 holds exactly.
    Format source = fpscope::formats::fp32;
    std::uint64_t source_bits = 0;
    if (formats.front()) {
      source = *formats.front();
      source_bits = parse_bits(options.bits, source);
      out += fmt::format("bits {} of {} = {}\n\n", hex_bits(source, source_bits), format_name(source), exact_decimal(source, source_bits));
    } else {
      const std::uint64_t code = parse_bits(options.bits, Format{7, 0, Flavour::ieee});  // any 8-bit width
      source_bits = float_bits(e8m0::to_float(static_cast<std::uint8_t>(code)));
      out += fmt::format("bits 0x{:02X} of e8m0 = {}\n\n", code, e8m0::is_nan(static_cast<std::uint8_t>(code)) ? std::string("nan")
                                                                                                              : exact_decimal(source, source_bits));
    }
    for (const std::optional<Format>& f : formats) {
      Context ctx = base;
      if (!f) {
        const std::uint8_t code = round_number_e8m0(parse_number(exact_decimal(source, source_bits)), ctx);
        out += inspect_e8m0(code, ctx.flags, ctx, palette) + "\n";
        continue;
      }
      const std::uint64_t bits = convert(source, *f, source_bits, ctx);
      out += inspect_one(*f, bits, ctx.flags, nullptr, ctx, palette) + "\n";
    }
  } else {
    if (options.value.empty()) throw UsageError("inspect needs a VALUE (such as 0.1, 0x1.8p-3, inf, -0) or --bits");
    const ParsedNumber number = parse_number(options.value);
    const bool moderate = number.kind != ParsedNumber::Kind::finite || number.digits.empty() ||
                          std::abs(number.exponent) < 5000;
    out += fmt::format("value {}\n\n", options.value);
    for (const std::optional<Format>& f : formats) {
      Context ctx = base;
      if (!f) {
        const std::uint8_t code = round_number_e8m0(number, ctx);
        out += inspect_e8m0(code, ctx.flags, ctx, palette) + "\n";
        continue;
      }
      const std::uint64_t bits = round_number(*f, number, ctx);
      out += inspect_one(*f, bits, ctx.flags, moderate ? &number : nullptr, ctx, palette) + "\n";
    }
  }
  out.pop_back();  // one blank line between formats, none at the end
  fmt::print("{}", out);
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show how each format stores a number: bits, exponent, exact value, error, neighbours, flags");
  cmd->add_option("VALUE,--value", options->value, "a decimal of any length (0.1, 6.1e-5), a hex float (0x1.8p-3), inf, nan, snan, -0, -inf");
  cmd->add_option("--bits", options->bits, "raw bits of the first --format instead of VALUE (0x3C00 or 0b...)");
  cmd->add_option("-f,--format", options->format_names, "format(s) to show (default fp16 bf16 fp32): fp16 bf16 fp32 fp64 tf32 e4m3 e5m2 e2m1 e2m3 e3m2 e4m3fnuz e5m2fnuz eXmY, or e8m0 (the MX block scale)");
  cmd->add_option("-r,--round", options->round, "rounding mode: rne rna rz ru rd odd stochastic")->capture_default_str();
  cmd->add_flag("--ftz", options->flush_to_zero, "flush tiny results to zero");
  cmd->add_flag("--saturate", options->saturate, "overflow gives ±max finite (OCP FP8 SAT)");
  cmd->add_option("--color", options->color, "colour the bit fields: auto, always, never")->capture_default_str();
  cmd->callback([options] { run_inspect(*options); });
}

}  // namespace fpscope::cli
