// Run log I/O: JSON Lines through nlohmann-json; atomic whole-file writes; line-by-line appends.
#include "fpscope/analyzer/run_log.hpp"

#include "fpscope/core/names.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/line_reader.hpp"
#include "fpscope/snapshot/memory_budget.hpp"

namespace fpscope {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& where, const std::string& what) { throw RunLogError(where + ": " + what); }

// An integer read exactly: a JSON float ("5.0", "2e28") or a value outside T is refused, where
// nlohmann's get<T> would convert it with a cast (undefined behaviour out of range: fuzzing found
// a step of 2.2e28).
template <typename T>
T integer_value(const json& value, const std::string& what, const std::string& where) {
  if (value.is_number_unsigned()) {
    if (const auto u = value.get<std::uint64_t>(); std::in_range<T>(u)) return static_cast<T>(u);
  } else if (value.is_number_integer()) {
    if (const auto i = value.get<std::int64_t>(); std::in_range<T>(i)) return static_cast<T>(i);
  }
  fail(where, what + " must be an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                  std::to_string(std::numeric_limits<T>::max()));
}

std::uint64_t unsigned_field(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) return 0;
  return integer_value<std::uint64_t>(*it, std::string("'") + key + "'", where);
}

template <typename T>
T required_integer(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) fail(where, std::string("missing '") + key + "'");
  return integer_value<T>(*it, std::string("'") + key + "'", where);
}

template <typename T>
T required(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) fail(where, std::string("missing '") + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail(where, std::string("'") + key + "' has the wrong type");
  }
}

// No run log line nests deeper than a few levels; a crafted one nested thousands deep would
// parse into a tree whose depth every later step walks: refused before parsing.
constexpr int max_json_depth = 32;

void check_json_depth(std::string_view line, const std::string& where) {
  // A NUL byte is in no JSON text (a string holds one as \u0000): named, where a parser would say
  // "unexpected end of input".
  if (const std::size_t nul = line.find('\0'); nul != std::string_view::npos)
    fail(where, "a NUL byte at column " + std::to_string(nul + 1) + ": not JSON text");
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : line) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_json_depth) fail(where, "nests values deeper than " + std::to_string(max_json_depth) + " levels: not a run log line");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

json parse_object(std::string_view line, const std::string& where) {
  check_json_depth(line, where);
  json value;
  try {
    value = json::parse(line);
  } catch (const json::parse_error& e) {
    fail(where, std::string("not valid JSON (") + e.what() + ")");
  }
  if (!value.is_object()) fail(where, "expected a JSON object");
  return value;
}

