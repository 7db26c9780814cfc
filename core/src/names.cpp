// Parsing and printing of format and rounding-mode names.
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"

#include <array>
#include <cctype>
#include <charconv>

namespace fpscope {

namespace {

std::string lowercase(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

struct NamedFormat {
  const char* name;
  Format format;
};

// The first name of each format is the one printed.
constexpr NamedFormat format_aliases[] = {
    {"fp16", formats::fp16}, {"binary16", formats::fp16}, {"half", formats::fp16}, {"f16", formats::fp16},
    {"bf16", formats::bf16}, {"bfloat16", formats::bf16},
    {"fp32", formats::fp32}, {"binary32", formats::fp32}, {"single", formats::fp32}, {"float", formats::fp32},
    {"fp64", formats::fp64}, {"binary64", formats::fp64}, {"double", formats::fp64},
    {"tf32", formats::tf32}, {"e4m3", formats::e4m3}, {"e4m3fn", formats::e4m3}, {"e5m2", formats::e5m2},
    // OCP Microscaling (MX) v1.0 element formats: no infinity, no NaN.
    {"e2m1", formats::e2m1}, {"fp4", formats::e2m1}, {"fp4e2m1", formats::e2m1},
    {"e2m3", formats::e2m3}, {"fp6e2m3", formats::e2m3},
    {"e3m2", formats::e3m2}, {"fp6e3m2", formats::e3m2},
    // AMD / GraphCore FP8: one NaN where -0 would be, bias one more than IEEE's.
    {"e4m3fnuz", formats::e4m3fnuz}, {"e5m2fnuz", formats::e5m2fnuz},
    // GraphCore's E4M3 FNUZ with bias 11 (ml_dtypes float8_e4m3b11fnuz).
    {"e4m3b11fnuz", formats::e4m3b11fnuz},
};

// The names PyTorch, NumPy and ml_dtypes give their dtypes (torch.float8_e4m3fn,
// ml_dtypes.float6_e2m3fn, ...), read only: fpscope prints its own. An explicit table, as their
// suffixes do not mean one thing: ml_dtypes' "fn" is one NaN for 8 bits (OCP FN) but no NaN at all
// for 6 and 4 (OCP MX's finite elements), and float8_e4m3 without a suffix is the IEEE-style E4M3
// with infinities, not OCP's.
constexpr NamedFormat dtype_names[] = {
    {"float16", formats::fp16}, {"bfloat16", formats::bf16}, {"float32", formats::fp32}, {"float64", formats::fp64},
    {"float8_e4m3fn", formats::e4m3}, {"float8_e5m2", formats::e5m2},
    {"float8_e4m3fnuz", formats::e4m3fnuz}, {"float8_e5m2fnuz", formats::e5m2fnuz}, {"float8_e4m3b11fnuz", formats::e4m3b11fnuz},
    {"float8_e4m3", Format{4, 3, Flavour::ieee, 0}}, {"float8_e3m4", Format{3, 4, Flavour::ieee, 0}},
    {"float6_e2m3fn", formats::e2m3}, {"float6_e3m2fn", formats::e3m2}, {"float4_e2m1fn", formats::e2m1},
};
// The prefixes those names come with, dropped before the look-up.
constexpr std::string_view dtype_prefixes[] = {"torch.", "numpy.", "np.", "ml_dtypes.", "jnp.", "jax.numpy."};

// A bit count as written in eXmY: decimal digits without a leading zero ("e4m03" is refused, so
// that every custom format has exactly one spelling).
bool parse_int(std::string_view text, int& value) {
  const auto* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  return !text.empty() && !(text.size() > 1 && text[0] == '0') && result.ec == std::errc{} && result.ptr == end;
}

const NamedFormat* alias_named(std::string_view key) {
  for (const auto& alias : format_aliases)
    if (key == alias.name) return &alias;
  return nullptr;
}

}  // namespace

bool names_e8m0(std::string_view name) {
  std::string key = lowercase(name);
  for (const std::string_view prefix : dtype_prefixes)
    if (key.starts_with(prefix)) {
      key.erase(0, prefix.size());
      break;
    }
  return key == "e8m0" || key == "e8m0fnu" || key == "float8_e8m0fnu";
}

Format parse_format(std::string_view name) {
  std::string key = lowercase(name);
  if (const NamedFormat* alias = alias_named(key)) return alias->format;
  for (const std::string_view prefix : dtype_prefixes)
    if (key.starts_with(prefix)) {
      key.erase(0, prefix.size());
      if (const NamedFormat* alias = alias_named(key)) return alias->format;  // torch.bfloat16, np.half
      break;
    }
  for (const auto& dtype : dtype_names)
    if (key == dtype.name) return dtype.format;
  // E8M0 reads like a custom eXmY with no mantissa, which no Format is: say what it is instead.
  if (names_e8m0(name))
    throw UnknownNameError("format '" + printable_text(name) +
                           "' is the OCP MX block scale (unsigned powers of two 2^-127 .. 2^127, 0xFF NaN), not an element format: "
                           "inspect and convert take it, fpscope table mxfp8 shows it beside its elements, and quantize and analyze -f "
                           "mxfp8-e4m3 use it");
  // Custom eXmY, eXmYfn (OCP FN flavour), eXmYfnuz (FNUZ), eXmYfinite (no infinity, no NaN) or
  // eXmYieee (IEEE flavour said explicitly: e4m3 alone is OCP's E4M3, so the IEEE-style e4m3 with
  // infinities is e4m3ieee).
  if (key.size() >= 4 && key[0] == 'e') {
    std::string_view body = std::string_view(key).substr(1);
    Flavour flavour = Flavour::ieee;
    const auto ends_with = [&](std::string_view suffix) { return body.size() > suffix.size() && body.substr(body.size() - suffix.size()) == suffix; };
    if (ends_with("fnuz")) {
      flavour = Flavour::fnuz;
      body.remove_suffix(4);
    } else if (ends_with("fn")) {
      flavour = Flavour::ocp_fn;
      body.remove_suffix(2);
    } else if (ends_with("finite")) {
      flavour = Flavour::finite;
      body.remove_suffix(6);
    } else if (ends_with("ieee")) {
      body.remove_suffix(4);
    }
    const auto m = body.find('m');
    int exponent_bits = 0, mantissa_bits = 0;
    if (m != std::string_view::npos && parse_int(body.substr(0, m), exponent_bits) &&
        parse_int(body.substr(m + 1), mantissa_bits)) {
      const Format f{exponent_bits, mantissa_bits, flavour, 0};
      if (f.valid()) return f;
      throw UnknownNameError("format '" + printable_text(name) +
                             "' is out of range: custom formats need 2 to 11 exponent bits (at most 8 for fnuz and finite), 1 to 52 mantissa bits and at most 64 bits in all");
    }
  }
  throw UnknownNameError("unknown format '" + printable_text(name) +
                         "': expected fp16, bf16, fp32, fp64, tf32, e4m3, e5m2, e2m1, e2m3, e3m2, e4m3fnuz, e5m2fnuz, a custom eXmY such as e6m9 (eXmYfn for the OCP FN flavour, eXmYfnuz, eXmYfinite for no infinity and no NaN, eXmYieee to insist on IEEE) or a PyTorch / ml_dtypes dtype such as float8_e4m3fn");
}

std::string dtype_name(Format f) {
  for (const auto& dtype : dtype_names)
    if (dtype.format == f) return dtype.name;
  return "";
}

std::string format_name(Format f) {
  for (const auto& alias : format_aliases)
    if (alias.format == f) return alias.name;
  if (f.bias_offset != 0) {  // not parsed back; appended piece by piece (see below)
    std::string name = "e";
    name += std::to_string(f.exponent_bits);
    name += 'm';
    name += std::to_string(f.mantissa_bits);
    name += 'b';
    name += std::to_string(f.bias());
    return name;
  }
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) about a chain of operator+.
  std::string name = "e";
  name += std::to_string(f.exponent_bits);
  name += 'm';
  name += std::to_string(f.mantissa_bits);
  switch (f.flavour) {
    case Flavour::ocp_fn: name += "fn"; break;
    case Flavour::fnuz: name += "fnuz"; break;
    case Flavour::finite: name += "finite"; break;
    case Flavour::ieee:
      if (alias_named(name) != nullptr) name += "ieee";  // the plain name means another format
      break;
  }
  return name;
}

std::string flavour_description(Flavour flavour) {
  switch (flavour) {
    case Flavour::ieee: return "";
    case Flavour::ocp_fn: return "OCP FN: no infinities, one NaN (all ones)";
    case Flavour::finite: return "finite: no infinities, no NaN";
    case Flavour::fnuz: return "FNUZ: no infinities, no -0, one NaN (the pattern of -0)";
  }
  return "";
}

std::string overflow_description(Format f) {
  if (f.has_infinity()) return "infinity (±max when saturating)";
  if (f.has_nan()) return "NaN (±max when saturating)";
  return "±max (it always saturates: no infinity, no NaN)";
}

const std::vector<Format>& named_formats() {
  static const std::vector<Format> list{formats::fp16,  formats::bf16,     formats::fp32,    formats::fp64,
                                        formats::tf32,  formats::e4m3,     formats::e5m2,    formats::e2m1,
                                        formats::e2m3,  formats::e3m2,     formats::e4m3fnuz, formats::e5m2fnuz,
                                        formats::e4m3b11fnuz};
  return list;
}

namespace {

struct NamedBlockFormat {
  const char* name;
  BlockFormat format;
};

// The first name of each format is the one printed.
constexpr NamedBlockFormat block_format_aliases[] = {
    {"mxfp8-e4m3", block_formats::mxfp8_e4m3}, {"mxfp8", block_formats::mxfp8_e4m3},
    {"mxfp8-e5m2", block_formats::mxfp8_e5m2},
    {"mxfp6-e2m3", block_formats::mxfp6_e2m3}, {"mxfp6", block_formats::mxfp6_e2m3},
    {"mxfp6-e3m2", block_formats::mxfp6_e3m2},
    {"mxfp4", block_formats::mxfp4}, {"mxfp4-e2m1", block_formats::mxfp4},
    {"mxint8", block_formats::mxint8},
    {"nvfp4", block_formats::nvfp4},
};

// Formats are the same but for the block size.
bool same_kind(const BlockFormat& a, const BlockFormat& b) {
  return a.elements == b.elements && a.element == b.element && a.scale == b.scale;
}

}  // namespace

BlockFormat parse_block_format(std::string_view name) {
  std::string key = lowercase(name);
  for (char& c : key)
    if (c == '_') c = '-';
  for (const auto& alias : block_format_aliases)
    if (key == alias.name) return alias.format;
  throw UnknownNameError("unknown block-scaled format '" + printable_text(name) +
                         "': expected mxfp8-e4m3, mxfp8-e5m2, mxfp6-e2m3, mxfp6-e3m2, mxfp4, mxint8 or nvfp4");
}

std::string block_format_name(const BlockFormat& format) {
  for (const auto& alias : block_format_aliases)
    if (same_kind(alias.format, format)) return alias.name;
  return "mx-" + format_name(format.element);
}

const std::vector<BlockFormat>& named_block_formats() {
  static const std::vector<BlockFormat> list{block_formats::mxfp8_e4m3, block_formats::mxfp8_e5m2, block_formats::mxfp6_e2m3,
                                             block_formats::mxfp6_e3m2, block_formats::mxfp4,      block_formats::mxint8,
                                             block_formats::nvfp4};
  return list;
}

ScaleRule parse_scale_rule(std::string_view name) {
  std::string key = lowercase(name);
  for (char& c : key)
    if (c == '_') c = '-';
  if (key == "floor" || key == "ocp") return ScaleRule::floor;
  if (key == "round-up" || key == "ceil" || key == "roundup") return ScaleRule::round_up;
  if (key == "rceil") return ScaleRule::rceil;
  if (key == "even" || key == "round-to-even" || key == "rne") return ScaleRule::even;
  throw UnknownNameError("unknown scale rule '" + printable_text(name) + "': expected floor (the OCP spec's), round-up, rceil or even");
}

std::string scale_rule_name(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::floor: return "floor";
    case ScaleRule::round_up: return "round-up";
    case ScaleRule::rceil: return "rceil";
    case ScaleRule::even: return "even";
  }
  return "?";
}

