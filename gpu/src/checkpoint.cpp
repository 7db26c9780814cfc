// Checkpoint encoding: little-endian fields, length-prefixed strings and matrices, CRC-32 at the end.
#include "fpscope/gpu/checkpoint.hpp"

#include <fmt/core.h>

#include <zlib.h>

#include <cmath>
#include <limits>
#include <cstring>
#include <fstream>
#include <iterator>

#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/memory_budget.hpp"


namespace fpscope {

namespace {

constexpr char magic[8] = {'F', 'P', 'S', 'C', 'K', 'P', 'T', '\n'};
constexpr std::uint32_t version = 4;  // 2: the run id and the log prefix's CRC-32; 3: the optimizer's state; 4: FP8 scales
constexpr std::uint32_t oldest_version = 2;  // read: version 2 has no optimizer state (plain SGD)

class Writer {
 public:
  template <typename T>
  void put(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  void put_string(std::string_view text) {
    put<std::uint64_t>(text.size());
    out_.append(text);
  }
  void put_floats(const float* data, std::size_t count) {
    out_.append(reinterpret_cast<const char*>(data), count * sizeof(float));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& where) : bytes_(bytes), where_(where) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    const auto size = get<std::uint64_t>();
    need(size);
    std::string text(bytes_.substr(at_, size));
    at_ += size;
    return text;
  }
  void get_floats(float* data, std::uint64_t count) {
    if (count > (bytes_.size() - at_) / sizeof(float)) fail("is truncated");
    if (count != 0) std::memcpy(data, bytes_.data() + at_, count * sizeof(float));  // data may be null when empty
    at_ += count * sizeof(float);
  }
  std::int64_t get_size(std::int64_t limit) {
    const auto value = get<std::int64_t>();
    if (value < 0 || value > limit) fail("holds a matrix size that makes no sense");
    return value;
  }
  bool done() const { return at_ == bytes_.size(); }
  [[noreturn]] void fail(const std::string& what) const { throw CheckpointError(where_ + " " + what); }

