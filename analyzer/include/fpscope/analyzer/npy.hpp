// NumPy .npy tensors into exponent histograms, memory-mapped.
#pragma once

#include <cstdint>
#include <optional>
#include <filesystem>
#include <span>
#include <string_view>
#include <stdexcept>
#include <string>
#include <vector>

#include "fpscope/snapshot/snapshot.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

// A .npy file that cannot be read; what() names the file and what was expected.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How to read the elements: by the file's dtype, or as the codes of a format of at most 16 bits
// (`as`): 2-byte elements for formats of 9 to 16 bits (bfloat16 bits in uint16 / int16 / void
// data), one byte each for 8 bits or fewer (FP8, FP6 and FP4 codes in the low bits, as ml_dtypes
// stores float8_e4m3fn, float6_e2m3fn, float4_e2m1fn ... under a void dtype, '<V1', that names
// no type; or uint8 / int8 views of them). A code with bits above the format's width is refused.
struct NpyElements {
  std::optional<Format> as;
  static const NpyElements by_dtype, bfloat16;
};
inline const NpyElements NpyElements::by_dtype{}, NpyElements::bfloat16{formats::bf16};

struct NpyInfo {
  std::string descr;               // as written, such as "<f4"
  std::vector<std::uint64_t> shape;
  bool fortran_order = false;
  std::uint64_t count = 0;
};

// Reads format versions 1-3, float16 / float32 / float64 / bfloat16 (descr "bfloat16"), or codes
// of a format given by NpyElements, either byte order, C or Fortran order (the histogram does not
// depend on it). binary64 magnitudes outside float32's binades are counted in the
// lowest (2^-149) or highest (2^127) bin.
ExponentHistogram npy_histogram(const std::filesystem::path& path, NpyElements elements = NpyElements::by_dtype,
                                NpyInfo* info = nullptr);

// A tensor read whole into float32 values in C order (a Fortran-order file is reordered):
// float32 as stored, float16, bfloat16 and codes widened exactly. float64 is refused (NpyError): its
// values would round on the way, and the caller should say how.
struct NpyTensor {
  NpyInfo info;  // fortran_order is false: values are in C order
  std::vector<float> values;
};
NpyTensor npy_read_float32(const std::filesystem::path& path, NpyElements elements = NpyElements::by_dtype);

// A uint8 tensor (element or scale codes), C order.
struct NpyBytes {
  NpyInfo info;
  std::vector<std::uint8_t> values;
};
NpyBytes npy_read_uint8(const std::filesystem::path& path);

// The bytes of a .npy file (format version 1.0) holding `data`, C-order elements of NumPy type
// `descr` ("<f4", "|u1") and shape `shape`; a header that long must fit 64 KiB.
std::string npy_bytes(std::string_view descr, std::span<const std::uint64_t> shape, std::span<const unsigned char> data);

// The .npy files of a folder in file-name order; an entry that is a broken link, a link loop or
// not a regular file is skipped with a warning. Throws NpyError when the folder cannot be listed
// or holds no .npy file.
std::vector<std::filesystem::path> npy_folder_files(const std::filesystem::path& folder, std::vector<std::string>& warnings);

// A folder of .npy files as one snapshot, one tensor per file (named by the file's stem,
// kind `other`), in file-name order. A .npy entry that is a broken link, a link loop or not a
// regular file is skipped with a warning. Throws NpyError when the folder holds no .npy file.
Snapshot npy_folder_snapshot(const std::filesystem::path& folder, NpyElements elements, std::vector<std::string>& warnings);

}  // namespace fpscope
