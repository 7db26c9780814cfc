// The CUDA backend's DeviceOps (cuda_device_ops.hpp): host C++ around the CUDA runtime, cuBLAS and
// the kernels' launchers (cuda_kernels.hpp).
#include "fpscope/gpu/cuda_device_ops.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fpscope/gpu/cuda_kernels.hpp"
#include "launch.hpp"
#include "fpscope/gpu/gpt_element.hpp"

namespace fpscope {

namespace {

class CudaDeviceOps final : public DeviceOps {
 public:
  CudaDeviceOps() {
    std::string why;
    if (cuda::device_count(&why) == 0) throw std::runtime_error("no CUDA device answers: " + why);
    cudaCheck(cudaStreamCreate(&stream_));
    cublasCheck(cublasCreate(&cublas_));
    cublasCheck(cublasSetStream(cublas_, stream_));
    // cuBLAS's workspace made here, once: without one it makes its own, which a captured step may
    // not do (and which grows with each graph captured).
    cudaCheck(cudaMalloc(&workspace_, workspace_bytes));
    cublasCheck(cublasSetWorkspace(cublas_, workspace_, workspace_bytes));
  }
  ~CudaDeviceOps() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    for (Staging& slot : staging_) {
      if (slot.data != nullptr) cudaFreeHost(slot.data);
      if (slot.event_made) cudaEventDestroy(slot.done);
    }
    if (pinned_ != nullptr) cudaFreeHost(pinned_);
    if (scratch_ != nullptr) cudaFree(scratch_);
    for (auto& [key, array] : pointer_arrays_) cudaFree(array);
    forget_graphs();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (workspace_ != nullptr) cudaFree(workspace_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  CudaDeviceOps(const CudaDeviceOps&) = delete;
  CudaDeviceOps& operator=(const CudaDeviceOps&) = delete;

  std::string_view name() const override { return "cuda"; }

  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, bytes == 0 ? 1 : bytes));
    return p;
  }
  void release(void* device) override {
    cudaStreamSynchronize(stream_);  // no kernel still reads it (errors here have nowhere to go)
    cudaFree(device);
  }
  // Through a ring of pinned staging buffers: `host` may change as soon as this returns, and the
  // host waits only for the copy that last used the slot (eight uploads back: two steps of the
  // GPT, four of the MLP), never for the
  // stream, so a step's inputs go up while the previous step still runs.
  void upload(void* device, const void* host, std::size_t bytes) override {
    Staging& slot = staging_[next_staging_++ % staging_.size()];
    if (slot.used) cudaCheck(cudaEventSynchronize(slot.done));
    if (slot.event_made == false) {
      cudaCheck(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
      slot.event_made = true;
    }
    if (bytes > slot.bytes) {
      if (slot.data != nullptr) cudaFreeHost(slot.data);
      slot.data = nullptr;
      slot.bytes = 0;
      cudaCheck(cudaMallocHost(&slot.data, bytes));
      slot.bytes = bytes;
    }
    std::memcpy(slot.data, host, bytes);
    cudaCheck(cudaMemcpyAsync(device, slot.data, bytes, cudaMemcpyHostToDevice, stream_));
    cudaCheck(cudaEventRecord(slot.done, stream_));
    slot.used = true;
  }
  // Through pinned memory (one DMA, then a host copy): a step's read-back waits on nothing else.
  void download(void* host, const void* device, std::size_t bytes) override {
    if (bytes > pinned_bytes_) {
      if (pinned_ != nullptr) cudaFreeHost(pinned_);
      pinned_ = nullptr;
      pinned_bytes_ = 0;
      cudaCheck(cudaMallocHost(&pinned_, bytes));
      pinned_bytes_ = bytes;
    }
    cudaCheck(cudaMemcpyAsync(pinned_, device, bytes, cudaMemcpyDeviceToHost, stream_));
    cudaCheck(cudaStreamSynchronize(stream_));
    std::memcpy(host, pinned_, bytes);
  }
  void zero(void* device, std::size_t bytes) override { cudaCheck(cudaMemsetAsync(device, 0, bytes, stream_)); }
  void copy(void* to, const void* from, std::size_t bytes) override {
    cudaCheck(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool bf16, RoundingMode mode, RecordSlots slots,
            RandomWords random) override {
    cuda::cast_and_record(in, out, n, bf16, mode, slots, stream_, random, packed);
  }
  void cast_unless_skipped(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, RandomWords random, const int* skip) override {
    cuda::cast_and_record(in, out, n, bf16, mode, {}, stream_, random, nullptr, skip);
  }
  void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) override {
    cuda::advance_counter(counter, words, words_unless_skipped, skip, stream_);
  }
  void record_histogram(const float* in, std::size_t n, RecordSlots slots) override {
    cuda::record_histogram(in, n, slots, stream_);
  }

  void product(const ProductCall& c) override {
    const float one = 1.0f, zero = 0.0f, alpha = c.alpha;
    const cudaDataType type = !c.sixteen ? CUDA_R_32F : c.bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const void* a = c.sixteen ? static_cast<const void*>(c.a.p16) : static_cast<const void*>(c.a.f32);
    const void* b = c.sixteen ? static_cast<const void*>(c.b.p16) : static_cast<const void*>(c.b.f32);
    if (a == nullptr || b == nullptr) throw std::logic_error("device product: an operand without the values it is to be read as");
    const cublasOperation_t ta = c.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const std::size_t element = c.sixteen ? sizeof(std::uint16_t) : sizeof(float);
    if (c.groups == 1) {
      cublasCheck(cublasGemmStridedBatchedEx(cublas_, ta, tb, c.m, c.n, c.k, &alpha, a, type, c.a.ld, static_cast<long long>(c.a.stride), b, type, c.b.ld,
                                              static_cast<long long>(c.b.stride), c.accumulate ? &one : &zero, c.c, CUDA_R_32F, c.ldc,
                                              static_cast<long long>(c.stride_c), c.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      return;
    }
    // Two levels of strides (a sequence's heads): one batched call over arrays of the operands'
    // addresses, uploaded the first time a call asks for them and kept: a step asks for the same
    // ones every time (its buffers stay where they are until the batch changes size).
    const std::size_t count = static_cast<std::size_t>(c.groups) * static_cast<std::size_t>(c.batch);
    std::vector<const void*> pointers(3 * count);
    for (std::size_t g = 0; g < static_cast<std::size_t>(c.groups); ++g)
      for (std::size_t e = 0; e < static_cast<std::size_t>(c.batch); ++e) {
        const std::size_t i = g * static_cast<std::size_t>(c.batch) + e;
        pointers[i] = static_cast<const char*>(a) + (g * c.a.group_stride + e * c.a.stride) * element;
        pointers[count + i] = static_cast<const char*>(b) + (g * c.b.group_stride + e * c.b.stride) * element;
        pointers[2 * count + i] = c.c + g * c.group_stride_c + e * c.stride_c;
      }
    auto found = pointer_arrays_.find(pointers);
    if (found == pointer_arrays_.end()) {
      // A captured step's products are those of its key's first step, which made their arrays.
      if (capturing_) throw std::logic_error("a captured step's grouped product has no operand addresses made for it");
      if (pointer_arrays_.size() >= 1024) {  // buffers of earlier batch sizes: forget their arrays (and any graph reading them)
        forget_graphs();
        for (auto& [key, array] : pointer_arrays_) release(array);
        pointer_arrays_.clear();
      }
      void** array = static_cast<void**>(allocate(pointers.size() * sizeof(void*)));
      upload(array, pointers.data(), pointers.size() * sizeof(void*));
      found = pointer_arrays_.emplace(std::move(pointers), array).first;
    }
    void** const pointer_array = found->second;
    cublasCheck(cublasGemmBatchedEx(cublas_, ta, tb, c.m, c.n, c.k, &alpha, pointer_array, type, c.a.ld, pointer_array + count, type, c.b.ld,
                                     c.accumulate ? &one : &zero, pointer_array + 2 * count, CUDA_R_32F, c.ldc,
                                     static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  void amax_bits(const float* in, std::size_t n, std::uint32_t* largest) override { cuda::amax_bits(in, n, largest, stream_); }
  void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                    RandomWords random, unsigned long long* counts) override {
    cuda::fp8_quantize(in, out, n, scale, e5m2, mode, saturating, random, counts, stream_);
  }
  void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                      RandomWords random, unsigned long long* counters, std::uint32_t* amax) override {
    cuda::block_quantize(in, out, layout, format, rule, ctx, random, counters, amax, stream_);
  }

  void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns,
             float* x) override {
    cuda::embed(tokens, token_table, position_table, vocab, context, width, columns, x, stream_);
  }
  void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                      float* token_gradient, float* position_gradient) override {
    cuda::embed_backward(token_columns, token_starts, dx, vocab, context, width, columns, token_gradient, position_gradient, stream_);
  }
  void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd) override {
    cuda::layer_norm(x, gain, bias, features, columns, y, xhat, rstd, stream_);
  }
  void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx,
                           bool add) override {
    cuda::layer_norm_backward(dy, gain, xhat, rstd, features, columns, dx, add, stream_);
  }
  void add_token_sums(const float* a, const float* b, int features, int columns, float* into) override {
    cuda::add_token_sums(a, b, features, columns, into, scratch(static_cast<std::size_t>(features) * token_runs(static_cast<std::size_t>(columns))), stream_);
  }
  void add_row_bias(float* y, const float* bias, int features, int columns) override { cuda::add_row_bias(y, bias, features, columns, stream_); }
  void add_into(float* x, const float* y, std::size_t n) override { cuda::add_into(x, y, n, stream_); }
  void activation_forward(const float* z, float* out, std::size_t n, Activation activation) override {
    cuda::activation_forward(z, out, n, activation, stream_);
  }
  void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation) override {
    cuda::activation_backward(z, gradient, n, activation, stream_);
  }
  void pack_triangles(const float* full, int context, int triangles, float factor, float* packed) override {
    cuda::pack_triangles(full, context, triangles, factor, packed, stream_);
  }
  void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16) override {
    cuda::unpack_triangles(packed, context, triangles, factor, full, full16, bf16, stream_);
  }
  void causal_softmax(const float* scores, int context, int triangles, float* probabilities) override {
    cuda::causal_softmax(scores, context, triangles, probabilities, stream_);
  }
  void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores) override {
    cuda::softmax_backward(probabilities, dprobabilities, context, triangles, dscores, stream_);
  }
  void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                             float* gradient, float* losses) override {
    cuda::cross_entropy_columns(logits, targets, classes, columns, scaler, loss_weight, gradient, losses, stream_);
  }
  void loss_sum(const float* losses, int n, double* sum) override { cuda::loss_sum(losses, n, sum, stream_); }

  void add_column_bias(float* z, const float* bias, int rows, int cols) override { cuda::add_bias(z, bias, rows, cols, stream_); }
  void column_sums(const float* m, int rows, int cols, float* out) override { cuda::column_sums(m, rows, cols, out, stream_); }
  void cross_entropy_rows(const float* logits, const int* labels, int rows, int cols, const LossScalerState* scaler, float loss_weight,
                          float* gradient, float* row_loss) override {
    cuda::softmax_cross_entropy(logits, labels, rows, cols, scaler, loss_weight, gradient, row_loss, stream_);
  }
  void ordered_sum(const float* values, int n, float* out) override { cuda::ordered_sum(values, n, out, stream_); }
  void forward_epilogue(const ForwardEpilogue& e) override { cuda::forward_epilogue(e, stream_); }

  void find_non_finite(const float* values, std::size_t n, int* found) override { cuda::find_non_finite(values, n, found, stream_); }
  void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found, int* skip, float* step_scale) override {
    cuda::update_scaler(config, state, found, skip, step_scale, stream_);
  }
  void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) override {
    cuda::sgd_update(w, g, n, learning_rate, step_scale, skip, stream_);
  }
  void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials) override {
    cuda::sum_of_squares(g, n, step_scale, partials, stream_);
  }
  void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale,
                              const int* skip, long long* updates, OptimizerStep* step) override {
    cuda::prepare_optimizer_step(settings, partials, partial_count, step_scale, skip, updates, step, stream_);
  }
  void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step,
                        const int* skip) override {
    cuda::optimizer_update(w, first, second, g, n, step, skip, stream_);
  }

  // The stream's own capture (thread-local: this thread may do nothing else that would wait).
  bool begin_capture() override {
    cudaCheck(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    return true;
  }
  void end_capture(std::uint64_t key) override {
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    cudaCheck(cudaStreamEndCapture(stream_, &graph));
    drop_graph(key);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    cudaCheck(made);
    graphs_[key] = exec;
    cudaCheck(cudaGraphLaunch(exec, stream_));
  }
  void abandon_capture() override {
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // the capture's error, reported by the call that failed
  }
  void replay(std::uint64_t key) override {
    const auto found = graphs_.find(key);
    if (found == graphs_.end()) throw std::logic_error("a step replayed a graph that was never made");
    cudaCheck(cudaGraphLaunch(found->second, stream_));
  }
  void forget_graphs() override {
    if (graphs_.empty()) return;
    cudaStreamSynchronize(stream_);  // none still runs
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    graphs_.clear();
  }

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  // cuBLAS's workspace: 32 MiB, what the cuBLAS documentation recommends on Hopper.
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;
  void* workspace_ = nullptr;
  std::map<std::uint64_t, cudaGraphExec_t> graphs_;  // the steps' graphs, by StepGraphOps's key
  bool capturing_ = false;
  void drop_graph(std::uint64_t key) {
    const auto found = graphs_.find(key);
    if (found == graphs_.end()) return;
    cudaStreamSynchronize(stream_);
    cudaGraphExecDestroy(found->second);
    graphs_.erase(found);
  }
  // Device scratch of at least n floats (the token sums' runs), grown as needed.
  float* scratch(std::size_t n) {
    if (n > scratch_floats_) {
      if (scratch_ != nullptr) release(scratch_);
      scratch_ = nullptr;
      scratch_floats_ = 0;
      scratch_ = static_cast<float*>(allocate(n * sizeof(float)));
      scratch_floats_ = n;
    }
    return scratch_;
  }
  float* scratch_ = nullptr;
  std::size_t scratch_floats_ = 0;
  std::map<std::vector<const void*>, void**> pointer_arrays_;  // the grouped products' operands (device memory)
  void* pinned_ = nullptr;  // the read-backs' staging
  std::size_t pinned_bytes_ = 0;
  struct Staging {
    void* data = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t done{};
    bool event_made = false, used = false;
  };
  std::array<Staging, 8> staging_{};  // the uploads'
  std::size_t next_staging_ = 0;
};

}  // namespace

std::unique_ptr<DeviceOps> make_cuda_device_ops() { return std::make_unique<CudaDeviceOps>(); }

}  // namespace fpscope
