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
#include <cstdio>
#include <cstring>
#include <limits>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"

#include "fpscope/snapshot/memory_budget.hpp"

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
    if (!S_ISREG(st.st_mode)) {  // a pipe, FIFO or device: read through (no size to map), within memory
      read_stream(fd);
      ::close(fd);
      return;
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
    if (data_ != nullptr && owned_.empty()) ::munmap(const_cast<unsigned char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void read_stream(int fd) {
    std::vector<unsigned char> bytes;
    std::size_t next_check = 0;
    unsigned char piece[1 << 16];
    for (;;) {
      const ssize_t got = ::read(fd, piece, sizeof piece);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int error = errno;
        ::close(fd);
        throw NpyError(path_.string() + ": cannot read: " + std::strerror(error));
      }
      if (got == 0) break;
      bytes.insert(bytes.end(), piece, piece + got);
      if (bytes.size() >= next_check) {  // every 64 MiB
        next_check = bytes.size() + (std::size_t{1} << 26);
        try {
          check_memory_budget(2 * bytes.size(), "reading " + path_.string());
        } catch (const MemoryBudgetError& e) {
          ::close(fd);
          throw NpyError(e.what());
        }
      }
    }
    owned_ = std::move(bytes);
    owned_.push_back(0);  // never empty, so data_ != nullptr marks "owned" too
    data_ = owned_.data();
    size_ = owned_.size() - 1;
  }

  std::filesystem::path path_;
  const unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
  std::vector<unsigned char> owned_;  // a stream's bytes, read whole
};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw NpyError(path.string() + ": " + what);
}

// The value of 'key' in NumPy's header dict: a quoted string, True/False, or a tuple.
std::string dict_value(const std::string& header, const std::string& key, const std::filesystem::path& path) {
  const std::string quoted_key = "'" + key + "'";
  auto at = header.find(quoted_key);
  if (at == std::string::npos) fail(path, "the header has no '" + key + "' entry");
  // NumPy would take the last of two; a header naming one twice is refused rather than guessed.
  if (header.find(quoted_key, at + quoted_key.size()) != std::string::npos) fail(path, "the header names '" + key + "' twice");
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

std::string fmt_hex(std::uint32_t code) {
  char text[16];
  std::snprintf(text, sizeof text, "%X", code);
  return text;
}

// Codes of `f` (2 bytes each, or 1 for formats of 8 bits or fewer) widened to float32 in chunks,
// each chunk handed to `use` (its values, and the index of its first element); a code with bits
// above f's width is refused, naming the element.
template <typename Use>
void widen_codes(const std::filesystem::path& path, Format f, const unsigned char* data, std::uint64_t count, bool swap, Use use) {
  constexpr std::size_t chunk = 1 << 14;
  const bool bytes = f.width() <= 8;
  std::vector<std::uint16_t> half(bytes ? 0 : chunk);
  std::vector<std::uint8_t> codes(bytes ? chunk : 0);
  std::vector<float> widened(chunk);
  const std::uint32_t limit = f.width() >= 16 ? 0x10000u : 1u << f.width();
  for (std::uint64_t start = 0; start < count; start += chunk) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, count - start));
    Context ctx;  // widening is exact
    const auto refuse = [&](std::size_t i, std::uint32_t code) {
      fail(path, "element " + std::to_string(start + i) + " is 0x" + fmt_hex(code) + ", not a " + std::to_string(f.width()) + "-bit " +
                     format_name(f) + " code");
    };
    if (bytes) {
      std::memcpy(codes.data(), data + start, n);
      for (std::size_t i = 0; i < n; ++i)
        if (codes[i] >= limit) refuse(i, codes[i]);
      bits_to_f32(f, std::span<const std::uint8_t>(codes.data(), n), std::span<float>(widened.data(), n), ctx);
    } else {
      std::memcpy(half.data(), data + 2 * start, 2 * n);
      if (swap)
        for (std::size_t i = 0; i < n; ++i) half[i] = static_cast<std::uint16_t>((half[i] >> 8) | (half[i] << 8));
      for (std::size_t i = 0; i < n; ++i)
        if (half[i] >= limit) refuse(i, half[i]);
      bits_to_f32(f, std::span<const std::uint16_t>(half.data(), n), std::span<float>(widened.data(), n), ctx);
    }
    use(std::span<const float>(widened.data(), n), start);
  }
}

