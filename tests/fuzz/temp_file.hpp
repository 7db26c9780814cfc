// The fuzz targets whose parsers read files: the input goes to one scratch file per process.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

inline std::filesystem::path fuzz_input_file(const std::uint8_t* data, std::size_t size, const char* extension) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("fpscope-fuzz-" + std::to_string(::getpid()) + extension);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, file) != size) std::abort();
  std::fclose(file);
  return path;
}
