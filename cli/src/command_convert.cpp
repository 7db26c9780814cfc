// `fpscope convert --from F --to G`: a stream of values or bit patterns, one per line, through a cast.
#include <fmt/core.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/snapshot/memory_budget.hpp"
#include "number_option.hpp"
#include "fpscope/core/printable_text.hpp"
#include "hex_digits.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"

namespace fpscope::cli {

namespace {

struct ConvertOptions {
  std::string from;
  std::string to;
  std::string round = "rne";
  std::string output = "auto";
  bool flags = false;
  bool flush_to_zero = false;
  bool denormals_are_zero = false;
  bool saturate = false;
  std::string seed = "0";
};

enum class OutputKind { automatic, bits, value, both };

OutputKind parse_output(const std::string& text) {
  if (text == "auto") return OutputKind::automatic;
  if (text == "bits") return OutputKind::bits;
  if (text == "value") return OutputKind::value;
  if (text == "both") return OutputKind::both;
  throw UsageError("unknown --output '" + printable_text(text) + "': expected auto, bits, value or both");
}

std::string_view trim(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return line;
}

bool is_bit_pattern(std::string_view text) {
  return text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X') &&
         text.find_first_of(".pP") == std::string_view::npos;
}

// Hex digits after 0x into bits; false if malformed or too wide for f.
bool parse_hex_bits(std::string_view text, Format f, std::uint64_t& bits) {
  return parse_hex_digits(text.substr(2), f.width(), bits);
}

// A value of `to` as short decimal text that reads back to the same bits: shortest for
// float32 and binary64 ({fmt}'s Dragonbox), enough digits for the others.
void append_value(fmt::memory_buffer& out, Format to, std::uint64_t bits) {
  if (is_nan(to, bits)) {
    // FNUZ's one NaN is the pattern of -0: its top bit is not a sign.
    fmt::format_to(std::back_inserter(out), "{}", sign_of(to, bits) && to.flavour != Flavour::fnuz ? "-nan" : "nan");
    return;
  }
  Context widen;
  const double value = to_double(to, bits, widen);
  if (to == formats::fp64) fmt::format_to(std::back_inserter(out), "{}", value);
  else if (to == formats::fp32) fmt::format_to(std::back_inserter(out), "{}", static_cast<float>(value));
  else {
    const int digits = static_cast<int>(std::ceil(1 + (to.mantissa_bits + 1) * std::log10(2.0)));
    fmt::format_to(std::back_inserter(out), "{:.{}g}", value, digits);
  }
}

// E8M0, the OCP MX block scale, is no Format (e8m0.hpp): its codes stand in for bits on either
// side. A code's value is a power of two float32 holds exactly; a value rounds to a code exactly
// (from its every digit, never through the nearest float32).
const Format e8m0_carrier = formats::fp32;  // the values of E8M0 codes, exactly

void run_convert(const ConvertOptions& options) {
  const bool from_e8m0 = names_e8m0(options.from), to_e8m0 = names_e8m0(options.to);
  const Format from = from_e8m0 ? e8m0_carrier : parse_format(options.from);
  const Format to = to_e8m0 ? e8m0_carrier : parse_format(options.to);
  const OutputKind output = parse_output(options.output);
  Context ctx;
  ctx.rounding = parse_rounding_mode(options.round);
  ctx.flush_to_zero = options.flush_to_zero;
  ctx.denormals_are_zero = options.denormals_are_zero;
  ctx.saturate = options.saturate;
  ctx.stochastic_seed = parse_integer_option<std::uint64_t>("--seed", options.seed, 0, std::numeric_limits<std::uint64_t>::max());

  // Read everything first: nothing is written unless every line converts.
  // The input and the output built from it must fit in memory (checked every 64 MiB: standard
  // input may be /dev/zero).
  std::string input;
  {
    char chunk[1 << 16];
    std::size_t n;
    while ((n = std::fread(chunk, 1, sizeof chunk, stdin)) > 0) {
      input.append(chunk, n);
      if (input.size() % (std::size_t{64} << 20) < n) {
        try {
          check_memory_budget(3 * static_cast<std::uint64_t>(input.size()), "converting " + byte_size_text(input.size()) + " of standard input and more");
        } catch (const MemoryBudgetError& e) {
          throw UsageError(e.what(), 1);
        }
      }
    }
    if (std::ferror(stdin)) throw UsageError(std::string("cannot read standard input: ") + std::strerror(errno), 1);
  }
  fmt::memory_buffer out;
  out.reserve(input.size() + input.size() / 2);
  const int hex_digits = to_e8m0 ? 2 : (to.width() + 3) / 4;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < input.size()) {
    std::size_t end = input.find('\n', start);
    if (end == std::string::npos) end = input.size();
    const std::string_view line = trim(std::string_view(input).substr(start, end - start));
    start = end + 1;
    ++line_number;
    if (line.empty())
      throw UsageError(fmt::format("stdin line {} is empty: expected a value or 0x bits of {}", line_number, from_e8m0 ? std::string("e8m0") : format_name(from)), 1);

    ctx.flags = 0;
    std::uint64_t source = 0;
    const bool bits_in = is_bit_pattern(line);
    const std::string from_name = from_e8m0 ? std::string("e8m0") : format_name(from);
    if (bits_in) {
      const Format pattern = from_e8m0 ? Format{7, 0, Flavour::ieee} : from;  // E8M0 codes: any 8-bit width
      if (!parse_hex_bits(line, pattern, source))
        throw UsageError(fmt::format("stdin line {}: '{}' is not a {}-bit pattern of {}", line_number,
                                       line.size() <= 64 ? std::string(line) : std::string(line.substr(0, 40)) + "...", pattern.width(), from_name), 1);
      if (from_e8m0) source = float_bits(e8m0::to_float(static_cast<std::uint8_t>(source)));
    } else {
      try {
        // A value is first a value of `from`.
        source = from_e8m0 ? float_bits(e8m0::to_float(round_number_e8m0(parse_number(line), ctx))) : round_text(from, line, ctx);
      } catch (const ParseError& e) {
        throw UsageError(fmt::format("stdin line {}: {}", line_number, e.what()), 1);
      }
    }
    const std::uint64_t result = to_e8m0 ? round_number_e8m0(parse_number(exact_decimal(from, source)), ctx) : convert(from, to, source, ctx);
    const OutputKind kind = output != OutputKind::automatic ? output : bits_in ? OutputKind::bits : OutputKind::value;
    if (kind == OutputKind::bits || kind == OutputKind::both) fmt::format_to(std::back_inserter(out), "0x{:0{}X}", result, hex_digits);
    if (kind == OutputKind::both) out.push_back(' ');
    if (kind == OutputKind::value || kind == OutputKind::both) {
      if (to_e8m0) append_value(out, e8m0_carrier, float_bits(e8m0::to_float(static_cast<std::uint8_t>(result))));
      else append_value(out, to, result);
    }
    if (options.flags) fmt::format_to(std::back_inserter(out), " {}", describe_flags(ctx.flags));
    out.push_back('\n');
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void add_convert(CLI::App& app) {
  auto options = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert values or bit patterns on stdin (one per line) from one format to another");
  cmd->add_option("--from", options->from, "format of the input (0x bit patterns are read in it; values are first rounded into it); e8m0 too")->required();
  cmd->add_option("--to", options->to, "format of the output; e8m0 (the MX block scale) too")->required();
  cmd->add_option("-r,--round", options->round, "rounding mode: rne rna rz ru rd odd stochastic")->capture_default_str();
  cmd->add_option("--output", options->output, "auto (bits for bit input, values for value input), bits, value or both")->capture_default_str();
  cmd->add_flag("--flags", options->flags, "append the flags each line raised");
  cmd->add_flag("--ftz", options->flush_to_zero, "flush tiny results to zero");
  cmd->add_flag("--daz", options->denormals_are_zero, "read subnormal inputs as zero");
  cmd->add_flag("--saturate", options->saturate, "overflow gives ±max finite (OCP FP8 SAT)");
  cmd->add_option("--seed", options->seed, "seed for stochastic rounding")->capture_default_str();
  cmd->callback([options] { run_convert(*options); });
}

}  // namespace fpscope::cli
