// The CUDA MLP step: the CPU backend's recipe (mlp.cpp) with cuBLAS GEMMs and the kernels of kernels.cu.
// Every matrix is column-major with the CPU backend's shapes (activations batch x features, weights
// out x in), as Eigen holds them: the state copies over as it is, and element i is the same element
// on both backends, so stochastic rounding draws the same word for it.
#include "fpscope/gpu/cuda_mlp.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "fpscope/gpu/cuda_device_ops.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/recording.hpp"

#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)
#define cublasCheck(status) cublas_check((status), __FILE__, __LINE__)

namespace fpscope {

namespace {

void cuda_check(cudaError_t error, const char* file, int line) {
  if (error != cudaSuccess) throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " + cudaGetErrorString(error));
}

void cublas_check(cublasStatus_t status, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error at ") + file + ":" + std::to_string(line) + ": status " + std::to_string(static_cast<int>(status)));
}

// A device array that frees itself.
template <typename T>
struct DeviceArray {
  T* data = nullptr;
  std::size_t size = 0;
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : size(n) { cudaCheck(cudaMalloc(reinterpret_cast<void**>(&data), std::max<std::size_t>(n, 1) * sizeof(T))); }
  DeviceArray(DeviceArray&& other) noexcept : data(other.data), size(other.size) { other.data = nullptr; }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data, other.data);
    std::swap(size, other.size);
    return *this;
  }
  ~DeviceArray() {
    if (data != nullptr) cudaFree(data);
  }
};

constexpr std::size_t record_stride = bin_slot_count + 3;  // histogram slots, then 3 outcome counts

}  // namespace

bool cuda_device_available() { return cuda::device_count() > 0; }

