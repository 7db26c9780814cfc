// Tidy CSV export and import of histograms.
#include "fpscope/analyzer/csv.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <cstdio>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/line_reader.hpp"
#include "fpscope/snapshot/memory_budget.hpp"

namespace fpscope {

namespace {

std::string quoted(const std::string& field) {
  if (field.find_first_of(",\"\n\r") == std::string::npos) return field;
  std::string out = "\"";
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Splits one CSV record (RFC 4180: a quoted field may hold commas, quotes doubled, and line
// breaks); false when a quote is still open at the end of `line`.
bool split_record(const std::string& line, std::vector<std::string>& fields) {
  fields.clear();
  std::string field;
  bool in_quotes = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') in_quotes = false;
      else field += c;
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(field);
  return !in_quotes;
}

template <typename T>
bool parse_integer(const std::string& text, T& value) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size();
}

}  // namespace

std::string histograms_csv(const std::vector<Snapshot>& snapshots) {
  std::string out = "step,tensor,kind,scale,captured,binade,count\n";
  for (const Snapshot& s : snapshots) {
    for (const TensorRecord& t : s.tensors) {
      char scale[40];
      std::snprintf(scale, sizeof scale, "%.17g", t.scale);
      const std::string prefix = std::to_string(s.step) + "," + quoted(t.name) + "," + std::string(tensor_kind_name(t.kind)) + "," + scale +
                                 "," + std::string(capture_name(t.captured)) + ",";
      for (int b = min_binade; b <= max_binade; ++b)
        if (t.histogram.count(b) != 0) out += prefix + std::to_string(b) + "," + std::to_string(t.histogram.count(b)) + "\n";
      if (t.histogram.zero_count() != 0) out += prefix + "zero," + std::to_string(t.histogram.zero_count()) + "\n";
      if (t.histogram.infinity_count() != 0) out += prefix + "inf," + std::to_string(t.histogram.infinity_count()) + "\n";
      if (t.histogram.nan_count() != 0) out += prefix + "nan," + std::to_string(t.histogram.nan_count()) + "\n";
    }
  }
  return out;
}

namespace {
// A double in the shortest text that reads back to it; "nan", "inf", "-inf" where not finite.
std::string number_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::string("nan");
}
}  // namespace

std::string steps_csv(const std::vector<StepRecord>& steps) {
  std::string out = "step,loss,loss_scale,skipped\n";
  for (const StepRecord& s : steps)
    out += std::to_string(s.step) + "," + number_text(s.loss) + "," + number_text(s.loss_scale) + "," + (s.skipped ? "1" : "0") + "\n";
  return out;
}

std::string scaling_csv(const std::vector<StepRecord>& steps) {
  std::string out = "step,tensor,operand,format,amax,scale,elements,zeros,flushed_to_zero,saturated\n";
  for (const StepRecord& s : steps)
    for (const OperandScaling& o : s.scaling)
      out += std::to_string(s.step) + "," + quoted(o.name) + "," + quoted(o.operand) + "," + quoted(o.format) + "," + number_text(o.amax) + "," +
             number_text(o.scale) + "," + std::to_string(o.elements) + "," + std::to_string(o.zeros) + "," + std::to_string(o.flushed_to_zero) + "," +
             std::to_string(o.saturated) + "\n";
  return out;
}

std::string block_statistics_csv(const std::vector<Snapshot>& snapshots) {
  std::string out = "step,tensor,kind,format,block,rule,series,bin,count\n";
  const auto add = [&out](std::int64_t step, const std::string& tensor, std::string_view kind, const BlockRecord& b) {
    const BlockStatistics& st = b.statistics;
    const std::string prefix = std::to_string(step) + "," + quoted(tensor) + "," + std::string(kind) + "," + block_format_name(b.format) + "," +
                               std::to_string(b.format.block_size) + "," + (b.format.scale == BlockFormat::Scale::e8m0 ? scale_rule_name(b.rule) : std::string("nvfp4")) + ",";
    for (std::size_t i = 0; i < st.relative_exponents.size(); ++i)
      if (st.relative_exponents[i] != 0)
        out += prefix + "relative_exponent," + std::to_string(-static_cast<int>(i)) + "," + std::to_string(st.relative_exponents[i]) + "\n";
    for (std::size_t code = 0; code < st.scale_codes.size(); ++code)
      if (st.scale_codes[code] != 0) out += prefix + "scale_code," + std::to_string(code) + "," + std::to_string(st.scale_codes[code]) + "\n";
    for (const auto& [name, count] : {std::pair{"elements", st.elements}, std::pair{"blocks", st.blocks}, std::pair{"nan_blocks", st.nan_blocks},
                                      std::pair{"zeros", st.zeros}, std::pair{"flushed_to_zero", st.flushed_to_zero},
                                      std::pair{"subnormal", st.made_subnormal}, std::pair{"saturated", st.saturated}})
      out += prefix + "total," + name + "," + std::to_string(count) + "\n";
  };
  for (const Snapshot& s : snapshots) {
    for (const TensorRecord& t : s.tensors)
      if (t.blocks) add(s.step, t.name, tensor_kind_name(t.kind), *t.blocks);
    // A block-scaled recipe's GEMM operands: kind operand_input, operand_weight,
    // operand_output_gradient (each product's quantization of the operand, summed).
    for (const OperandBlocks& o : s.block_operands) add(s.step, o.name, "operand_" + o.operand, o.blocks);
  }
  return out;
}

std::vector<Snapshot> read_histograms_csv(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open: " + std::strerror(errno));
  std::string line;
  std::vector<std::string> fields;
  LineReader lines(in, path.string(), 4);  // a record's fields take a few times its length
  bool newline = false;
  if (!lines.next(line, newline)) throw std::runtime_error(path.string() + ": empty file: expected the header step,tensor,kind,binade,count");
  // Spreadsheets save CSV with a UTF-8 byte order mark before the first column's name.
  if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  split_record(line, fields);
  const std::vector<std::string> expected{"step", "tensor", "kind", "binade", "count"};
  std::size_t column[5];
  for (std::size_t c = 0; c < expected.size(); ++c) {
    const auto it = std::find(fields.begin(), fields.end(), expected[c]);
    if (it == fields.end()) throw std::runtime_error(path.string() + ":1: missing column '" + expected[c] + "' (expected step,tensor,kind,binade,count)");
    column[c] = static_cast<std::size_t>(it - fields.begin());
  }
  // Optional: the scale the values carry (1 without the column) and where they were captured.
  const auto optional_column = [&](const char* name) -> std::optional<std::size_t> {
    const auto it = std::find(fields.begin(), fields.end(), name);
    return it == fields.end() ? std::nullopt : std::optional<std::size_t>(static_cast<std::size_t>(it - fields.begin()));
  };
  const std::optional<std::size_t> scale_column = optional_column("scale"), captured_column = optional_column("captured");
  const std::size_t width = fields.size();
  // Keyed by step, then by tensor in order of first appearance.
  std::map<std::int64_t, Snapshot> steps;
  std::size_t line_number = 1;
  while (lines.next(line, newline)) {
    ++line_number;
    const std::string where = path.string() + ":" + std::to_string(line_number);
    if (line.empty() || line == "\r") continue;
    // A quoted field with a line break in it goes on over the next lines.
    bool complete = split_record(line, fields);
    for (std::string more; !complete && lines.next(more, newline); complete = split_record(line, fields)) {
      line += '\n';
      line += more;
      ++line_number;
      if (line.size() > lines.max_line_bytes()) throw std::runtime_error(where + ": a quoted field runs on past " + byte_size_text(lines.max_line_bytes()));
    }
    if (!complete) throw std::runtime_error(where + ": unterminated quote");
    if (fields.size() != width) throw std::runtime_error(where + ": " + std::to_string(fields.size()) + " fields, expected " + std::to_string(width));
    std::int64_t step = 0;
    std::uint64_t count = 0;
    if (!parse_integer(fields[column[0]], step)) throw std::runtime_error(where + ": step '" + printable_text(fields[column[0]]) + "' is not an integer");
    if (!parse_integer(fields[column[4]], count)) throw std::runtime_error(where + ": count '" + printable_text(fields[column[4]]) + "' is not a non-negative integer");
    TensorKind kind;
    try {
      kind = parse_tensor_kind(fields[column[2]]);
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(where + ": " + e.what());
    }
    if (count == 0) {
      // A zero count carries nothing (the writer never writes one): checked, then skipped, so
      // that reading and writing back give the same file.
      int zero_row_binade = 0;
      const std::string& text = fields[column[3]];
      if (text != "zero" && text != "inf" && text != "nan" &&
          !(parse_integer(text, zero_row_binade) && zero_row_binade >= min_binade && zero_row_binade <= max_binade))
        throw std::runtime_error(where + ": binade '" + printable_text(text) + "' is not an integer from -149 to 127, zero, inf or nan");
      continue;
    }
    Snapshot& snapshot = steps[step];
    snapshot.step = step;
    const std::string& name = fields[column[1]];
    auto tensor = std::find_if(snapshot.tensors.begin(), snapshot.tensors.end(),
                               [&](const TensorRecord& t) { return t.name == name && t.kind == kind; });
    double scale = 1.0;
    Capture captured = Capture::before_cast;
    if (scale_column) {
      const std::string& text = fields[*scale_column];
      const auto result = std::from_chars(text.data(), text.data() + text.size(), scale);
      if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size() || !(scale > 0) || !std::isfinite(scale))
        throw std::runtime_error(where + ": scale '" + printable_text(text) + "' is not a positive number");
    }
    if (captured_column) {
      try {
        captured = parse_capture(fields[*captured_column]);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(where + ": " + e.what());
      }
    }
    // One step's tensor at one scale: rows of another scale are another record (never merged).
    if (tensor != snapshot.tensors.end() && tensor->scale != scale)
      throw std::runtime_error(where + ": tensor '" + printable_text(name) + "' has two scales at step " + std::to_string(step));
    if (tensor == snapshot.tensors.end()) {
      snapshot.tensors.push_back(TensorRecord{name, kind, {}, std::nullopt, scale, captured, std::nullopt});
      tensor = snapshot.tensors.end() - 1;
    }
    ExponentHistogram& h = tensor->histogram;
    const std::string& binade_text = fields[column[3]];
    // Rows of one tensor add up; a sum past 2^64 is refused, never wrapped.
    const auto added = [&](std::uint64_t before) {
      std::uint64_t sum = 0;
      if (__builtin_add_overflow(before, count, &sum))
        throw std::runtime_error(where + ": the counts of tensor '" + printable_text(name) + "' add up past 2^64");
      return sum;
    };
    int binade = 0;
    if (binade_text == "zero") h.set_specials(added(h.zero_count()), h.infinity_count(), h.nan_count());
    else if (binade_text == "inf") h.set_specials(h.zero_count(), added(h.infinity_count()), h.nan_count());
    else if (binade_text == "nan") h.set_specials(h.zero_count(), h.infinity_count(), added(h.nan_count()));
    else if (parse_integer(binade_text, binade) && binade >= min_binade && binade <= max_binade) h.set_count(binade, added(h.count(binade)));
    else throw std::runtime_error(where + ": binade '" + printable_text(binade_text) + "' is not an integer in -149..127 nor zero, inf or nan");
  }
  std::vector<Snapshot> result;
  for (auto& [step, snapshot] : steps) {
    for (const TensorRecord& t : snapshot.tensors)
      if (!t.histogram.checked_total_count())
        throw std::runtime_error(path.string() + ": step " + std::to_string(step) + ", tensor '" + printable_text(t.name) +
                                 "' counts more than 2^64 - 1 values");
    result.push_back(std::move(snapshot));
  }
  return result;
}

}  // namespace fpscope