// A tensor's "blocks" (block_record_json), checked: a known format, a block size that fits, a
// known rule, counts that add up (every element a zero or in one relative-exponent bin, every
// block one scale code), relative exponents 0 ..= -276.
BlockRecord parse_block_record(const json& b, const std::string& where) {
  if (!b.is_object()) fail(where, "'blocks' must be an object");
  BlockRecord record;
  try {
    record.format = parse_block_format(required<std::string>(b, "format", where));
    record.rule = parse_scale_rule(required<std::string>(b, "rule", where));
  } catch (const UnknownNameError& e) {
    fail(where, std::string("'blocks': ") + e.what());
  }
  record.format.block_size = required_integer<int>(b, "block", where);
  if (record.format.block_size < 1 || record.format.block_size > 256) fail(where, "'blocks': 'block' must be 1 ..= 256");
  BlockStatistics& st = record.statistics;
  st.elements = unsigned_field(b, "elements", where);
  st.blocks = unsigned_field(b, "blocks", where);
  st.nan_blocks = unsigned_field(b, "nan_blocks", where);
  st.zeros = unsigned_field(b, "zeros", where);
  st.flushed_to_zero = unsigned_field(b, "flushed_to_zero", where);
  st.made_subnormal = unsigned_field(b, "subnormal", where);
  st.saturated = unsigned_field(b, "saturated", where);
  const auto pairs = [&](const char* key, auto add) {
    const json list = b.value(key, json::array());
    if (!list.is_array()) fail(where, std::string("'blocks': '") + key + "' must be an array of [value, count] pairs");
    for (const json& pair : list) {
      if (!pair.is_array() || pair.size() != 2) fail(where, std::string("'blocks': each of '") + key + "' must be [value, count]");
      add(integer_value<std::int64_t>(pair[0], std::string("a '") + key + "' value", where),
          integer_value<std::uint64_t>(pair[1], std::string("a '") + key + "' count", where));
    }
  };
  std::uint64_t scale_total = 0, relative_total = 0;
  const auto add_checked = [&](std::uint64_t& total, std::uint64_t count) {
    if (__builtin_add_overflow(total, count, &total)) fail(where, "'blocks': counts add up past 2^64");
  };
  pairs("scales", [&](std::int64_t code, std::uint64_t count) {
    if (code < 0 || code > 255) fail(where, "'blocks': a scale code must be 0 ..= 255");
    st.scale_codes[static_cast<std::size_t>(code)] += count;
    add_checked(scale_total, count);
  });
  pairs("relative", [&](std::int64_t exponent, std::uint64_t count) {
    if (exponent > 0 || -exponent >= BlockStatistics::relative_exponent_bins)
      fail(where, "'blocks': a relative exponent must be 0 ..= -276");
    st.relative_exponents[static_cast<std::size_t>(-exponent)] += count;
    add_checked(relative_total, count);
  });
  if (scale_total != st.blocks) fail(where, "'blocks': the scale codes count " + std::to_string(scale_total) + " blocks, not " + std::to_string(st.blocks));
  if (st.nan_blocks > st.blocks || st.flushed_to_zero > st.elements || st.made_subnormal > st.elements || st.saturated > st.elements ||
      st.zeros > st.elements || relative_total > st.elements - st.zeros)
    fail(where, "'blocks': the counts do not fit its " + std::to_string(st.elements) + " elements");
  return record;
}

}  // namespace