// codes: 1- or 2-byte codes of ParsedNpy::format (float16 and bfloat16 among them).
enum class ElementKind { codes, f32, f64, u8 };

// A .npy file's header, checked against the file's size.
struct ParsedNpy {
  NpyInfo info;
  ElementKind kind = ElementKind::f32;
  Format format = formats::fp32;  // the codes' format
  std::size_t item_size = 0;
  bool swap = false;
  const unsigned char* elements = nullptr;
};

ParsedNpy parse_npy(const MappedFile& file, const std::filesystem::path& path, NpyElements elements, bool bytes = false) {
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

  ParsedNpy result;
  NpyInfo& parsed = result.info;
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

  const std::string& descr = parsed.descr;
  const char order = descr.empty() ? '?' : descr[0];
  result.swap = order == '>' && std::endian::native == std::endian::little;
  const std::string type = (order == '<' || order == '>' || order == '|' || order == '=') ? descr.substr(1) : descr;
  if (bytes) {
    if (type != "u1") fail(path, "has dtype '" + printable_text(descr) + "': expected uint8 codes");
    result.kind = ElementKind::u8, result.item_size = 1;
  } else if (elements.as) {
    const Format f = *elements.as;
    if (f.width() > 16) fail(path, "cannot be read as " + format_name(f) + " codes: --as takes formats of 16 bits or fewer");
    const std::string n = f.width() <= 8 ? "1" : "2";
    const bool codes = type == "V" + n || type == "u" + n || type == "i" + n || (n == "2" && type == "f2") || (descr == "bfloat16" && f == formats::bf16);
    if (!codes)
      fail(path, "has dtype '" + printable_text(descr) + "': " + format_name(f) + " codes are " + n +
                     "-byte elements (void, unsigned or signed integers of that size); without --as its values are read by their dtype");
    result.kind = ElementKind::codes, result.format = f, result.item_size = n == "1" ? 1 : 2;
  } else if (descr == "bfloat16") {
    result.kind = ElementKind::codes, result.format = formats::bf16, result.item_size = 2;
  } else if (type == "f2") {
    result.kind = ElementKind::codes, result.format = formats::fp16, result.item_size = 2;
  } else if (type == "f4") {
    result.kind = ElementKind::f32, result.item_size = 4;
  } else if (type == "f8") {
    result.kind = ElementKind::f64, result.item_size = 8;
  } else if (type == "O") {
    fail(path, "holds Python objects (dtype object), not numbers: save a float array");
  } else if (type == "V2" || type == "u2" || type == "i2") {
    fail(path, "holds 2-byte '" + printable_text(descr) + "' elements: pass --as bf16 if they are bfloat16 bits (or --as another 16-bit format)");
  } else if (type == "V1" || type == "u1" || type == "i1") {
    fail(path, "holds 1-byte '" + printable_text(descr) +
                   "' elements: pass --as FORMAT if they are the codes of an 8-bit or smaller format, such as --as float8_e4m3fn (ml_dtypes "
                   "saves its float8, float6 and float4 arrays this way)");
  } else {
    fail(path, "has dtype '" + printable_text(descr) + "': expected float16, float32, float64 or bfloat16");
  }
  if (parsed.count > (size - data_offset) / result.item_size)
    fail(path, "truncated: the header promises " + std::to_string(parsed.count) + " elements of " + std::to_string(result.item_size) +
                   " bytes but the file holds " + std::to_string(size - data_offset) + " bytes of data");
  result.elements = data + data_offset;
  return result;
}

}  // namespace

ExponentHistogram npy_histogram(const std::filesystem::path& path, NpyElements elements, NpyInfo* info) {
  const MappedFile file(path);
  const ParsedNpy npy = parse_npy(file, path, elements);
  const NpyInfo& parsed = npy.info;
  if (info != nullptr) *info = parsed;
  const bool swap = npy.swap;
  using Kind = ElementKind;
  const Kind kind = npy.kind;

  ExponentHistogram histogram;
  const unsigned char* elements_data = npy.elements;
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
    case Kind::codes:
      widen_codes(path, npy.format, elements_data, parsed.count, swap, [&](std::span<const float> values, std::uint64_t) { histogram.add(values); });
      break;
    case Kind::f64: bin_float64(histogram, elements_data, parsed.count, swap); break;
    case Kind::u8: break;  // not a float: parse_npy refused it
  }
  return histogram;
}

