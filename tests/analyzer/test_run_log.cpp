// Run logs (JSON Lines) and tidy CSV: round trips, truncated last lines, and clear errors.
#include <doctest/doctest.h>

#include <limits>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/culprit_diagnosis.hpp"
#include "fpscope/analyzer/plot.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/snapshot/run_store.hpp"

using namespace fpscope;

namespace {

std::filesystem::path temporary(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("fpscope-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

Snapshot sample_snapshot(std::int64_t step, std::mt19937& rng) {
  Snapshot s;
  s.step = step;
  s.loss = 2.5 / static_cast<double>(step + 1);
  s.loss_scale = 65536;
  s.skipped = step % 5 == 4;
  for (const auto& [name, kind] : {std::pair{"fc1", TensorKind::activation}, std::pair{"fc1", TensorKind::activation_gradient},
                                   std::pair{"fc, \"2\"", TensorKind::weight_gradient}}) {
    TensorRecord t{name, kind, {}, std::nullopt};
    std::vector<float> values(1000);
    std::normal_distribution<float> normal(0, 1e-3f);
    for (float& v : values) v = normal(rng);
    values[0] = 0.0f;
    values[1] = std::numeric_limits<float>::infinity();
    t.histogram.add(values);
    if (kind == TensorKind::activation_gradient) t.cast = CastCounts{12, 34, 1};
    if (kind == TensorKind::activation) {  // block statistics (one NaN block: the infinity)
      BlockRecord blocks{block_formats::mxfp4, ScaleRule::even, {}};
      std::vector<std::uint8_t> codes(values.size()), scales((values.size() + 31) / 32);
      float tensor_scale = 0;
      Context ctx;
      block_quantize(blocks.format, blocks.rule, {1, values.size(), BlockAxis::rows, 32}, values, codes, scales, tensor_scale, ctx,
                     &blocks.statistics);
      t.blocks = blocks;
    }
    s.tensors.push_back(std::move(t));
  }
  return s;
}

}  // namespace

TEST_CASE("a run log round-trips through JSON Lines, written at once or appended") {
  std::mt19937 rng(4);
  RunLog log;
  log.header = RunHeader{run_log_schema_version, "fpscope train", "784-512-10 relu", "fp16", "fp16", "rne", "dynamic"};
  log.header.optimizer = "adamw betas 0.9,0.999 eps 1e-08 weight decay 0.01, clip 1";
  log.header.products = "float32: OpenBLAS 0.3.21 (Haswell); bf16: in float32";
  for (int step = 0; step < 12; ++step) log.snapshots.push_back(sample_snapshot(step, rng));
  const auto whole = temporary("whole.jsonl");
  write_run_log(resolve_output(whole), log);
  const RunLog back = read_run_log(whole);
  CHECK(back.header == log.header);
  CHECK(back.snapshots == log.snapshots);
  CHECK(back.warnings.empty());

  const auto appended = temporary("appended.jsonl");
  {
    RunLogAppender appender(resolve_output(appended), log.header);
    for (const Snapshot& s : log.snapshots) appender.append(s);
  }
  CHECK(read_run_log(appended).snapshots == log.snapshots);
}

// `line` with its first `from` replaced by `to` (which must be there): a damaged copy of a log line.
static std::string replaced(std::string line, const std::string& from, const std::string& to) {
  const auto at = line.find(from);
  REQUIRE(at != std::string::npos);
  line.replace(at, from.size(), to);
  return line;
}

TEST_CASE("block statistics in a run log: read back whole, and damage named") {
  std::mt19937 rng(9);
  const Snapshot snapshot = sample_snapshot(3, rng);
  REQUIRE(snapshot.tensors[0].blocks);
  CHECK(snapshot.tensors[0].blocks->statistics.nan_blocks == 1);
  const std::string line = snapshot_line(snapshot);
  CHECK(parse_snapshot(line, "log:2") == snapshot);
  const auto damaged = [&](const std::string& from, const std::string& to) { return replaced(line, from, to); };
  CHECK_THROWS_WITH_AS(parse_snapshot(damaged("\"format\":\"mxfp4\"", "\"format\":\"mxfp5\""), "log:2"),
                       doctest::Contains("log:2: 'blocks': unknown block-scaled format 'mxfp5'"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_snapshot(damaged("\"blocks\":32,", "\"blocks\":31,"), "log:2"),
                       doctest::Contains("log:2: 'blocks': the scale codes count 32 blocks, not 31"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_snapshot(damaged("\"relative\":[[0,", "\"relative\":[[1,"), "log:2"),
                       doctest::Contains("a relative exponent must be 0 ..= -276"), RunLogError);
}

TEST_CASE("a block-scaled recipe's operand statistics in snapshots: read back whole, and damage named") {
  std::mt19937 rng(11);
  Snapshot snapshot = sample_snapshot(4, rng);
  BlockRecord blocks = *snapshot.tensors[0].blocks;
  snapshot.block_operands.push_back({"h0.attn.qkv", "weight", blocks});
  blocks.statistics.flushed_to_zero = 7;
  snapshot.block_operands.push_back({"h0.attn.qkv", "output_gradient", blocks});
  const std::string line = snapshot_line(snapshot);
  CHECK(parse_snapshot(line, "log:5") == snapshot);
  const auto damaged = [&](const std::string& from, const std::string& to) { return replaced(line, from, to); };
  CHECK_THROWS_WITH_AS(parse_snapshot(damaged("\"operand\":\"weight\"", "\"operand\":\"bias\""), "log:5"),
                       doctest::Contains("log:5: 'block_operands': operand must be input, weight or output_gradient, not 'bias'"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_snapshot(damaged("\"block_operands\":[", "\"block_operands\":7,\"unread\":["), "log:5"),
                       doctest::Contains("log:5: 'block_operands' must be an array"), RunLogError);
  // The operands' block records are checked as a tensor's are.
  const std::string operands = line.substr(line.find("\"block_operands\""));
  CHECK_THROWS_WITH_AS(parse_snapshot(line.substr(0, line.find("\"block_operands\"")) + replaced(operands, "\"format\":\"mxfp4\"", "\"format\":\"mxfp5\""),
                                      "log:5"),
                       doctest::Contains("'blocks': unknown block-scaled format 'mxfp5'"), RunLogError);
}

TEST_CASE("FP8 scaling records in step lines and snapshots: read back whole, and damage named") {
  StepRecord step{7, 0.25, 1.0, false, {}};
  step.scaling.push_back({"fc1", "input", "e4m3", 5.5, 81.45454406738281, 8192, 3, 1, 0});
  step.scaling.push_back({"fc1", "output_gradient", "e5m2", 3.5e-6, 1.6e10, 2560, 0, 2, 1});
  const std::string line = step_line(step);
  RunHeader header;
  const RunLogLine back = parse_run_log_line(line, "log:9", header);
  CHECK(back.step == step);
  std::mt19937 rng(4);
  Snapshot snapshot = sample_snapshot(2, rng);
  snapshot.scaling = step.scaling;
  CHECK(parse_snapshot(snapshot_line(snapshot), "log:3") == snapshot);
  const auto damaged = [&](const std::string& from, const std::string& to) { return replaced(line, from, to); };
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"e5m2\"", "\"e5m2x\""), "log:9", header), doctest::Contains("log:9: 'scaling': "),
                       RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"output_gradient\"", "\"bias\""), "log:9", header),
                       doctest::Contains("operand must be input, weight or output_gradient"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"flushed_to_zero\":1", "\"flushed_to_zero\":8190"), "log:9", header),
                       doctest::Contains("the counts do not fit its 8192 elements"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"scale\":81", "\"scale\":-81"), "log:9", header),
                       doctest::Contains("'scale' must be a positive number"), RunLogError);
}