namespace {

// A step's "scaling" (step_json), checked: each entry names its tensor, operand and a known
// format; amax is a number >= 0 (null: not finite this step), the scale a positive finite number,
// the counts fit the elements.
// An entry's GEMM operand ("input", "weight" or "output_gradient"), checked; `list` names the
// array it is in.
std::string required_operand(const json& o, const char* list, const std::string& where) {
  std::string operand = required<std::string>(o, "operand", where);
  if (operand != "input" && operand != "weight" && operand != "output_gradient")
    fail(where, std::string("'") + list + "': operand must be input, weight or output_gradient, not '" + printable_text(operand) + "'");
  return operand;
}

std::vector<OperandScaling> parse_scaling(const json& list, const std::string& where) {
  if (!list.is_array()) fail(where, "'scaling' must be an array");
  std::vector<OperandScaling> out;
  for (const json& o : list) {
    if (!o.is_object()) fail(where, "each of 'scaling' must be an object");
    OperandScaling s;
    s.name = required<std::string>(o, "name", where);
    s.operand = required_operand(o, "scaling", where);
    s.format = required<std::string>(o, "format", where);
    try {
      parse_format(s.format);
    } catch (const std::exception& e) {
      fail(where, std::string("'scaling': ") + e.what());
    }
    const auto amax = o.find("amax");
    s.amax = amax == o.end() || amax->is_null() ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    if (amax != o.end() && !amax->is_null()) {
      if (!amax->is_number() || !(amax->get<double>() >= 0)) fail(where, "'scaling': 'amax' must be a number >= 0 or null");
      s.amax = amax->get<double>();
    }
    const auto scale = o.find("scale");
    if (scale == o.end() || !scale->is_number() || !(scale->get<double>() > 0) || !std::isfinite(scale->get<double>()))
      fail(where, "'scaling': 'scale' must be a positive number");
    s.scale = scale->get<double>();
    s.elements = unsigned_field(o, "elements", where);
    s.zeros = unsigned_field(o, "zeros", where);
    s.flushed_to_zero = unsigned_field(o, "flushed_to_zero", where);
    s.saturated = unsigned_field(o, "saturated", where);
    if (s.zeros > s.elements || s.flushed_to_zero > s.elements - s.zeros || s.saturated > s.elements - s.zeros - s.flushed_to_zero)
      fail(where, "'scaling': the counts do not fit its " + std::to_string(s.elements) + " elements");
    out.push_back(std::move(s));
  }
  return out;
}

// A number where it is finite, null where not (JSON has no NaN or infinity).
json finite_or_null(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json culprit_json(const Culprit& c) {
  json o{{"name", c.name},
         {"kind", tensor_kind_name(c.kind)},
         {"fault", culprit_fault_name(c.fault)},
         {"format", c.format},
         {"format_largest", c.format_largest},
         {"largest", c.largest ? finite_or_null(*c.largest) : json(nullptr)},
         {"position", c.position},
         {"captured", capture_name(c.captured)}};
  if (!c.upstream.empty()) o["upstream"] = {{"name", c.upstream}, {"kind", tensor_kind_name(c.upstream_kind)}, {"largest", c.upstream_largest}};
  if (c.nan_count) o["nan"] = *c.nan_count;
  if (c.infinity_count) o["inf"] = *c.infinity_count;
  if (c.overflow_count) o["overflow"] = *c.overflow_count;
  if (c.rank) o["rank"] = *c.rank;
  if (c.micro_batch) o["micro_batch"] = *c.micro_batch;
  return o;
}

// A step's "culprit" (culprit_json), checked. Its 'largest' is null where it held a NaN or an
// infinity (its fault says which).
Culprit parse_culprit(const json& o, const std::string& where) {
  if (!o.is_object()) fail(where, "'culprit' must be an object");
  Culprit c;
  c.name = required<std::string>(o, "name", where);
  try {
    c.kind = parse_tensor_kind(required<std::string>(o, "kind", where));
    c.fault = parse_culprit_fault(required<std::string>(o, "fault", where));
  } catch (const std::invalid_argument& e) {
    fail(where, std::string("'culprit': ") + e.what());
  }
  c.format = o.value("format", std::string());
  const auto number = [&](const json& v, const char* what, bool null_allowed) {
    if (null_allowed && v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v.is_number() || !(v.get<double>() >= 0) || !std::isfinite(v.get<double>()))
      fail(where, std::string("'culprit': '") + what + "' must be a number >= 0" + (null_allowed ? " or null" : ""));
    return v.get<double>();
  };
  if (const auto v = o.find("format_largest"); v != o.end()) c.format_largest = number(*v, "format_largest", false);
  if (const auto v = o.find("largest"); v != o.end() && !v->is_null()) c.largest = number(*v, "largest", false);
  if (c.fault == CulpritFault::infinity) c.largest = std::numeric_limits<double>::infinity();
  if (c.fault == CulpritFault::overflow && !c.largest) fail(where, "'culprit': an overflow needs its 'largest'");
  if (const auto v = o.find("captured"); v != o.end()) {
    if (!v->is_string()) fail(where, "'culprit': 'captured' must be before_cast or as_stored");
    try {
      c.captured = parse_capture(v->get<std::string>());
    } catch (const std::invalid_argument& e) {
      fail(where, std::string("'culprit': ") + e.what());
    }
  }
  c.position = o.contains("position") ? integer_value<std::int64_t>(o["position"], "'culprit': 'position'", where) : 0;
  if (c.position < 0) fail(where, "'culprit': 'position' must be >= 0");
  if (const auto up = o.find("upstream"); up != o.end()) {
    if (!up->is_object()) fail(where, "'culprit': 'upstream' must be an object");
    c.upstream = required<std::string>(*up, "name", where);
    try {
      c.upstream_kind = parse_tensor_kind(up->value("kind", std::string("other")));
    } catch (const std::invalid_argument& e) {
      fail(where, std::string("'culprit': upstream: ") + e.what());
    }
    if (const auto v = up->find("largest"); v != up->end()) c.upstream_largest = number(*v, "upstream's largest", false);
  }
  const auto count = [&](const char* key, std::optional<std::uint64_t>& into) {
    if (o.contains(key)) into = integer_value<std::uint64_t>(o[key], std::string("'culprit': '") + key + "'", where);
  };
  count("nan", c.nan_count);
  count("inf", c.infinity_count);
  count("overflow", c.overflow_count);
  if (o.contains("rank")) c.rank = integer_value<std::int64_t>(o["rank"], "'culprit': 'rank'", where);
  if (o.contains("micro_batch")) c.micro_batch = integer_value<std::int64_t>(o["micro_batch"], "'culprit': 'micro_batch'", where);
  return c;
}

json step_json(const StepRecord& step) {
  json line{{"step", step.step}, {"loss", step.loss}, {"loss_scale", step.loss_scale}, {"skipped", step.skipped}};
  if (!step.finished) line["finished"] = false;  // written only where false: every engine step finishes
  if (step.culprit) line["culprit"] = culprit_json(*step.culprit);
  if (!step.scaling.empty()) {
    json scaling = json::array();
    for (const OperandScaling& o : step.scaling)
      scaling.push_back({{"name", o.name}, {"operand", o.operand}, {"format", o.format}, {"amax", o.amax}, {"scale", o.scale},
                         {"elements", o.elements}, {"zeros", o.zeros}, {"flushed_to_zero", o.flushed_to_zero}, {"saturated", o.saturated}});
    line["scaling"] = std::move(scaling);
  }
  return line;
}

}  // namespace

nlohmann::json sparse_bins_json(const ExponentHistogram& h) {
  json bins = json::array();
  for (int b = min_binade; b <= max_binade; ++b)
    if (h.count(b) != 0) bins.push_back(json::array({b, h.count(b)}));
  return bins;
}

std::string run_header_line(const RunHeader& header) {
  json line{{"fpscope_run_log", true},     {"schema_version", header.schema_version},
              {"source", header.source},     {"model", header.model},
              {"precision", header.precision}, {"format", header.format},
              {"rounding", header.rounding}, {"scaler", header.scaler}};
  if (!header.run_id.empty()) line["run_id"] = header.run_id;
  if (!header.optimizer.empty()) line["optimizer"] = header.optimizer;
  if (!header.recipe.empty()) line["recipe"] = header.recipe;
  if (!header.products.empty()) line["products"] = header.products;
  if (header.format_assumed) line["format_assumed"] = true;
  return line.dump();
}

namespace {

// "blocks": the format, its block and rule, the counts, and the scale codes and relative exponents
// as sparse [value, count] pairs (relative exponents are 0 or negative).
json block_record_json(const BlockRecord& b) {
  json record = block_statistics_json(b.statistics);
  record["format"] = block_format_name(b.format);
  record["block"] = b.format.block_size;
  record["rule"] = scale_rule_name(b.rule);
  return record;
}

}  // namespace

json block_statistics_json(const BlockStatistics& statistics) {
  json scales = json::array(), relative = json::array();
  for (std::size_t code = 0; code < statistics.scale_codes.size(); ++code)
    if (statistics.scale_codes[code] != 0) scales.push_back({code, statistics.scale_codes[code]});
  for (std::size_t i = 0; i < statistics.relative_exponents.size(); ++i)
    if (statistics.relative_exponents[i] != 0) relative.push_back({-static_cast<int>(i), statistics.relative_exponents[i]});
  return {{"elements", statistics.elements},
          {"blocks", statistics.blocks},
          {"nan_blocks", statistics.nan_blocks},
          {"zeros", statistics.zeros},
          {"flushed_to_zero", statistics.flushed_to_zero},
          {"subnormal", statistics.made_subnormal},
          {"saturated", statistics.saturated},
          {"scales", std::move(scales)},
          {"relative", std::move(relative)}};
}

std::string snapshot_line(const Snapshot& snapshot) {
  json tensors = json::array();
  for (const TensorRecord& t : snapshot.tensors) {
    json record{{"name", t.name},
                {"kind", tensor_kind_name(t.kind)},
                {"bins", sparse_bins_json(t.histogram)},
                {"zero", t.histogram.zero_count()},
                {"inf", t.histogram.infinity_count()},
                {"nan", t.histogram.nan_count()}};
    if (t.cast)
      record["cast"] = {{"flushed_to_zero", t.cast->flushed_to_zero},
                        {"subnormal", t.cast->made_subnormal},
                        {"overflow", t.cast->overflowed}};
    record["scale"] = t.scale;
    record["captured"] = capture_name(t.captured);
    if (t.blocks) record["blocks"] = block_record_json(*t.blocks);
    tensors.push_back(std::move(record));
  }
  json line = step_json(snapshot.step_record());
  line["tensors"] = std::move(tensors);
  if (!snapshot.block_operands.empty()) {
    json operands = json::array();
    for (const OperandBlocks& o : snapshot.block_operands)
      operands.push_back({{"name", o.name}, {"operand", o.operand}, {"blocks", block_record_json(o.blocks)}});
    line["block_operands"] = std::move(operands);
  }
  return line.dump();
}

std::string step_line(const StepRecord& step) { return step_json(step).dump(); }

RunHeader parse_run_header(std::string_view line, const std::string& where) try {
  const json value = parse_object(line, where);
  if (!value.contains("schema_version")) fail(where, "not a run log header: no 'schema_version'");
  RunHeader header;
  header.schema_version = required_integer<int>(value, "schema_version", where);
  if (header.schema_version < 1 || header.schema_version > run_log_schema_version)
    fail(where, "unknown schema version " + std::to_string(header.schema_version) + " (this fpscope reads versions 1 to " +
                    std::to_string(run_log_schema_version) + ")");
  // Each text field read by name, so that one of the wrong type is named.
  const auto text = [&](const char* key) {
    const auto it = value.find(key);
    if (it == value.end()) return std::string();
    if (!it->is_string()) fail(where, std::string("the header's '") + key + "' must be a string, not " + it->type_name());
    return it->get<std::string>();
  };
  header.source = text("source");
  header.model = text("model");
  header.precision = text("precision");
  header.format = text("format");
  header.rounding = text("rounding");
  header.scaler = text("scaler");
  header.optimizer = text("optimizer");
  header.recipe = text("recipe");
  header.products = text("products");
  header.run_id = text("run_id");
  if (const auto it = value.find("format_assumed"); it != value.end()) {
    if (!it->is_boolean()) fail(where, std::string("the header's 'format_assumed' must be true or false, not ") + it->type_name());
    header.format_assumed = it->get<bool>();
  }
  return header;
} catch (const json::exception& e) {
  fail(where, std::string("a header field has the wrong type (") + e.what() + ")");
}

RunLogLine parse_run_log_line(std::string_view line, const std::string& where, const RunHeader& header) try {
  const json value = parse_object(line, where);
  RunLogLine out;
  StepRecord& step = out.step;
  step.step = required_integer<std::int64_t>(value, "step", where);
  // loss: a number; null (how JSON writers spell NaN and infinity) or absent is a loss not known,
  // NaN. Anything else is an error, never a silent 0.
  step.loss = std::numeric_limits<double>::quiet_NaN();
  if (const auto loss = value.find("loss"); loss != value.end() && !loss->is_null()) {
    if (!loss->is_number()) fail(where, "'loss' must be a number or null");
    step.loss = loss->get<double>();
  }
  step.loss_scale = 1.0;
  if (const auto scale = value.find("loss_scale"); scale != value.end()) {
    if (!scale->is_number() || !(scale->get<double>() > 0) || !std::isfinite(scale->get<double>()))
      fail(where, "'loss_scale' must be a positive number");
    step.loss_scale = scale->get<double>();
  }
  step.skipped = value.value("skipped", false);
  if (const auto finished = value.find("finished"); finished != value.end()) {
    if (!finished->is_boolean()) fail(where, "'finished' must be true or false");
    step.finished = finished->get<bool>();
  }
  if (const auto scaling = value.find("scaling"); scaling != value.end()) step.scaling = parse_scaling(*scaling, where);
  if (const auto culprit = value.find("culprit"); culprit != value.end() && !culprit->is_null()) step.culprit = parse_culprit(*culprit, where);
  const bool version1 = header.schema_version == 1;
  const auto tensors_it = value.find("tensors");
  if (!version1 && tensors_it == value.end()) return out;  // a step line
  Snapshot snapshot;
  snapshot.step = step.step;
  snapshot.loss = step.loss;
  snapshot.loss_scale = step.loss_scale;
  snapshot.skipped = step.skipped;
  snapshot.scaling = step.scaling;
  snapshot.culprit = step.culprit;
  snapshot.finished = step.finished;
  if (const auto operands = value.find("block_operands"); operands != value.end()) {
    if (!operands->is_array()) fail(where, "'block_operands' must be an array");
    for (const json& o : *operands) {
      if (!o.is_object()) fail(where, "each of 'block_operands' must be an object");
      OperandBlocks b;
      b.name = required<std::string>(o, "name", where);
      b.operand = required_operand(o, "block_operands", where);
      const auto blocks = o.find("blocks");
      if (blocks == o.end()) fail(where, "'block_operands': each needs its 'blocks'");
      b.blocks = parse_block_record(*blocks, where);
      snapshot.block_operands.push_back(std::move(b));
    }
  }
  const json tensors = tensors_it != value.end() ? *tensors_it : json::array();
  if (!tensors.is_array()) fail(where, "'tensors' must be an array");
  const bool from_bridge = header.source == "fpscope_torch";
  for (const json& t : tensors) {
    if (!t.is_object()) fail(where, "each tensor must be an object");
    TensorRecord record;
    record.name = required<std::string>(t, "name", where);
    try {
      record.kind = parse_tensor_kind(required<std::string>(t, "kind", where));
    } catch (const std::invalid_argument& e) {
      fail(where, e.what());
    }
    const json bins = t.value("bins", json::array());
    if (!bins.is_array()) fail(where, "'bins' must be an array of [binade, count] pairs");
    for (const json& bin : bins) {
      if (!bin.is_array() || bin.size() != 2 || !bin[0].is_number_integer() || !bin[1].is_number_integer())
        fail(where, "each bin must be [binade, count] with integers");
      const std::int64_t binade = integer_value<std::int64_t>(bin[0], "a binade", where);
      if (binade < min_binade || binade > max_binade)
        fail(where, "binade " + std::to_string(binade) + " is outside -149..127");
      const std::uint64_t count = integer_value<std::uint64_t>(bin[1], "a bin's count", where);
      const int b = static_cast<int>(binade);
      if (count > std::numeric_limits<std::uint64_t>::max() - record.histogram.count(b))
        fail(where, "binade " + std::to_string(binade) + "'s counts add up past 2^64");
      record.histogram.set_count(b, record.histogram.count(b) + count);
    }
    record.histogram.set_specials(unsigned_field(t, "zero", where), unsigned_field(t, "inf", where),
                                  unsigned_field(t, "nan", where));
    if (!record.histogram.checked_total_count())
      fail(where, "tensor '" + printable_text(record.name) + "' counts more than 2^64 - 1 values");
    if (const auto cast = t.find("cast"); cast != t.end()) {
      if (!cast->is_object()) fail(where, "'cast' must be an object");
      record.cast = CastCounts{unsigned_field(*cast, "flushed_to_zero", where), unsigned_field(*cast, "subnormal", where),
                               unsigned_field(*cast, "overflow", where)};
    }
    if (version1) {
      // The bridge read its weight gradients after unscaling; everything else was read before.
      const bool unscaled_by_bridge = from_bridge && record.kind == TensorKind::weight_gradient;
      record.scale = unscaled_by_bridge ? 1.0 : scale_carried_before_unscaling(record.kind, step.loss_scale);
      record.captured = from_bridge ? Capture::as_stored : Capture::before_cast;
    } else {
      if (const auto scale = t.find("scale"); scale != t.end()) {
        if (!scale->is_number() || !(scale->get<double>() > 0) || !std::isfinite(scale->get<double>()))
          fail(where, "a tensor's 'scale' must be a positive number");
        record.scale = scale->get<double>();
      }
      if (const auto captured = t.find("captured"); captured != t.end()) {
        if (!captured->is_string()) fail(where, "a tensor's 'captured' must be before_cast or as_stored");
        try {
          record.captured = parse_capture(captured->get<std::string>());
        } catch (const std::invalid_argument& e) {
          fail(where, e.what());
        }
      }
    }
    if (const auto blocks = t.find("blocks"); blocks != t.end()) record.blocks = parse_block_record(*blocks, where);
    snapshot.tensors.push_back(std::move(record));
  }
  out.snapshot = std::move(snapshot);
  return out;
} catch (const json::exception& e) {
  fail(where, std::string("a field has the wrong type (") + e.what() + ")");
}

Snapshot parse_snapshot(std::string_view line, const std::string& where) {
  RunLogLine parsed = parse_run_log_line(line, where, RunHeader{});
  if (!parsed.snapshot) fail(where, "a step line, not a snapshot: no 'tensors'");
  return std::move(*parsed.snapshot);
}

void check_line_memory(std::size_t line_bytes, const std::string& where) {
  // Small lines are never a problem; /proc is read only for the rare large one.
  if (line_bytes < (std::size_t{1} << 20)) return;
  try {
    check_memory_budget(static_cast<std::uint64_t>(line_bytes) * json_bytes_per_line_byte,
                        "reading a line of " + byte_size_text(line_bytes));
  } catch (const MemoryBudgetError& e) {
    throw RunLogError(where + ": " + e.what());
  }
}

void check_step_order(std::optional<std::int64_t> previous, std::int64_t step, const std::string& where) {
  if (previous && step <= *previous)
    fail(where, "step " + std::to_string(step) + " after step " + std::to_string(*previous) +
                    ": a run log's steps increase (a line repeated, or two runs in one file?)");
}

RunLog read_run_log(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RunLogError(printable_text(path.string(), 200) + ": cannot open: " + std::strerror(errno));
  RunLog log;
  std::size_t line_number = 0;
  bool have_header = false;
  // Line by line: memory holds one line and the snapshots read, never the whole file; a line
  // longer than memory allows for its JSON is refused before it is all read.
  LineReader lines(in, path.string(), json_bytes_per_line_byte);
  std::string line;
  for (bool complete = false; lines.next(line, complete);) {
    ++line_number;
    const std::string where = printable_text(path.string(), 200) + ":" + std::to_string(line_number);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      if (!have_header) {
        log.header = parse_run_header(line, where);
        have_header = true;
      } else {
        RunLogLine parsed = parse_run_log_line(line, where, log.header);
        check_step_order(log.steps.empty() ? std::nullopt : std::optional(log.steps.back().step), parsed.step.step, where);
        log.steps.push_back(parsed.step);
        if (parsed.snapshot) log.snapshots.push_back(std::move(*parsed.snapshot));
      }
    } catch (const RunLogError&) {
      if (complete || !have_header) throw;
      log.warnings.push_back(where + ": incomplete last line skipped (the run may still be writing, or crashed)");
    }
  }
  if (line_number == 0) throw RunLogError(printable_text(path.string(), 200) + ": empty file: expected a run log header line");
  if (!have_header) throw RunLogError(printable_text(path.string(), 200) + ": no header line: expected a run log");
  return log;
}