 private:
  void need(std::uint64_t count) {
    if (count > bytes_.size() - at_) fail("is truncated");
  }
  std::string_view bytes_;
  const std::string& where_;
  std::size_t at_ = 0;
};

std::uint32_t crc_of(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes a uInt length: feed large inputs in pieces.
  for (std::size_t at = 0; at < bytes.size(); at += 1u << 30) {
    const std::size_t n = std::min<std::size_t>(bytes.size() - at, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + at), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace

std::string encode_checkpoint(const TrainingCheckpoint& c) {
  Writer w;
  w.bytes().append(magic, sizeof magic);
  w.put(version);
  w.put_string(c.settings);
  w.put<std::int64_t>(c.trainer.steps);
  w.put<std::uint64_t>(c.run_log_bytes);
  w.put_string(c.run_id);
  w.put<std::uint32_t>(c.run_log_crc32);
  w.put<double>(c.trainer.scaler.scale);
  w.put<std::int64_t>(c.trainer.scaler.finite_steps);
  w.put<std::int32_t>(c.trainer.scaler.hysteresis_left);
  w.put<std::int64_t>(c.trainer.scaler.skipped_steps);
  w.put<std::uint64_t>(c.trainer.stochastic_counter);
  w.put<std::uint32_t>(static_cast<std::uint32_t>(c.trainer.weights.size()));
  for (std::size_t l = 0; l < c.trainer.weights.size(); ++l) {
    const Eigen::MatrixXf& m = c.trainer.weights[l];
    w.put<std::int64_t>(m.rows());
    w.put<std::int64_t>(m.cols());
    w.put_floats(m.data(), static_cast<std::size_t>(m.size()));
    const Eigen::VectorXf& b = c.trainer.biases[l];
    w.put<std::int64_t>(b.size());
    w.put_floats(b.data(), static_cast<std::size_t>(b.size()));
  }
  w.put_string(c.data_state);
  const OptimizerState& o = c.trainer.optimizer;
  w.put<std::int64_t>(o.updates);
  for (const auto* buffers : {&o.first, &o.second}) {
    w.put<std::uint32_t>(static_cast<std::uint32_t>(buffers->size()));
    for (const std::vector<float>& buffer : *buffers) {
      w.put<std::int64_t>(static_cast<std::int64_t>(buffer.size()));
      w.put_floats(buffer.data(), buffer.size());
    }
  }
  w.put<std::uint32_t>(static_cast<std::uint32_t>(c.trainer.fp8.size()));
  for (const Fp8TensorState& t : c.trainer.fp8) {
    w.put<float>(t.scale);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(t.amax_history.size()));
    w.put_floats(t.amax_history.data(), t.amax_history.size());
  }
  w.put<std::uint32_t>(crc_of(w.bytes()));
  return std::move(w.bytes());
}

TrainingCheckpoint decode_checkpoint(std::string_view bytes, const std::string& where) {
  if (bytes.size() < sizeof magic + 8 || std::memcmp(bytes.data(), magic, sizeof magic) != 0)
    throw CheckpointError(where + " is not an fpscope checkpoint");
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + bytes.size() - 4, 4);
  if (crc_of(bytes.substr(0, bytes.size() - 4)) != stored_crc) throw CheckpointError(where + " is corrupt: its checksum does not match");
  Reader r(bytes.substr(sizeof magic, bytes.size() - sizeof magic - 4), where);
  const auto file_version = r.get<std::uint32_t>();
  if (file_version < oldest_version || file_version > version)
    r.fail("is of checkpoint version " + std::to_string(file_version) + "; this fpscope reads versions " + std::to_string(oldest_version) +
           " to " + std::to_string(version));
  TrainingCheckpoint c;
  c.settings = r.get_string();
  c.trainer.steps = r.get<std::int64_t>();
  c.run_log_bytes = r.get<std::uint64_t>();
  c.run_id = r.get_string();
  c.run_log_crc32 = r.get<std::uint32_t>();
  c.trainer.scaler.scale = r.get<double>();
  c.trainer.scaler.finite_steps = r.get<std::int64_t>();
  c.trainer.scaler.hysteresis_left = r.get<std::int32_t>();
  c.trainer.scaler.skipped_steps = r.get<std::int64_t>();
  c.trainer.stochastic_counter = r.get<std::uint64_t>();
  const auto layers = r.get<std::uint32_t>();
  if (layers > 4096) r.fail("holds a layer count that makes no sense");
  constexpr std::int64_t max_side = max_layer_size;
  for (std::uint32_t l = 0; l < layers; ++l) {
    const std::int64_t rows = r.get_size(max_side), cols = r.get_size(max_side);
    Eigen::MatrixXf m(0, 0);
    if (rows * cols > static_cast<std::int64_t>(bytes.size())) r.fail("is truncated");
    m.resize(rows, cols);
    r.get_floats(m.data(), static_cast<std::uint64_t>(m.size()));
    const std::int64_t size = r.get_size(max_side);
    if (size > static_cast<std::int64_t>(bytes.size())) r.fail("is truncated");
    Eigen::VectorXf b(size);
    r.get_floats(b.data(), static_cast<std::uint64_t>(size));
    c.trainer.weights.push_back(std::move(m));
    c.trainer.biases.push_back(std::move(b));
  }
  c.data_state = r.get_string();
  if (file_version >= 3) {
    OptimizerState& o = c.trainer.optimizer;
    o.updates = r.get<std::int64_t>();
    if (o.updates < 0) r.fail("holds an optimizer state that makes no sense");
    for (auto* buffers : {&o.first, &o.second}) {
      const auto count = r.get<std::uint32_t>();
      if (count > 2 * 4096) r.fail("holds an optimizer state that makes no sense");
      for (std::uint32_t p = 0; p < count; ++p) {
        const std::int64_t size = r.get_size(max_side * max_side);
        if (size > static_cast<std::int64_t>(bytes.size())) r.fail("is truncated");
        std::vector<float> buffer(static_cast<std::size_t>(size));
        r.get_floats(buffer.data(), static_cast<std::uint64_t>(size));
        buffers->push_back(std::move(buffer));
      }
    }
  }
  if (file_version >= 4) {
    const auto count = r.get<std::uint32_t>();
    if (count > 3 * 4096) r.fail("holds FP8 scales that make no sense");
    for (std::uint32_t t = 0; t < count; ++t) {
      Fp8TensorState state;
      state.scale = r.get<float>();
      const auto length = r.get<std::uint32_t>();
      if (length > 1024 || !(state.scale > 0) || !std::isfinite(state.scale)) r.fail("holds FP8 scales that make no sense");
      state.amax_history.resize(length);
      r.get_floats(state.amax_history.data(), length);
      c.trainer.fp8.push_back(std::move(state));
    }
  }
  if (!r.done()) r.fail("has bytes after its end");
  // A checksum proves the bytes were written whole, not that what was written makes sense.
  const LossScalerState& scaler = c.trainer.scaler;
  if (c.trainer.steps < 0) r.fail("holds a training state that makes no sense: step " + std::to_string(c.trainer.steps));
  if (!(scaler.scale > 0) || !(scaler.scale <= std::numeric_limits<float>::max()))
    r.fail("holds a training state that makes no sense: a loss scale of " + fmt::format("{:g}", scaler.scale) + " (a finite positive float32 is needed)");
  if (scaler.skipped_steps < 0 || scaler.skipped_steps > c.trainer.steps || scaler.finite_steps < 0 || scaler.finite_steps > c.trainer.steps ||
      scaler.hysteresis_left < 0)
    r.fail(fmt::format("holds a training state that makes no sense: {} skipped and {} finite steps after {} steps, hysteresis {}", scaler.skipped_steps,
                       scaler.finite_steps, c.trainer.steps, scaler.hysteresis_left));
  return c;
}

void write_checkpoint(const OutputTarget& target, const TrainingCheckpoint& checkpoint) {
  write_output(target, encode_checkpoint(checkpoint));
}

void check_replaces_only_a_checkpoint(const OutputTarget& target) {
  check_replaces_only(target, sizeof magic, "an fpscope checkpoint",
                      [](std::string_view start) { return start == std::string_view(magic, sizeof magic); });
}

TrainingCheckpoint read_checkpoint(const std::filesystem::path& path) {
  const std::string where = "checkpoint " + printable_text(path.string(), 200);
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (error) throw CheckpointError("cannot read " + where + ": " + error.message());
  // A device or FIFO (/dev/zero) would be read forever: a checkpoint is a file.
  if (!std::filesystem::is_regular_file(status)) throw CheckpointError(where + " is not a regular file");
  const auto size = std::filesystem::file_size(path, error);
  if (error) throw CheckpointError("cannot read " + where + ": " + error.message());
  try {
    check_memory_budget(2 * size, "reading " + where);  // its bytes and the state decoded from them
  } catch (const MemoryBudgetError& e) {
    throw CheckpointError(e.what());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot read " + where + ": " + std::strerror(errno));
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return decode_checkpoint(bytes, where);
}

}  // namespace fpscope