TEST_CASE("culprit records in step lines and snapshots: read back whole, every fault, and damage named") {
  Culprit overflow;
  overflow.name = "h1.attn.scores";
  overflow.kind = TensorKind::activation_gradient;
  overflow.fault = CulpritFault::overflow;
  overflow.format = "fp16";
  overflow.format_largest = 65504;
  overflow.largest = 5.25e5;
  overflow.position = 31;
  overflow.upstream = "h1.mlp.proj";
  overflow.upstream_kind = TensorKind::activation_gradient;
  overflow.upstream_largest = 3120.5;
  overflow.nan_count = 0, overflow.infinity_count = 0, overflow.overflow_count = 17;
  overflow.rank = 3, overflow.micro_batch = 1;
  Culprit nan = overflow;
  nan.fault = CulpritFault::nan;
  nan.largest.reset();
  nan.rank.reset(), nan.micro_batch.reset(), nan.nan_count.reset(), nan.infinity_count.reset(), nan.overflow_count.reset();
  Culprit inf = nan;
  inf.fault = CulpritFault::infinity;
  inf.largest = std::numeric_limits<double>::infinity();
  inf.upstream.clear();
  inf.upstream_kind = TensorKind::other;
  inf.upstream_largest = 0;
  inf.position = 0;
  RunHeader header;
  for (const Culprit& c : {overflow, nan, inf}) {
    CAPTURE(std::string(culprit_fault_name(c.fault)));
    StepRecord step{12, std::numeric_limits<double>::quiet_NaN(), 131072, true, {}, c};
    const RunLogLine back = parse_run_log_line(step_line(step), "log:13", header);
    REQUIRE(back.step.culprit);
    CHECK(*back.step.culprit == c);
    std::mt19937 rng(4);
    Snapshot snapshot = sample_snapshot(12, rng);
    snapshot.culprit = c;
    CHECK(parse_snapshot(snapshot_line(snapshot), "log:13") == snapshot);
  }
  const std::string line = step_line(StepRecord{12, 0.5, 131072, true, {}, overflow});
  const auto damaged = [&](const std::string& from, const std::string& to) { return replaced(line, from, to); };
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"overflow\",\"format\"", "\"underflow\",\"format\""), "log:13", header),
                       doctest::Contains("log:13: 'culprit': 'underflow' is not a culprit's fault"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"largest\":525000.0", "\"largest\":null"), "log:13", header),
                       doctest::Contains("an overflow needs its 'largest'"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"position\":31", "\"position\":-1"), "log:13", header),
                       doctest::Contains("'position' must be >= 0"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(damaged("\"kind\":\"activation_gradient\",\"largest\"", "\"kind\":\"bias\",\"largest\""), "log:13", header),
                       doctest::Contains("log:13: 'culprit': unknown tensor kind 'bias'"), RunLogError);
}