namespace {

std::uint32_t crc32_of(std::uint32_t crc, std::string_view bytes) {
  // zlib takes a uInt length: large inputs go in pieces.
  for (std::size_t at = 0; at < bytes.size(); at += 1u << 30) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 1u << 30);
    crc = static_cast<std::uint32_t>(::crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n)));
  }
  return crc;
}

}  // namespace

void write_run_log(const OutputTarget& target, const RunLog& log, const std::function<void(double)>& progress) {
  write_output(target, run_log_text(log, progress));
  if (progress) progress(1.0);
}

std::string run_log_text(const RunLog& log, const std::function<void(double)>& progress) {
  // Step records and snapshots in step order; a step with a snapshot is written once, as it.
  std::string text = run_header_line(log.header) + "\n";
  std::size_t next_snapshot = 0, done = 0;
  const double steps = static_cast<double>(std::max<std::size_t>(1, log.steps.size()));  // every step is one line
  for (const StepRecord& step : log.steps) {
    if (progress && ++done % 1024 == 0) progress(std::min(0.99, static_cast<double>(done) / steps));
    while (next_snapshot < log.snapshots.size() && log.snapshots[next_snapshot].step < step.step)
      text += snapshot_line(log.snapshots[next_snapshot++]) + "\n";
    if (next_snapshot < log.snapshots.size() && log.snapshots[next_snapshot].step == step.step) text += snapshot_line(log.snapshots[next_snapshot++]) + "\n";
    else text += step_line(step) + "\n";
  }
  for (; next_snapshot < log.snapshots.size(); ++next_snapshot) text += snapshot_line(log.snapshots[next_snapshot]) + "\n";
  return text;
}