NpyTensor npy_read_float32(const std::filesystem::path& path, NpyElements elements) {
  const MappedFile file(path);
  const ParsedNpy npy = parse_npy(file, path, elements);
  if (npy.kind == ElementKind::f64)
    fail(path, "holds float64 values, which would round on their way to float32: save it with .astype(numpy.float32) to say how");
  NpyTensor tensor;
  tensor.info = npy.info;
  const std::uint64_t count = npy.info.count;
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(float)) fail(path, "too many elements to hold in memory");
  std::vector<float> stored(static_cast<std::size_t>(count));
  if (npy.kind == ElementKind::f32) {
    std::memcpy(stored.data(), npy.elements, 4 * stored.size());
    if (npy.swap)
      for (float& v : stored) v = bits_float(__builtin_bswap32(float_bits(v)));
  } else {
    widen_codes(path, npy.format, npy.elements, count, npy.swap, [&](std::span<const float> values, std::uint64_t start) {
      std::copy(values.begin(), values.end(), stored.begin() + static_cast<std::ptrdiff_t>(start));
    });
  }
  if (!npy.info.fortran_order || npy.info.shape.size() < 2) {
    tensor.values = std::move(stored);
    tensor.info.fortran_order = false;
    return tensor;
  }
  // Fortran order: element (i0, i1, ..., in) lies at i0 + s0 * (i1 + s1 * (...)); C order wants
  // the last index fastest. Walk C order with a counter and the Fortran strides.
  const auto& shape = npy.info.shape;
  const std::size_t dims = shape.size();
  std::vector<std::uint64_t> fortran_stride(dims, 1), index(dims, 0);
  for (std::size_t d = 1; d < dims; ++d) fortran_stride[d] = fortran_stride[d - 1] * shape[d - 1];
  tensor.values.resize(stored.size());
  std::uint64_t source = 0;
  for (std::size_t i = 0; i < tensor.values.size(); ++i) {
    tensor.values[i] = stored[static_cast<std::size_t>(source)];
    for (std::size_t d = dims; d-- > 0;) {  // advance the C-order counter, last index first
      ++index[d];
      source += fortran_stride[d];
      if (index[d] < shape[d]) break;
      source -= fortran_stride[d] * shape[d];
      index[d] = 0;
    }
  }
  tensor.info.fortran_order = false;
  return tensor;
}

NpyBytes npy_read_uint8(const std::filesystem::path& path) {
  const MappedFile file(path);
  const ParsedNpy npy = parse_npy(file, path, NpyElements::by_dtype, true);
  if (npy.info.fortran_order && npy.info.shape.size() >= 2) fail(path, "is in Fortran order: save the codes in C order");
  NpyBytes bytes;
  bytes.info = npy.info;
  bytes.values.assign(npy.elements, npy.elements + npy.info.count);
  return bytes;
}

std::string npy_bytes(std::string_view descr, std::span<const std::uint64_t> shape, std::span<const unsigned char> data) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t d = 0; d < shape.size(); ++d) dict += std::to_string(shape[d]) + (shape.size() == 1 ? "," : d + 1 < shape.size() ? ", " : "");
  dict += "), }";
  // Version 1.0: magic, version, a 2-byte header length; the header padded with spaces and ended
  // by a newline so the data starts at a multiple of 64 bytes (NumPy's own alignment).
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(dict.size() & 0xFF);
  bytes += static_cast<char>(dict.size() >> 8);
  bytes += dict;
  bytes.append(reinterpret_cast<const char*>(data.data()), data.size());
  return bytes;
}

std::vector<std::filesystem::path> npy_folder_files(const std::filesystem::path& folder, std::vector<std::string>& warnings) {
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
  return files;
}

Snapshot npy_folder_snapshot(const std::filesystem::path& folder, NpyElements elements, std::vector<std::string>& warnings) {
  const std::vector<std::filesystem::path> files = npy_folder_files(folder, warnings);
  Snapshot snapshot;
  for (const auto& file : files) snapshot.tensors.push_back(TensorRecord{file.stem().string(), TensorKind::other, npy_histogram(file, elements), std::nullopt, 1.0, Capture::before_cast, std::nullopt});
  return snapshot;
}

}  // namespace fpscope