TEST_CASE("a truncated last line is skipped with a warning; other damage is an error naming file and line") {
  std::mt19937 rng(5);
  const std::string header = run_header_line(RunHeader{}) + "\n";
  const std::string one = snapshot_line(sample_snapshot(1, rng)) + "\n";
  const std::string two = snapshot_line(sample_snapshot(2, rng));
  const auto truncated = temporary("truncated.jsonl");
  write_text(truncated, header + one + two.substr(0, two.size() / 2));
  const RunLog log = read_run_log(truncated);
  CHECK(log.snapshots.size() == 1);
  REQUIRE(log.warnings.size() == 1);
  CHECK(log.warnings[0].find("truncated.jsonl:3") != std::string::npos);

  const auto broken = temporary("broken.jsonl");
  write_text(broken, header + two.substr(0, two.size() / 2) + "\n" + one);
  CHECK_THROWS_WITH_AS(read_run_log(broken), doctest::Contains("broken.jsonl:2:"), RunLogError);

  const auto future = temporary("future.jsonl");
  write_text(future, "{\"schema_version\": 99}\n" + one);
  CHECK_THROWS_WITH_AS(read_run_log(future), doctest::Contains("future.jsonl:1: unknown schema version 99"), RunLogError);

  const auto bad_bin = temporary("bad_bin.jsonl");
  write_text(bad_bin, header + R"({"step": 1, "tensors": [{"name": "x", "kind": "weight", "bins": [[500, 1]]}]})" + "\n");
  CHECK_THROWS_WITH_AS(read_run_log(bad_bin), doctest::Contains("bad_bin.jsonl:2: binade 500"), RunLogError);

  const auto wrong_type = temporary("wrong_type.jsonl");
  write_text(wrong_type, header + R"({"step": 1, "skipped": "yes"})" + "\n");
  CHECK_THROWS_WITH_AS(read_run_log(wrong_type), doctest::Contains("wrong_type.jsonl:2: a field has the wrong type"), RunLogError);

  CHECK_THROWS_AS(read_run_log(temporary("missing.jsonl")), RunLogError);
}

