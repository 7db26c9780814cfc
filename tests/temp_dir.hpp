// A test's scratch folder, made empty when the test starts and removed with everything in it when
// it ends; named by the process and a count, so that no two tests share one, whatever runs beside.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace fpscope::test {

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("fpscope_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_number()));
  TempDir() {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }

 private:
  static int next_number() {
    static std::atomic<int> count{0};
    return count++;
  }
};

}  // namespace fpscope::test
