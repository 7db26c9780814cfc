// The .npy reader: header parsing, memory mapping, and binning by element type.
#include "fpscope/analyzer/npy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {

// A read-only memory mapping of a whole file, unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw NpyError(path.string() + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw NpyError(path.string() + ": cannot stat: " + std::strerror(errno));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (mapping == MAP_FAILED) {
        ::close(fd);
        throw NpyError(path.string() + ": cannot map: " + std::strerror(errno));
      }
      data_ = static_cast<const unsigned char*>(mapping);
      ::madvise(mapping, size_, MADV_SEQUENTIAL);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw NpyError(path.string() + ": " + what);
}

// The value of 'key' in NumPy's header dict: a quoted string, True/False, or a tuple.
std::string dict_value(const std::string& header, const std::string& key, const std::filesystem::path& path) {
  const std::string quoted_key = "'" + key + "'";
  auto at = header.find(quoted_key);
  if (at == std::string::npos) fail(path, "the header has no '" + key + "' entry");
  at = header.find(':', at + quoted_key.size());
  if (at == std::string::npos) fail(path, "malformed header near '" + key + "'");
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  if (at >= header.size()) fail(path, "malformed header near '" + key + "'");
  const char open = header[at];
  if (open == '\'' || open == '"') {
    const auto close = header.find(open, at + 1);
    if (close == std::string::npos) fail(path, "unterminated string in the header");
    return header.substr(at + 1, close - at - 1);
  }
  if (open == '(') {
    const auto close = header.find(')', at);
    if (close == std::string::npos) fail(path, "unterminated shape tuple in the header");
    return header.substr(at, close - at + 1);
  }
  if (open == '[' || open == '{') fail(path, "structured dtypes are not supported: expected a float array");
  const auto end = header.find_first_of(",}", at);
  return header.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// NumPy writes the shape as a Python tuple of non-negative integers: "()", "(5,)", "(3, 4)".
std::vector<std::uint64_t> parse_shape(const std::string& tuple, const std::filesystem::path& path) {
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')')
    fail(path, "malformed shape '" + printable_text(tuple, 40) + "': expected a tuple such as (3, 4)");
  std::vector<std::string> pieces(1);
  for (std::size_t i = 1; i + 1 < tuple.size(); ++i) {
    if (tuple[i] == ',') pieces.emplace_back();
    else if (tuple[i] != ' ') pieces.back() += tuple[i];
  }
  if (pieces.back().empty()) pieces.pop_back();  // "(5,)" and "()"
  std::vector<std::uint64_t> shape;
  for (std::string& extent : pieces) {
    if (!extent.empty() && extent.back() == 'L') extent.pop_back();  // Python 2 long literal
    if (extent.empty() || extent.find_first_not_of("0123456789") != std::string::npos) fail(path, "malformed shape " + tuple);
    if (extent.size() > 19) fail(path, "shape " + tuple + " has an extent too large to address");
    shape.push_back(std::stoull(extent));
  }
  return shape;
}

void bin_float64(ExponentHistogram& histogram, const unsigned char* data, std::uint64_t count, bool swap) {
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t bits;
    std::memcpy(&bits, data + 8 * i, 8);
    if (swap) bits = __builtin_bswap64(bits);
    const double value = bits_double(bits);
    if (std::isnan(value)) histogram.set_specials(histogram.zero_count(), histogram.infinity_count(), histogram.nan_count() + 1);
    else if (std::isinf(value)) histogram.set_specials(histogram.zero_count(), histogram.infinity_count() + 1, histogram.nan_count());
    else if (value == 0) histogram.set_specials(histogram.zero_count() + 1, histogram.infinity_count(), histogram.nan_count());
    else {
      const int binade = std::clamp(std::ilogb(value), min_binade, max_binade);
      histogram.set_count(binade, histogram.count(binade) + 1);
    }
  }
}

// 2-byte elements widened to float32 in chunks, then binned.
void bin_16bit(ExponentHistogram& histogram, const unsigned char* data, std::uint64_t count, bool swap, bool bfloat16) {
  constexpr std::size_t chunk = 1 << 14;
  std::vector<std::uint16_t> half(chunk);
  std::vector<float> widened(chunk);
  for (std::uint64_t start = 0; start < count; start += chunk) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, count - start));
    std::memcpy(half.data(), data + 2 * start, 2 * n);
    if (swap)
      for (std::size_t i = 0; i < n; ++i) half[i] = static_cast<std::uint16_t>((half[i] >> 8) | (half[i] << 8));
    Context ctx;
    bits_to_f32(bfloat16 ? formats::bf16 : formats::fp16, std::span<const std::uint16_t>(half.data(), n),
                std::span<float>(widened.data(), n), ctx);
    histogram.add(std::span<const float>(widened.data(), n));
  }
}

}  // namespace

