// `fpscope analyze` of a 1 GiB float32 .npy file in the page cache, beside a plain read of it.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fpscope/analyzer/npy.hpp"

namespace {

constexpr std::size_t count = std::size_t{256} << 20;  // 256M floats = 1 GiB

std::filesystem::path created;  // removed at exit

// Writes the file once per process (the write leaves it in the page cache).
const std::filesystem::path& tensor_file() {
  static const std::filesystem::path path = [] {
    const auto file = std::filesystem::temp_directory_path() / ("fpscope-bench-" + std::to_string(::getpid()) + ".npy");
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(count) + ",), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::ofstream out(file, std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size() & 0xFF) << static_cast<char>(header.size() >> 8) << header;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0, 1);
    std::vector<float> chunk(1 << 20);
    for (std::size_t written = 0; written < count; written += chunk.size()) {
      for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = i % 8 == 0 ? 0.0f : normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 24) - 20);
      out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size() * sizeof(float)));
    }
    created = file;
    return file;
  }();
  return path;
}

struct RemoveAtExit {
  ~RemoveAtExit() {
    std::error_code ignored;
    if (!created.empty()) std::filesystem::remove(created, ignored);
  }
};

// Baseline: map the same file and read every byte once.
void BM_plain_read_of_the_file(benchmark::State& state) {
  const auto& path = tensor_file();
  for (auto _ : state) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    const auto size = static_cast<std::size_t>(std::filesystem::file_size(path));
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::madvise(map, size, MADV_SEQUENTIAL);
    const auto* words = static_cast<const std::uint64_t*>(map);
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < size / 8; ++i) sum += words[i];
    benchmark::DoNotOptimize(sum);
    ::munmap(map, size);
    ::close(fd);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(count * 4));
}

void BM_fpscope_npy_histogram(benchmark::State& state) {
  const auto& path = tensor_file();
  for (auto _ : state) benchmark::DoNotOptimize(fpscope::npy_histogram(path));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(count * 4));
}

RemoveAtExit remove_at_exit;

}  // namespace

BENCHMARK(BM_plain_read_of_the_file)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fpscope_npy_histogram)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