void check_replaces_only_a_run_log(const OutputTarget& target) {
  check_replaces_only(target, std::size_t{1} << 20, "an fpscope run log", [&](std::string_view start) {
    try {
      parse_run_header(start.substr(0, start.find('\n')), target.given.string());
      return true;
    } catch (const RunLogError&) {
      return false;
    }
  });
}

RunLogAppender::RunLogAppender(const OutputTarget& target, const RunHeader& header)
    : out_(AppendingOutput::create(target, run_header_line(header) + "\n")) {
  const std::string first = run_header_line(header) + "\n";
  position_ = {first.size(), crc32_of(0, first)};
}

RunLogAppender::RunLogAppender(const OutputTarget& target, const RunHeader& header, const RunLogPosition& position)
    : out_(AppendingOutput::resume(target, position.bytes, [&](const std::string& prefix) {
        const std::string first = run_header_line(header) + "\n";
        const auto not_ours = [&](const std::string& why) {
          return OutputError("cannot resume run log " + printable_text(target.given.string(), 200) + ": " + why +
                             "; start a new run, or resume with the log the checkpoint was written with");
        };
        if (prefix.compare(0, first.size(), first) != 0) {
          const std::string line = prefix.substr(0, prefix.find('\n'));
          std::string other_id;
          try {
            other_id = parse_run_header(line, target.given.string()).run_id;
          } catch (const RunLogError&) {
          }
          if (!other_id.empty() && other_id != header.run_id)
            throw not_ours("it belongs to run " + other_id + ", the checkpoint to run " + header.run_id);
          throw not_ours("its header is not this run's");
        }
        if (crc32_of(0, prefix) != position.crc32) throw not_ours("its first " + std::to_string(position.bytes) + " bytes changed since the checkpoint");
      })),
      position_(position) {}