ExponentHistogram npy_histogram(const std::filesystem::path& path, NpyElements elements, NpyInfo* info) {
  const MappedFile file(path);
  const unsigned char* data = file.data();
  const std::size_t size = file.size();
  if (size < 10 || std::memcmp(data, "\x93NUMPY", 6) != 0) fail(path, "not a NumPy .npy file (no \\x93NUMPY magic)");
  const int major = data[6];
  if (major < 1 || major > 3) fail(path, "unsupported .npy format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (size < 8 + length_bytes) fail(path, "truncated header");
  std::uint32_t header_length = data[8] | (data[9] << 8);
  if (major > 1) header_length |= static_cast<std::uint32_t>(data[10]) << 16 | static_cast<std::uint32_t>(data[11]) << 24;
  const std::size_t data_offset = 8 + length_bytes + header_length;
  if (data_offset > size) fail(path, "truncated header");
  const std::string header(reinterpret_cast<const char*>(data) + 8 + length_bytes, header_length);

  NpyInfo parsed;
  parsed.descr = dict_value(header, "descr", path);
  const std::string fortran_order = dict_value(header, "fortran_order", path);
  if (fortran_order != "True" && fortran_order != "False")
    fail(path, "malformed header: 'fortran_order' is '" + printable_text(fortran_order, 40) + "', expected True or False");
  parsed.fortran_order = fortran_order == "True";
  const std::string shape = dict_value(header, "shape", path);
  parsed.shape = parse_shape(shape, path);
  parsed.count = 1;
  for (const std::uint64_t extent : parsed.shape)
    if (extent != 0 && parsed.count > std::numeric_limits<std::uint64_t>::max() / extent)
      fail(path, "shape " + shape + " holds more elements than can be addressed");
    else
      parsed.count *= extent;
  if (info != nullptr) *info = parsed;

  const std::string& descr = parsed.descr;
  const char order = descr.empty() ? '?' : descr[0];
  const bool swap = order == '>' && std::endian::native == std::endian::little;
  const std::string type = (order == '<' || order == '>' || order == '|' || order == '=') ? descr.substr(1) : descr;
  std::size_t item_size = 0;
  enum class Kind { f16, bf16, f32, f64 } kind = Kind::f32;
  if (descr == "bfloat16" || (elements == NpyElements::bfloat16 && (type == "V2" || type == "u2" || type == "i2" || type == "f2"))) {
    kind = Kind::bf16, item_size = 2;
  } else if (type == "f2") {
    kind = Kind::f16, item_size = 2;
  } else if (type == "f4") {
    kind = Kind::f32, item_size = 4;
  } else if (type == "f8") {
    kind = Kind::f64, item_size = 8;
  } else if (type == "O") {
    fail(path, "holds Python objects (dtype object), not numbers: save a float array");
  } else if (type == "V2" || type == "u2" || type == "i2") {
    fail(path, "holds 2-byte '" + printable_text(descr) + "' elements: pass --as bf16 if they are bfloat16 bits");
  } else {
    fail(path, "has dtype '" + printable_text(descr) + "': expected float16, float32, float64 or bfloat16");
  }
  if (parsed.count > (size - data_offset) / item_size)
    fail(path, "truncated: the header promises " + std::to_string(parsed.count) + " elements of " + std::to_string(item_size) +
                   " bytes but the file holds " + std::to_string(size - data_offset) + " bytes of data");

  ExponentHistogram histogram;
  const unsigned char* elements_data = data + data_offset;
  switch (kind) {
    case Kind::f32:
      if (!swap && reinterpret_cast<std::uintptr_t>(elements_data) % 4 == 0) {
        histogram.add_bits({reinterpret_cast<const std::uint32_t*>(elements_data), static_cast<std::size_t>(parsed.count)});
      } else {
        std::vector<std::uint32_t> chunk;
        for (std::uint64_t start = 0; start < parsed.count; start += 1 << 14) {
          const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(1 << 14, parsed.count - start));
          chunk.resize(n);
          std::memcpy(chunk.data(), elements_data + 4 * start, 4 * n);
          if (swap) for (auto& v : chunk) v = __builtin_bswap32(v);
          histogram.add_bits(chunk);
        }
      }
      break;
    case Kind::f16: bin_16bit(histogram, elements_data, parsed.count, swap, false); break;
    case Kind::bf16: bin_16bit(histogram, elements_data, parsed.count, swap, true); break;
    case Kind::f64: bin_float64(histogram, elements_data, parsed.count, swap); break;
  }
  return histogram;
}

Snapshot npy_folder_snapshot(const std::filesystem::path& folder, NpyElements elements, std::vector<std::string>& warnings) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (it->path().extension() != ".npy") continue;
    // A broken link or a link loop among the files is skipped, said once, and never fatal.
    std::error_code entry_error;
    const bool regular = it->is_regular_file(entry_error);
    if (entry_error || !regular) {
      warnings.push_back(printable_text(it->path().string(), 200) + ": skipped: " +
                         (entry_error ? entry_error.message() : std::string("not a regular file")));
      continue;
    }
    files.push_back(it->path());
  }
  if (error) throw NpyError(folder.string() + ": cannot list: " + error.message());
  if (files.empty()) throw NpyError(folder.string() + ": no .npy files in this folder");
  std::sort(files.begin(), files.end());
  Snapshot snapshot;
  for (const auto& file : files) snapshot.tensors.push_back(TensorRecord{file.stem().string(), TensorKind::other, npy_histogram(file, elements), std::nullopt});
  return snapshot;
}

}  // namespace fpscope