RoundingMode parse_rounding_mode(std::string_view name) {
  const std::string key = lowercase(name);
  if (key == "rne" || key == "nearest_even" || key == "near_even" || key == "nearest") return RoundingMode::nearest_even;
  if (key == "rna" || key == "nearest_away" || key == "near_maxmag") return RoundingMode::nearest_away;
  if (key == "rz" || key == "toward_zero" || key == "minmag" || key == "truncate") return RoundingMode::toward_zero;
  if (key == "ru" || key == "toward_positive" || key == "max" || key == "up") return RoundingMode::toward_positive;
  if (key == "rd" || key == "toward_negative" || key == "min" || key == "down") return RoundingMode::toward_negative;
  if (key == "odd" || key == "ro") return RoundingMode::odd;
  if (key == "stochastic" || key == "sr") return RoundingMode::stochastic;
  throw UnknownNameError("unknown rounding mode '" + printable_text(name) +
                         "': expected rne, rna, rz, ru, rd, odd or stochastic");
}

std::string rounding_mode_name(RoundingMode mode) {
  switch (mode) {
    case RoundingMode::nearest_even: return "rne";
    case RoundingMode::nearest_away: return "rna";
    case RoundingMode::toward_zero: return "rz";
    case RoundingMode::toward_positive: return "ru";
    case RoundingMode::toward_negative: return "rd";
    case RoundingMode::odd: return "odd";
    case RoundingMode::stochastic: return "stochastic";
  }
  return "?";
}

std::string describe_flags(std::uint8_t flags) {
  static constexpr std::array<std::pair<std::uint8_t, const char*>, 5> names{{
      {flag::invalid, "invalid"}, {flag::infinite, "divide-by-zero"}, {flag::overflow, "overflow"},
      {flag::underflow, "underflow"}, {flag::inexact, "inexact"}}};
  std::string text;
  for (const auto& [bit, name] : names) {
    if ((flags & bit) == 0) continue;
    if (!text.empty()) text += ' ';
    text += name;
  }
  return text.empty() ? "none" : text;
}

std::string_view float_class_name(FloatClass c) {
  switch (c) {
    case FloatClass::zero: return "zero";
    case FloatClass::subnormal: return "subnormal";
    case FloatClass::normal: return "normal";
    case FloatClass::infinite: return "infinite";
    case FloatClass::quiet_nan: return "quiet NaN";
    case FloatClass::signaling_nan: return "signalling NaN";
  }
  return "?";
}

}  // namespace fpscope