void RunLogAppender::add(std::string_view text) {
  out_.append(text);
  position_.bytes += text.size();
  position_.crc32 = crc32_of(position_.crc32, text);
}

void RunLogAppender::append(const Snapshot& snapshot) { add(snapshot_line(snapshot) + "\n"); }

void RunLogAppender::append_step(const StepRecord& step) { add(step_line(step) + "\n"); }

void RunLogAppender::sync() { out_.sync(); }

void RunLogAppender::keep() {
  out_.sync();
  out_.keep();
}

RunLogSink::RunLogSink(OutputTarget target, std::optional<RunLogPosition> resume_from)
    : target_(std::move(target)), resume_from_(resume_from) {}

void RunLogSink::begin(const RunHeader& header) {
  const std::lock_guard one_writer(mutex_);
  if (closed_) return;
  log_.reset();  // a lock is released before the same file is opened again
  if (resume_from_) log_.emplace(target_, header, *resume_from_);
  else log_.emplace(target_, header);
}

void RunLogSink::append(Snapshot snapshot) {
  const std::lock_guard one_writer(mutex_);
  if (closed_) return;
  log_->append(snapshot);
  last_step_ = snapshot.step;
}

void RunLogSink::append_step(const StepRecord& step) {
  const std::lock_guard one_writer(mutex_);
  if (closed_) return;
  log_->append_step(step);
  last_step_ = step.step;
}

RunLogPosition RunLogSink::sync() {
  const std::lock_guard one_writer(mutex_);
  if (!log_) return {};
  if (!closed_) log_->sync();  // once closed, keep made it durable as it is
  return log_->position();
}

void RunLogSink::keep() {
  const std::lock_guard one_writer(mutex_);
  if (log_ && !closed_) log_->keep();
}

std::int64_t RunLogSink::keep_as_it_is() {
  const std::lock_guard one_writer(mutex_);
  if (log_ && !closed_) log_->keep();
  closed_ = true;
  return last_step_;
}

}  // namespace fpscope
