// dlopen of the CUDA module: the programs that never train on the GPU never map cuBLAS.
#include "fpscope/gpu/backend_choice.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "fpscope/gpu/device_support.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/cuda_module.hpp"

namespace fpscope {

namespace {

struct CudaModule {
  fpscope_cuda_device_count_fn device_count = nullptr;
  fpscope_create_cuda_trainer_fn create = nullptr;
  std::string error;
};

// Loaded once: beside the executable (an installed fpscope), else where the build put it.
const CudaModule& module() {
  static const CudaModule loaded = [] {
    CudaModule m;
    std::vector<std::string> candidates;
    std::error_code ignored;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ignored);
    if (!exe.empty()) candidates.push_back((exe.parent_path() / "libfpscope_cuda.so").string());
#ifdef FPSCOPE_CUDA_MODULE
    candidates.push_back(FPSCOPE_CUDA_MODULE);
#endif
    void* handle = nullptr;
    for (const std::string& path : candidates) {
      if (!std::filesystem::exists(path, ignored)) continue;
      handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      m.error = std::string("cannot load the CUDA backend: ") + ::dlerror();
    }
    if (handle == nullptr) {
      if (m.error.empty()) m.error = "this fpscope was built without CUDA (no nvcc at build time)";
      return m;
    }
    m.device_count = reinterpret_cast<fpscope_cuda_device_count_fn>(::dlsym(handle, "fpscope_cuda_device_count"));
    m.create = reinterpret_cast<fpscope_create_cuda_trainer_fn>(::dlsym(handle, "fpscope_create_cuda_trainer"));
    if (m.device_count == nullptr || m.create == nullptr) m.error = "the CUDA backend module lacks its entry points";
    return m;
  }();
  return loaded;
}

}  // namespace

int cuda_device_count(std::string& why) {
  const CudaModule& m = module();
  if (!m.error.empty()) {
    why = m.error;
    return 0;
  }
  char reason[512] = {};
  const int count = m.device_count(reason, sizeof reason);
  if (count == 0) why = std::string("no CUDA device answers: ") + (reason[0] != '\0' ? reason : "the runtime gave no reason");
  return count;
}

std::string products_description(std::string_view backend) { return backend == "cuda" ? "cuBLAS" : cpu_products_description(); }

std::unique_ptr<TrainerBackend> make_trainer_backend(std::string_view backend, const TrainingConfig& config) {
  if (backend != "cpu" && backend != "cuda" && backend != "auto")
    throw std::invalid_argument("--backend " + std::string(backend) + ": not a backend (cpu, cuda or auto)");
  // The CUDA backend trains the MLP and the GPT (device_mlp.hpp, device_gpt.hpp) with every
  // optimizer, block statistics and recipe, held to the CPU's rules by the device tests
  // (tests/cuda/, all passing on an H100: docs/cuda-h100.md). What it lacks (device_support.hpp)
  // `auto` trains on the CPU and `cuda` refuses.
  const auto cpu_trainer = [&]() -> std::unique_ptr<TrainerBackend> {
    if (config.gpt) return std::make_unique<GptTrainer>(*config.gpt, config);
    return std::make_unique<MlpTrainer>(config);
  };
  if (backend == "auto" && !device_backend_lacks(config.recipe).empty()) return cpu_trainer();
  std::string why;
  const bool device_answers = backend != "cpu" && cuda_device_count(why) > 0;  // asked once
  if (backend == "cpu" || (backend == "auto" && !device_answers)) return cpu_trainer();
  if (!device_answers) throw std::invalid_argument("--backend cuda: " + why + ": use --backend cpu (or auto)");
  char error[512] = {};
  TrainerBackend* trainer = module().create(&config, error, sizeof error);
  if (trainer == nullptr) throw std::invalid_argument(std::string("--backend cuda: ") + error);
  return std::unique_ptr<TrainerBackend>(trainer);
}

}  // namespace fpscope