TEST_CASE("integer fields are read exactly: floats and out-of-range values are refused (fuzz finding: step 2.2e28)") {
  const std::string header = run_header_line(RunHeader{}) + "\n";
  const std::string tensor = R"({"name": "x", "kind": "weight", )";
  for (const auto& [body, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"step": 2.2e28})", "'step' must be an integer"},
           {R"({"step": 5.0})", "'step' must be an integer"},
           {R"({"step": 18446744073709551615})", "'step' must be an integer"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("bins": [[4294967296, 1]]}]})", "binade 4294967296 is outside"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("bins": [[3, -1]]}]})", "a bin's count must be an integer from 0"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("bins": [[3, 1.5]]}]})", "each bin must be [binade, count] with integers"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("bins": [[3, 18446744073709551615], [3, 1]]}]})", "binade 3's counts add up past 2^64"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("zero": 1e30}]})", "'zero' must be an integer"},
           {R"({"step": 1, "tensors": [)" + tensor + R"("cast": {"overflow": -2}}]})", "'overflow' must be an integer"},
       }) {
    CAPTURE(body);
    const auto file = temporary("integers.jsonl");
    write_text(file, header + body + "\n");
    const std::string expected = "integers.jsonl:2: " + message;
    CHECK_THROWS_WITH_AS(read_run_log(file), doctest::Contains(expected.c_str()), RunLogError);
  }
  const auto bad_version = temporary("version.jsonl");
  write_text(bad_version, R"({"schema_version": 1e10})" "\n");
  CHECK_THROWS_WITH_AS(read_run_log(bad_version), doctest::Contains("'schema_version' must be an integer"), RunLogError);
  // The largest values that fit are read as they are.
  const auto big = temporary("big.jsonl");
  write_text(big, header + R"({"step": 9223372036854775807, "tensors": [)" + tensor + R"("bins": [[-149, 18446744073709551615]]}]})" + "\n");
  const RunLog log = read_run_log(big);
  REQUIRE(log.snapshots.size() == 1);
  CHECK(log.snapshots[0].step == std::numeric_limits<std::int64_t>::max());
  CHECK(log.snapshots[0].tensors[0].histogram.count(-149) == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("run log -> CSV -> histograms are equal; a CSV missing a column is an error") {
  std::mt19937 rng(6);
  std::vector<Snapshot> snapshots;
  for (int step = 0; step < 4; ++step) snapshots.push_back(sample_snapshot(step * 10, rng));
  const auto csv = temporary("run.csv");
  write_output(csv, histograms_csv(snapshots));
  const std::vector<Snapshot> back = read_histograms_csv(csv);
  REQUIRE(back.size() == snapshots.size());
  for (std::size_t i = 0; i < back.size(); ++i) {
    CHECK(back[i].step == snapshots[i].step);
    REQUIRE(back[i].tensors.size() == snapshots[i].tensors.size());
    for (std::size_t t = 0; t < back[i].tensors.size(); ++t) {
      CHECK(back[i].tensors[t].name == snapshots[i].tensors[t].name);
      CHECK(back[i].tensors[t].kind == snapshots[i].tensors[t].kind);
      CHECK(back[i].tensors[t].histogram == snapshots[i].tensors[t].histogram);
    }
  }
  const auto missing = temporary("missing_column.csv");
  write_text(missing, "step,tensor,binade,count\n1,fc1,-3,4\n");
  CHECK_THROWS_WITH_AS(read_histograms_csv(missing), doctest::Contains("missing_column.csv:1: missing column 'kind'"), std::runtime_error);
  const auto bad_number = temporary("bad_number.csv");
  write_text(bad_number, "step,tensor,kind,binade,count\n1,fc1,weight,-3,four\n");
  CHECK_THROWS_WITH_AS(read_histograms_csv(bad_number), doctest::Contains("bad_number.csv:2: count 'four'"), std::runtime_error);
}

TEST_CASE("RunStore: a writer thread appends while a reader copies what is new") {
  RunStore store;
  std::mt19937 rng(7);
  std::vector<Snapshot> made;
  for (int i = 0; i < 200; ++i) made.push_back(sample_snapshot(i, rng));
  std::thread writer([&] {
    for (const Snapshot& s : made) store.append(s);
  });
  std::vector<Snapshot> seen;
  while (seen.size() < made.size()) {
    auto fresh = store.copy_since(seen.size());
    seen.insert(seen.end(), fresh.begin(), fresh.end());
  }
  writer.join();
  CHECK(seen == made);
  CHECK(store.copy_since(1000).empty());
}

TEST_CASE("RunStore: a memory budget thins old snapshots, keeps the first, the newest and the pinned, and readers see it") {
  RunStore store;
  std::mt19937 rng(11);
  const Snapshot one = sample_snapshot(0, rng);
  store.append(one);
  const std::size_t per_snapshot = store.snapshot_bytes();
  REQUIRE(per_snapshot > sizeof(Snapshot));
  store.clear();
  const std::size_t budget = 200 * per_snapshot;
  store.set_memory_budget(budget, 50);
  store.pin(333);
  std::uint64_t layout_seen = 0, generation_seen = store.generation();
  std::vector<std::shared_ptr<const Snapshot>> reader;
  std::size_t steps_seen = 0;
  for (int i = 0; i < 2000; ++i) {
    store.append(sample_snapshot(i, rng));
    CHECK(store.snapshot_bytes() <= budget);
    if (i % 97 == 0) {  // a reader catching up now and then, as the app does once per frame
      auto update = store.update_since(generation_seen, reader.size(), steps_seen, layout_seen);
      if (update.layout != layout_seen) reader.clear();
      reader.insert(reader.end(), update.snapshots.begin(), update.snapshots.end());
      steps_seen += update.steps.size();
      layout_seen = update.layout;
      generation_seen = update.generation;
    }
  }
  auto update = store.update_since(generation_seen, reader.size(), steps_seen, layout_seen);
  if (update.layout != layout_seen) reader.clear();
  reader.insert(reader.end(), update.snapshots.begin(), update.snapshots.end());
  steps_seen += update.steps.size();
  CHECK(update.layout > 0);  // it did thin
  CHECK(steps_seen == 2000);  // step records are never thinned
  CHECK(store.step_count() == 2000);
  REQUIRE(reader.size() == store.size());
  CHECK(store.thinned_snapshots() == 2000 - store.size());
  CHECK(reader.front()->step == 0);
  for (int i = 0; i < 50; ++i) CHECK(reader[reader.size() - 1 - static_cast<std::size_t>(i)]->step == 1999 - i);
  CHECK(std::any_of(reader.begin(), reader.end(), [](const auto& s) { return s->step == 333; }));
  for (std::size_t i = 1; i < reader.size(); ++i) CHECK(reader[i - 1]->step < reader[i]->step);
  // The kept ones are the snapshots as appended, not copies that drifted.
  std::mt19937 again(11);
  (void)sample_snapshot(0, again);
  std::vector<Snapshot> made;
  for (int i = 0; i < 2000; ++i) made.push_back(sample_snapshot(i, again));
  for (const auto& s : reader) CHECK(*s == made[static_cast<std::size_t>(s->step)]);
}

TEST_CASE("tensor names with quotes, commas, line breaks, control and non-UTF-8 bytes: CSV reads back, SVG stays text") {
  const std::vector<std::string> names{"a,b", "say \"hi\"", "two\nlines", "cr\r\nlf", "ctl\x01\x1b[31m", std::string("nul\0x", 5), "bad\xff\xfe utf8",
                                       "é ü 日本"};
  std::vector<Snapshot> snapshots(1);
  for (std::size_t i = 0; i < names.size(); ++i) {
    TensorRecord t;
    t.name = names[i];
    t.kind = TensorKind::activation_gradient;
    t.histogram.set_count(-static_cast<int>(i) - 3, i + 1);
    snapshots[0].tensors.push_back(t);
  }
  const auto csv = temporary("names.csv");
  write_output(csv, histograms_csv(snapshots));
  const std::vector<Snapshot> back = read_histograms_csv(csv);
  REQUIRE(back.size() == 1);
  REQUIRE(back[0].tensors.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    CAPTURE(i);
    CHECK(back[0].tensors[i].name == names[i]);
    CHECK(back[0].tensors[i].histogram == snapshots[0].tensors[i].histogram);
  }
  // In a plot title: no control character and no byte that is not UTF-8 reaches the SVG (XML
  // allows neither), and XML's specials are escaped.
  for (const std::string& name : names) {
    CAPTURE(name);
    const std::string svg = histogram_svg(snapshots[0].tensors[0].histogram, PlotOptions{formats::fp16, 0, name + " <&>"});
    for (const char c : svg) CHECK((static_cast<unsigned char>(c) >= 0x20 || c == '\n'));
    CHECK(svg.find(" &lt;&amp;&gt;") != std::string::npos);
    CHECK(svg.find("\xff") == std::string::npos);
  }
}

TEST_CASE("writing a run log reports its progress, rising, ending at 1 once the file is whole") {
  std::mt19937 rng(5);
  RunLog log;
  for (int i = 0; i < 3000; ++i) {
    if (i % 100 == 0) {
      log.snapshots.push_back(sample_snapshot(i, rng));
      log.steps.push_back(log.snapshots.back().step_record());
    } else {
      log.steps.push_back({i, 1.0, 1.0, false});
    }
  }
  std::vector<double> heard;
  const auto path = temporary("progress.jsonl");
  write_run_log(resolve_output(path), log, [&](double p) { heard.push_back(p); });
  REQUIRE(heard.size() >= 3);  // 3000 steps: at 1024 and 2048, then 1
  CHECK(std::is_sorted(heard.begin(), heard.end()));
  CHECK(heard.front() > 0.3);
  CHECK(heard.front() < 0.4);  // 1024 of 3000
  CHECK(heard.back() == 1.0);
  CHECK(read_run_log(path).snapshots.size() == 30);
}

TEST_CASE("the format a run cast to: what analyze, export and the app ask about when no one says") {
  const auto cast_to = [](const std::string& format) {
    RunHeader header;
    header.format = format;
    return run_cast_format(header);
  };
  CHECK(cast_to("fp16") == formats::fp16);
  CHECK(cast_to("bf16") == formats::bf16);
  CHECK(cast_to("bfloat16") == formats::bf16);  // any of its names, as parse_format reads them
  CHECK(cast_to("e4m3") == formats::e4m3);
  CHECK(cast_to("tf32") == formats::tf32);      // float32's range, fewer bits: a cast of its own
  CHECK_FALSE(cast_to("fp32").has_value());     // a float32 run casts to nothing
  CHECK_FALSE(cast_to("fp64").has_value());
  CHECK_FALSE(cast_to("").has_value());         // a header without one (older writers)
  CHECK_FALSE(cast_to("fp17").has_value());     // nor a name fpscope does not know
}

TEST_CASE("a format the log's writer only assumed is not the run's: read, written back, and never taken for the run's cast") {
  const std::string line =
      R"({"fpscope_run_log": true, "schema_version": 2, "source": "fpscope_torch", "model": "m", "precision": "", "format": "fp16", "rounding": "rne", "scaler": "none", "format_assumed": true})";
  const RunHeader assumed = parse_run_header(line, "log");
  CHECK(assumed.format == "fp16");
  CHECK(assumed.format_assumed);
  CHECK_FALSE(run_cast_format(assumed).has_value());
  CHECK_FALSE(run_cast_to(assumed, "fp16"));
  CHECK(parse_run_header(run_header_line(assumed), "again") == assumed);  // the app's export keeps it
  RunHeader known = assumed;
  known.format_assumed = false;
  CHECK(run_cast_format(known) == formats::fp16);
  CHECK(run_cast_to(known, "fp16"));
  CHECK_FALSE(run_cast_to(known, "bf16"));
  CHECK(run_header_line(known).find("format_assumed") == std::string::npos);  // absent where false
  // Padded with spaces to its old length (the bridge rewrites its header in place): the same header.
  CHECK(parse_run_header(run_header_line(known) + "      ", "padded") == known);
}

TEST_CASE("a tensor record keeps block statistics on the heap: one without them is its histogram and a few words") {
  // The app keeps hundreds of snapshots of every tensor: 4.3 KB of empty block counts inline in
  // each record was two thirds of them.
  CHECK(sizeof(TensorRecord) < sizeof(ExponentHistogram) + 160);
  TensorRecord a;
  CHECK_FALSE(a.blocks.has_value());
  a.blocks = BlockRecord{block_formats::mxfp4, ScaleRule::even, {}};
  a.blocks->statistics.flushed_to_zero = 7;
  TensorRecord b = a;  // a deep copy: b's counts are its own
  b.blocks->statistics.flushed_to_zero = 8;
  CHECK(a.blocks->statistics.flushed_to_zero == 7);
  CHECK_FALSE(a == b);
  b.blocks->statistics.flushed_to_zero = 7;
  CHECK(a == b);
  b.blocks.reset();
  CHECK_FALSE(a == b);
  CHECK(b.blocks == std::nullopt);
  std::optional<BlockRecord> none;
  a.blocks = std::move(none);
  CHECK(a == b);
}

TEST_CASE("RunStore: a record's block statistics, held on the heap, count toward the memory budget") {
  Snapshot plain;
  plain.tensors.resize(4);
  Snapshot with_blocks = plain;
  for (TensorRecord& t : with_blocks.tensors) t.blocks = BlockRecord{block_formats::mxfp8_e4m3, ScaleRule::floor, {}};
  RunStore a, b;
  a.append(plain);
  b.append(with_blocks);
  CHECK(b.snapshot_bytes() >= a.snapshot_bytes() + 4 * sizeof(BlockRecord));
}

TEST_CASE("a culprit's diagnosis: the scale blamed for a gradient past the format or one computed in it that overflowed, not otherwise") {
  Culprit c;
  c.name = "fc3";
  c.kind = TensorKind::activation_gradient;
  c.fault = CulpritFault::overflow;
  c.format = "fp16";
  c.format_largest = 65504;
  c.largest = 4.0e6;  // 2^5.93 past 65504: 6 binades
  c.upstream = "fc4";
  c.upstream_kind = TensorKind::activation_gradient;
  c.upstream_largest = 3000;
  StepRecord step{9, 2.3, 0x1p40, true, {}, c};
  CHECK(binades_too_high(c) == 6);
  CHECK(culprit_diagnosis(step) ==
        "fc3 activation_gradient overflowed fp16 at loss scale 2^40: its largest, 4e+06, is past 65504; the scale is 6 binades too high for this "
        "tensor (at 2^34 its largest would be 6.25e+04)");
  // An activation past the format: a loss scale does not multiply it.
  c.kind = TensorKind::activation;
  step.culprit = c;
  CHECK(binades_too_high(c) == 0);
  CHECK(culprit_diagnosis(step).find("a loss scale does not multiply activations, so not a scaling problem") != std::string::npos);
  // A NaN with finite inputs, in float32 (the engine): not the scale, whatever its inputs.
  c.kind = TensorKind::weight_gradient;
  c.fault = CulpritFault::nan;
  c.largest.reset();
  c.upstream_largest = 60000;
  step.culprit = c;
  CHECK(culprit_diagnosis(step) ==
        "a NaN appeared in fc3 weight_gradient with finite inputs (the largest gradient before it 6e+04 at loss scale 2^40, in fc4 "
        "activation_gradient): not a scaling problem");
  // The same computed in the format (the bridge under autocast), from gradients within 2^10 of its
  // largest: an overflow inside the operation, the scale's doing; from gradients far below it, not.
  c.captured = Capture::as_stored;
  step.culprit = c;
  CHECK(culprit_diagnosis(step).find("most likely an operation making it overflowed fp16; the scale is too high") != std::string::npos);
  c.upstream_largest = 30;
  step.culprit = c;
  CHECK(culprit_diagnosis(step).find("not a scaling problem") != std::string::npos);
  // The first gradient, at a loss scale within 2^10 of the format's largest.
  c.upstream.clear();
  c.fault = CulpritFault::infinity;
  step.culprit = c;
  CHECK(culprit_diagnosis(step).find("an infinity appeared in fc3 weight_gradient as the step's first gradient, at loss scale 2^40") != std::string::npos);
  step.loss_scale = 1;
  CHECK(culprit_diagnosis(step).find("not a scaling problem") != std::string::npos);
  step.culprit.reset();
  CHECK(culprit_diagnosis(step).rfind("no culprit recorded", 0) == 0);
}

TEST_CASE("a step that did not finish: its line says so, reads back, and its diagnosis says it first") {
  Culprit c;
  c.name = "fc2";
  c.kind = TensorKind::activation;
  c.fault = CulpritFault::nan;
  c.format = "bf16";
  c.format_largest = 3.3895313892515355e38;
  c.position = 3;
  c.captured = Capture::as_stored;
  StepRecord step{7, std::numeric_limits<double>::quiet_NaN(), 1, false, {}, c};
  step.finished = false;
  const std::string line = step_line(step);
  CHECK(line.find("\"finished\":false") != std::string::npos);
  const RunHeader header;
  const RunLogLine back = parse_run_log_line(line, "log:9", header);
  CHECK(!back.step.finished);
  CHECK(std::isnan(back.step.loss));
  REQUIRE(back.step.culprit);
  CHECK(*back.step.culprit == c);
  // Every engine step finishes: the field is written only where false, and absent reads as true.
  StepRecord done = step;
  done.finished = true;
  CHECK(step_line(done).find("finished") == std::string::npos);
  CHECK(parse_run_log_line(step_line(done), "log:9", header).step.finished);
  CHECK_THROWS_WITH_AS(parse_run_log_line(replaced(line, "\"finished\":false", "\"finished\":0"), "log:9", header),
                       doctest::Contains("log:9: 'finished' must be true or false"), RunLogError);
  CHECK(culprit_diagnosis(step) == "did not finish (its loop stopped inside it: no loss, no update); " + culprit_diagnosis(done));
  CHECK(culprit_diagnosis(done).rfind("a NaN appeared in fc2 activation", 0) == 0);
}