struct CudaMlpTrainer::Device {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  int batch = 0;  // buffers are sized for this batch
  std::vector<DeviceArray<float>> weights, biases, biases_low, grad_w, grad_b;
  std::vector<DeviceArray<std::uint16_t>> weights_16;  // the cast weights as cuBLAS reads them
  std::vector<DeviceArray<float>> a, z;  // per layer: input activations, pre-activations
  std::vector<DeviceArray<std::uint16_t>> a_16, dz_16;
  DeviceArray<float> dz, da, row_loss;
  DeviceArray<int> labels, found_non_finite;
  // What the host reads back, in one copy: two words of scalars (the batch's loss sum and the
  // step's scale as floats, then the skip flag), then, for a recorded step, every tensor's
  // histogram slots and counts. Its host side is pinned, so the copy is one DMA.
  DeviceArray<unsigned long long> readback;
  unsigned long long* host_readback = nullptr;
  float* loss() const { return reinterpret_cast<float*>(readback.data); }
  float* step_scale() const { return reinterpret_cast<float*>(readback.data) + 1; }
  int* skip() const { return reinterpret_cast<int*>(readback.data + 1); }
  unsigned long long* records() const { return readback.data + scalar_words; }
  static constexpr std::size_t scalar_words = 2;
  DeviceArray<LossScalerState> scaler;
  // The optimizer (momentum, AdamW, clipping; plain SGD keeps sgd_update): its buffers per
  // parameter in the CPU's order (layer l: weight 2l, bias 2l + 1; empty where the kind keeps
  // none), the partials of the gradients' sum of squares (clipping), the update count, the step's
  // settings, all on the device.
  std::vector<DeviceArray<float>> first, second;
  DeviceArray<double> partials;
  DeviceArray<long long> updates;
  DeviceArray<OptimizerStep> optimizer_step;
  ~Device() {
    if (host_readback != nullptr) cudaFreeHost(host_readback);
    if (cublas != nullptr) cublasDestroy(cublas);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

Format CudaMlpTrainer::format() const { return precision_format(config_.precision); }

CudaMlpTrainer::CudaMlpTrainer(const MlpConfig& config) : config_(config), device_(std::make_unique<Device>()) {
  if (config.record_blocks) throw std::invalid_argument("block statistics are recorded by the CPU backend only");
  if (config.recipe.recipe != GemmRecipe::none) throw std::invalid_argument("FP8 and block-scaled recipes run on the CPU backend only");
  if (!cuda_device_available()) throw std::runtime_error("no CUDA device answers");
  Device& d = *device_;
  cudaCheck(cudaStreamCreate(&d.stream));
  cublasCheck(cublasCreate(&d.cublas));
  cublasCheck(cublasSetStream(d.cublas, d.stream));
  // The same initial weights as the CPU backend: built there, copied here.
  const MlpTrainer reference(config);
  MlpTrainer::State initial = reference.state();
  const std::size_t layers = config.layer_sizes.size() - 1;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t w = static_cast<std::size_t>(initial.weights[l].size()), b = static_cast<std::size_t>(initial.biases[l].size());
    d.weights.emplace_back(w);
    d.biases.emplace_back(b);
    d.biases_low.emplace_back(b);
    d.grad_w.emplace_back(w);
    d.grad_b.emplace_back(b);
    d.weights_16.emplace_back(w);
  }
  const bool first_buffers = config.optimizer.kind != OptimizerKind::sgd, second_buffers = config.optimizer.kind == OptimizerKind::adamw;
  for (std::size_t l = 0; l < layers; ++l)
    for (const std::size_t n : {d.weights[l].size, d.biases[l].size}) {
      d.first.emplace_back(first_buffers ? n : 0);
      d.second.emplace_back(second_buffers ? n : 0);
    }
  d.partials = DeviceArray<double>(2 * layers * cuda::sum_of_squares_partials);
  d.updates = DeviceArray<long long>(1);
  d.optimizer_step = DeviceArray<OptimizerStep>(1);
  d.found_non_finite = DeviceArray<int>(1);
  d.scaler = DeviceArray<LossScalerState>(1);
  d.readback = DeviceArray<unsigned long long>(Device::scalar_words + 4 * layers * record_stride);
  cudaCheck(cudaMallocHost(reinterpret_cast<void**>(&d.host_readback), sizeof(unsigned long long) * d.readback.size));
  restore(initial);
}

CudaMlpTrainer::~CudaMlpTrainer() = default;

MlpTrainer::State CudaMlpTrainer::state() const {
  const Device& d = *device_;
  cudaCheck(cudaStreamSynchronize(d.stream));
  MlpTrainer::State s;
  s.steps = steps_;
  for (std::size_t l = 0; l + 1 < config_.layer_sizes.size(); ++l) {
    Eigen::MatrixXf w(config_.layer_sizes[l + 1], config_.layer_sizes[l]);
    Eigen::VectorXf b(config_.layer_sizes[l + 1]);
    cudaCheck(cudaMemcpy(w.data(), d.weights[l].data, sizeof(float) * static_cast<std::size_t>(w.size()), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(b.data(), d.biases[l].data, sizeof(float) * static_cast<std::size_t>(b.size()), cudaMemcpyDeviceToHost));
    s.weights.push_back(std::move(w));
    s.biases.push_back(std::move(b));
  }
  s.scaler = scaler_state();
  s.stochastic_counter = stochastic_counter_;
  // The optimizer's buffers as the CPU keeps them: none until the first update.
  long long updates = 0;
  cudaCheck(cudaMemcpy(&updates, d.updates.data, sizeof updates, cudaMemcpyDeviceToHost));
  s.optimizer.updates = updates;
  if (updates > 0) {
    const auto copy_back = [&](const std::vector<DeviceArray<float>>& buffers, std::vector<std::vector<float>>& into) {
      if (buffers.empty() || buffers.front().size == 0) return;
      for (const DeviceArray<float>& buffer : buffers) {
        into.emplace_back(buffer.size);
        cudaCheck(cudaMemcpy(into.back().data(), buffer.data, sizeof(float) * buffer.size, cudaMemcpyDeviceToHost));
      }
    };
    copy_back(d.first, s.optimizer.first);
    copy_back(d.second, s.optimizer.second);
  }
  return s;
}

void CudaMlpTrainer::restore(const MlpTrainer::State& state) {
  Device& d = *device_;
  const std::size_t layers = config_.layer_sizes.size() - 1;
  bool fits = state.weights.size() == layers && state.biases.size() == layers;
  for (std::size_t l = 0; fits && l < layers; ++l)
    fits = state.weights[l].rows() == config_.layer_sizes[l + 1] && state.weights[l].cols() == config_.layer_sizes[l] &&
           state.biases[l].size() == config_.layer_sizes[l + 1];
  if (!fits) throw std::invalid_argument("the saved training state is not of this model's shape");
  std::vector<std::size_t> sizes;  // the optimizer's order: weight 2l, bias 2l + 1
  for (std::size_t l = 0; l < layers; ++l) {
    sizes.push_back(d.weights[l].size);
    sizes.push_back(d.biases[l].size);
  }
  if (!optimizer_state_fits(state.optimizer, sizes)) throw std::invalid_argument("the saved optimizer state is not of this model's shape");
  // Buffers the state holds are copied in; those it does not hold yet (no update so far) start at zero.
  const auto copy_in = [&](std::vector<DeviceArray<float>>& buffers, const std::vector<std::vector<float>>& from) {
    for (std::size_t p = 0; p < buffers.size(); ++p) {
      if (buffers[p].size == 0) continue;
      if (p < from.size() && !from[p].empty())
        cudaCheck(cudaMemcpy(buffers[p].data, from[p].data(), sizeof(float) * buffers[p].size, cudaMemcpyHostToDevice));
      else
        cudaCheck(cudaMemset(buffers[p].data, 0, sizeof(float) * buffers[p].size));
    }
  };
  copy_in(d.first, state.optimizer.first);
  copy_in(d.second, state.optimizer.second);
  const long long updates = state.optimizer.updates;
  cudaCheck(cudaMemcpy(d.updates.data, &updates, sizeof updates, cudaMemcpyHostToDevice));
  for (std::size_t l = 0; l < layers; ++l) {
    cudaCheck(cudaMemcpy(d.weights[l].data, state.weights[l].data(), sizeof(float) * static_cast<std::size_t>(state.weights[l].size()),
                         cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d.biases[l].data, state.biases[l].data(), sizeof(float) * static_cast<std::size_t>(state.biases[l].size()), cudaMemcpyHostToDevice));
  }
  cudaCheck(cudaMemcpy(d.scaler.data, &state.scaler, sizeof(LossScalerState), cudaMemcpyHostToDevice));
  steps_ = state.steps;
  stochastic_counter_ = state.stochastic_counter;
}

void CudaMlpTrainer::reconfigure_scaler(const LossScalerConfig& config) {
  // As LossScaler::reconfigure: the new rule from its initial scale, the skipped count kept.
  LossScaler scaler(config_.scaler);
  scaler.restore(scaler_state());
  scaler.reconfigure(config);
  config_.scaler = config;
  cudaCheck(cudaMemcpyAsync(device_->scaler.data, &scaler.state(), sizeof(LossScalerState), cudaMemcpyHostToDevice, device_->stream));
  cudaCheck(cudaStreamSynchronize(device_->stream));  // the source lives on this stack frame
}

LossScalerState CudaMlpTrainer::scaler_state() const {
  LossScalerState s;
  cudaCheck(cudaStreamSynchronize(device_->stream));
  cudaCheck(cudaMemcpy(&s, device_->scaler.data, sizeof s, cudaMemcpyDeviceToHost));
  return s;
}

StepResult CudaMlpTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) {
  Device& d = *device_;
  const std::size_t layers = config_.layer_sizes.size() - 1;
  const int batch = static_cast<int>(inputs.rows());
  if (inputs.cols() != config_.layer_sizes.front() || static_cast<std::size_t>(batch) != labels.size())
    throw std::invalid_argument("step: the inputs do not fit the model");
  const bool low = config_.precision != Precision::fp32;
  const bool bf16 = config_.precision == Precision::bf16;
  const cudaDataType low_type = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  void* s = d.stream;

  if (d.batch != batch) {  // (re)size the activation buffers
    d.a.clear(), d.z.clear(), d.a_16.clear(), d.dz_16.clear();
    for (std::size_t l = 0; l < layers; ++l) {
      d.a.emplace_back(static_cast<std::size_t>(batch) * config_.layer_sizes[l]);
      d.a_16.emplace_back(static_cast<std::size_t>(batch) * config_.layer_sizes[l]);
      d.z.emplace_back(static_cast<std::size_t>(batch) * config_.layer_sizes[l + 1]);
      d.dz_16.emplace_back(static_cast<std::size_t>(batch) * config_.layer_sizes[l + 1]);
    }
    int widest = 0;
    for (int size : config_.layer_sizes) widest = std::max(widest, size);
    d.dz = DeviceArray<float>(static_cast<std::size_t>(batch) * widest);
    d.da = DeviceArray<float>(static_cast<std::size_t>(batch) * widest);
    d.row_loss = DeviceArray<float>(static_cast<std::size_t>(batch));
    d.labels = DeviceArray<int>(static_cast<std::size_t>(batch));
    d.batch = batch;
  }
  // The batch as Eigen holds it (column-major batch x features): no reordering on the host.
  cudaCheck(cudaMemcpyAsync(d.a[0].data, inputs.data(), sizeof(float) * static_cast<std::size_t>(inputs.size()), cudaMemcpyHostToDevice,
                            d.stream));
  cudaCheck(cudaMemcpyAsync(d.labels.data, labels.data(), sizeof(int) * labels.size(), cudaMemcpyHostToDevice, d.stream));
  if (record)
    cudaCheck(cudaMemsetAsync(d.records(), 0, sizeof(unsigned long long) * (d.readback.size - Device::scalar_words), d.stream));

  // Where tensor (layer, kind) records: kinds in the snapshot's order.
  auto buffers = [&](std::size_t l, int kind) {
    unsigned long long* base = d.records() + (4 * l + static_cast<std::size_t>(kind)) * record_stride;
    return cuda::CastRecordBuffers{base, base + bin_slot_count};
  };
  // The cast of n values from `in` to `out` (float32; null where nothing reads them) and `packed`
  // (16-bit; null where no GEMM reads them), recorded as tensor (l, kind) when `recorded`. The
  // fp32 policy casts nothing: it records the histogram of `in` where asked.
  auto cast = [&](const float* in, float* out, std::uint16_t* packed, std::size_t n, std::size_t l, int kind, bool recorded) {
    const cuda::CastRecordBuffers b = recorded ? buffers(l, kind) : cuda::CastRecordBuffers{};
    if (low) {
      // Element i draws random word stochastic_counter_ + i, as the CPU backend's round_f32 does.
      cuda::cast_and_record(in, out, n, bf16, config_.rounding, b, s, config_.seed, stochastic_counter_, packed);
      stochastic_counter_ += n;
    }
    else if (recorded) cuda::record_histogram(in, n, b.histogram, s);
  };
  const float one = 1.0f, zero = 0.0f;
  // C (m x n) = op(A) op(B), all column-major; inputs 16-bit (low precision) or float32, float32
  // out and compute.
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a16, const float* a32, int lda,
                  const void* b16, const float* b32, int ldb, float* c, int ldc) {
    cublasCheck(cublasGemmEx(d.cublas, ta, tb, m, n, k, &one, low ? a16 : a32, low ? low_type : CUDA_R_32F, lda, low ? b16 : b32,
                             low ? low_type : CUDA_R_32F, ldb, &zero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };

  // Low-precision copies of the weights (16-bit, for the GEMMs) and biases (float32, for the bias
  // add); the fp32 policy reads the master weights themselves.
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t nw = d.weights[l].size, nb = d.biases[l].size;
    cast(d.weights[l].data, nullptr, d.weights_16[l].data, nw, l, 2, record);
    cast(d.biases[l].data, d.biases_low[l].data, nullptr, nb, l, 2, false);
  }
  auto bias = [&](std::size_t l) { return low ? d.biases_low[l].data : d.biases[l].data; };
  // Forward: z (batch x out) = a (batch x in) W^T (W: out x in). In low precision the GEMMs read
  // the 16-bit operands the casts wrote; the float32 activations a are not written.
  cast(d.a[0].data, nullptr, d.a_16[0].data, d.a[0].size, 0, 0, false);
  for (std::size_t l = 0; l < layers; ++l) {
    const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
    gemm(CUBLAS_OP_N, CUBLAS_OP_T, batch, out, in, d.a_16[l].data, d.a[l].data, batch, d.weights_16[l].data, d.weights[l].data, out,
         d.z[l].data, batch);
    cuda::add_bias(d.z[l].data, bias(l), batch, out, s);
    cast(d.z[l].data, d.z[l].data, nullptr, d.z[l].size, l, 0, record);
    if (l + 1 < layers) {
      cuda::activation_forward(d.z[l].data, d.a[l + 1].data, d.z[l].size, config_.activation, s);
      cast(d.a[l + 1].data, nullptr, d.a_16[l + 1].data, d.a[l + 1].size, l + 1, 0, false);
    }
  }
  // Loss in float32; its gradient carries the loss scale (read on the device).
  const int classes = config_.layer_sizes.back();
  cuda::softmax_cross_entropy(d.z[layers - 1].data, d.labels.data, batch, classes, d.scaler.data, config_.loss_weight, d.dz.data,
                              d.row_loss.data, s);
  cuda::ordered_sum(d.row_loss.data, batch, d.loss(), s);
  // Backward.
  cudaCheck(cudaMemsetAsync(d.found_non_finite.data, 0, sizeof(int), d.stream));
  for (std::size_t l = layers; l-- > 0;) {
    const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
    const std::size_t n_dz = static_cast<std::size_t>(batch) * out;
    cast(d.dz.data, d.dz.data, d.dz_16[l].data, n_dz, l, 1, record);
    // grad_W (out x in) = dz^T (dz: batch x out) a (batch x in)
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, out, in, batch, d.dz_16[l].data, d.dz.data, batch, d.a_16[l].data, d.a[l].data, batch,
         d.grad_w[l].data, out);
    cuda::column_sums(d.dz.data, batch, out, d.grad_b[l].data, s);
    for (const FaultInjection& fault : faults_)
      if (fault.step == steps_ && static_cast<std::size_t>(fault.layer) == l + 1) {
        const float bad = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        cudaCheck(cudaMemcpyAsync(d.grad_w[l].data, &bad, sizeof bad, cudaMemcpyHostToDevice, d.stream));
        cudaCheck(cudaStreamSynchronize(d.stream));  // `bad` lives on this stack frame
      }
    cast(d.grad_w[l].data, d.grad_w[l].data, nullptr, d.grad_w[l].size, l, 3, record);
    cast(d.grad_b[l].data, d.grad_b[l].data, nullptr, d.grad_b[l].size, l, 3, false);
    if (l > 0) {
      // dA (batch x in) = dz (batch x out) W (out x in)
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, batch, in, out, d.dz_16[l].data, d.dz.data, batch, d.weights_16[l].data, d.weights[l].data, out,
           d.da.data, batch);
      const std::size_t n_da = static_cast<std::size_t>(batch) * in;
      cast(d.da.data, d.da.data, nullptr, n_da, l, 1, false);
      cuda::activation_backward(d.z[l - 1].data, d.da.data, n_da, config_.activation, s);
      std::swap(d.dz, d.da);
    }
  }
  // Check the gradients, advance the scaler, update unless skipped: all on the device. The
  // gradients keep their loss scale; the update divides it out (sgd_update.hpp, as the CPU does).
  for (std::size_t l = 0; l < layers; ++l) {
    cuda::find_non_finite(d.grad_w[l].data, d.grad_w[l].size, d.found_non_finite.data, s);
    cuda::find_non_finite(d.grad_b[l].data, d.grad_b[l].size, d.found_non_finite.data, s);
  }
  cuda::update_scaler(config_.scaler, d.scaler.data, d.found_non_finite.data, d.skip(), d.step_scale(), s);
  // fp16-pure re-casts the weights after an update only, as the CPU backend does: a skipped step
  // leaves them, and the stochastic-rounding counter, as they were. The host must know whether
  // this step was skipped before it launches the casts: one read-back a step, in this mode only.
  bool skipped_here = false;
  if (config_.precision == Precision::fp16_pure) {
    int skip = 0;
    cudaCheck(cudaMemcpyAsync(&skip, d.skip(), sizeof skip, cudaMemcpyDeviceToHost, d.stream));
    cudaCheck(cudaStreamSynchronize(d.stream));
    skipped_here = skip != 0;
  }
  // Plain SGD by sgd_update.hpp's rule; every other optimizer by optimizer_element.hpp's, its
  // step's settings (and the clipping norm) made on the device.
  const OptimizerConfig& optimizer = config_.optimizer;
  if (!optimizer.plain_sgd()) {
    const bool clip = optimizer.clip_grad_norm > 0;
    if (clip)
      for (std::size_t l = 0; l < layers; ++l) {
        cuda::sum_of_squares(d.grad_w[l].data, d.grad_w[l].size, d.step_scale(), d.partials.data + (2 * l) * cuda::sum_of_squares_partials, s);
        cuda::sum_of_squares(d.grad_b[l].data, d.grad_b[l].size, d.step_scale(), d.partials.data + (2 * l + 1) * cuda::sum_of_squares_partials, s);
      }
    const cuda::OptimizerSettings settings{optimizer.kind,  config_.learning_rate, optimizer.momentum,    optimizer.beta1,
                                           optimizer.beta2, optimizer.epsilon,     optimizer.weight_decay, optimizer.clip_grad_norm};
    cuda::prepare_optimizer_step(settings, d.partials.data, clip ? static_cast<int>(d.partials.size) : 0, d.step_scale(), d.skip(),
                                 d.updates.data, d.optimizer_step.data, s);
  }
  const auto buffer = [](DeviceArray<float>& b) { return b.size == 0 ? nullptr : b.data; };
  for (std::size_t l = 0; l < layers; ++l) {
    if (optimizer.plain_sgd()) {
      cuda::sgd_update(d.weights[l].data, d.grad_w[l].data, d.grad_w[l].size, config_.learning_rate, d.step_scale(), d.skip(), s);
      cuda::sgd_update(d.biases[l].data, d.grad_b[l].data, d.grad_b[l].size, config_.learning_rate, d.step_scale(), d.skip(), s);
    } else {
      cuda::optimizer_update(d.weights[l].data, buffer(d.first[2 * l]), buffer(d.second[2 * l]), d.grad_w[l].data, d.grad_w[l].size,
                             d.optimizer_step.data, d.skip(), s);
      cuda::optimizer_update(d.biases[l].data, buffer(d.first[2 * l + 1]), buffer(d.second[2 * l + 1]), d.grad_b[l].data, d.grad_b[l].size,
                             d.optimizer_step.data, d.skip(), s);
    }
    if (config_.precision == Precision::fp16_pure && !skipped_here) {
      cast(d.weights[l].data, d.weights[l].data, nullptr, d.weights[l].size, l, 2, false);
      cast(d.biases[l].data, d.biases[l].data, nullptr, d.biases[l].size, l, 2, false);
    }
  }

  StepResult result;
  result.loss = std::numeric_limits<double>::quiet_NaN();
  result.loss_scale = std::numeric_limits<double>::quiet_NaN();
  if (record || read_loss) {
    // One read-back into pinned memory: the scalars, and the records of a recorded step.
    const std::size_t words = record ? d.readback.size : Device::scalar_words;
    cudaCheck(cudaMemcpyAsync(d.host_readback, d.readback.data, sizeof(unsigned long long) * words, cudaMemcpyDeviceToHost, d.stream));
    cudaCheck(cudaStreamSynchronize(d.stream));
    float loss_sum = 0, step_scale = 0;
    int skip = 0;
    std::memcpy(&loss_sum, d.host_readback, sizeof loss_sum);
    std::memcpy(&step_scale, reinterpret_cast<const char*>(d.host_readback) + sizeof(float), sizeof step_scale);
    std::memcpy(&skip, d.host_readback + 1, sizeof skip);
    const unsigned long long* counters = d.host_readback + Device::scalar_words;
    result.loss = static_cast<double>(loss_sum) / batch;
    result.loss_scale = step_scale;
    result.skipped = skip != 0;
    if (record) {
      Snapshot snapshot;
      snapshot.step = steps_;
      snapshot.loss = result.loss;
      snapshot.loss_scale = result.loss_scale;
      snapshot.skipped = result.skipped;
      static constexpr TensorKind kinds[] = {TensorKind::activation, TensorKind::activation_gradient, TensorKind::weight,
                                             TensorKind::weight_gradient};
      for (std::size_t l = 0; l < layers; ++l)
        for (int k = 0; k < 4; ++k) {
          const unsigned long long* c = counters + (4 * l + static_cast<std::size_t>(k)) * record_stride;
          TensorRecord t;
          t.name = "fc" + std::to_string(l + 1);
          t.kind = kinds[k];
          for (int b = 0; b < binade_count; ++b) t.histogram.set_count(b + min_binade, c[b]);
          t.histogram.set_specials(c[bin_zero], c[bin_infinity], c[bin_nan]);
          if (low) t.cast = CastCounts{c[bin_slot_count], c[bin_slot_count + 1], c[bin_slot_count + 2]};
          set_recorded_scale(t, result.loss_scale);
          snapshot.tensors.push_back(std::move(t));
        }
      result.snapshot = std::move(snapshot);
    }
  }
  ++steps_;
  return result;
}

}  // namespace fpscope

// The module's entry points (see trainer_backend.hpp): the MLP's CUDA trainer, or the GPT's device
// step (device_gpt.hpp) on the CUDA DeviceOps.
extern "C" __attribute__((visibility("default"))) int fpscope_cuda_device_count(char* why, unsigned long why_size) {
  std::string reason;
  const int count = fpscope::cuda::device_count(&reason);
  if (why != nullptr && why_size > 0) std::snprintf(why, why_size, "%s", reason.c_str());
  return count;
}

extern "C" __attribute__((visibility("default"))) fpscope::TrainerBackend* fpscope_create_cuda_trainer(const fpscope::MlpConfig* config,
                                                                                                    char* error, unsigned long error_size) {
  try {
    if (config->gpt) return new fpscope::DeviceGptTrainer(*config->gpt, *config, fpscope::make_cuda_device_ops());
    return new fpscope::CudaMlpTrainer(*config);
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
