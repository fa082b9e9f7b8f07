// GPT-2 CUDA layer kernels except attention and GEMMs: embeddings, (residual +) layer norm and
// RMSNorm (the Llama family's, llama_body.h), GELU, fused softmax + cross-entropy, column sums.
// Each kernel is a wrapper over its body in layers_body.h or llama_body.h (with the launch
// configurations), which the CPU emulation tests run.
#include <type_traits>
#include <vector>

#include "layers_body.h"
#include "layers_cuda.h"
#include "llama_body.h"
#include "storage_elements.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;
using kernels::launch_kernel;

__global__ void encoder_forward_kernel(float* out, const int* tokens, const float* wte,
                                       const float* wpe, std::int64_t B, std::int64_t T,
                                       std::int64_t C, DropoutSite dropout) {
  encoder_forward_body(DeviceThread{}, out, tokens, wte, wpe, B, T, C, dropout);
}

__global__ void encoder_wte_backward_kernel(float* dwte, const float* dout, const int* bucket_token,
                                            const int* bucket_begin, const int* rows,
                                            std::int64_t buckets, std::int64_t T, std::int64_t C,
                                            DropoutSite dropout) {
  encoder_wte_backward_body(DeviceThread{}, dwte, dout, bucket_token, bucket_begin, rows, buckets,
                            T, C, dropout);
}

__global__ void encoder_wpe_backward_kernel(float* dwpe, const float* dout, std::int64_t B,
                                            std::int64_t T, std::int64_t C, DropoutSite dropout) {
  encoder_wpe_backward_body(DeviceThread{}, dwpe, dout, B, T, C, dropout);
}

template <typename Out>
__global__ void layernorm_forward_kernel(Out* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, std::int64_t N,
                                         std::int64_t C, float epsilon) {
  layernorm_forward_body(DeviceThread{}, out, mean, rstd, inp, weight, bias, N, C, epsilon);
}

template <typename Out>
__global__ void residual_layernorm_forward_kernel(float* residual_out, Out* out, float* mean,
                                                  float* rstd, const float* residual,
                                                  const float* inp, const float* weight,
                                                  const float* bias, std::int64_t N, std::int64_t T,
                                                  std::int64_t C, float epsilon,
                                                  DropoutSite dropout) {
  residual_layernorm_forward_body(DeviceThread{}, residual_out, out, mean, rstd, residual, inp,
                                  weight, bias, N, T, C, epsilon, dropout);
}

template <typename Out>
__global__ void rmsnorm_forward_kernel(Out* out, float* rstd, const float* inp, const float* weight,
                                       std::int64_t N, std::int64_t C, float epsilon) {
  rmsnorm_forward_body(DeviceThread{}, out, rstd, inp, weight, N, C, epsilon);
}

template <typename Out>
__global__ void residual_rmsnorm_forward_kernel(float* residual_out, Out* out, float* rstd,
                                                const float* residual, const float* inp,
                                                const float* weight, std::int64_t N, std::int64_t T,
                                                std::int64_t C, float epsilon,
                                                DropoutSite dropout) {
  residual_rmsnorm_forward_body(DeviceThread{}, residual_out, out, rstd, residual, inp, weight, N,
                                T, C, epsilon, dropout);
}

__global__ void rmsnorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                              const float* weight, const float* rstd,
                                              std::int64_t N, std::int64_t C) {
  rmsnorm_backward_input_body(DeviceThread{}, dinp, dout, inp, weight, rstd, N, C);
}

__device__ __forceinline__ float* dynamic_shared() {
  extern __shared__ float layer_shared_floats[];
  return layer_shared_floats;
}

__global__ void layernorm_backward_kernel(float* dinp, float* partial, const float* dout,
                                          const float* inp, const float* weight, const float* mean,
                                          const float* rstd, std::int64_t N, std::int64_t C) {
  layernorm_backward_body(DeviceThread{}, dynamic_shared(), dinp, partial, dout, inp, weight, mean,
                          rstd, N, C);
}

__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, std::int64_t N, std::int64_t C) {
  layernorm_backward_input_body(DeviceThread{}, dinp, dout, inp, weight, mean, rstd, N, C);
}

template <typename Terms>
__global__ void column_partials_kernel(float* partial, Terms terms, std::int64_t N,
                                       std::int64_t C) {
  __shared__ ColumnPartialsShared<Terms::kOutputs> shared;
  column_partials_body(DeviceThread{}, shared, partial, terms, N, C);
}

__global__ void add_partials_kernel(float* target0, float* target1, const float* partial,
                                    std::int64_t chunks, int outputs, std::int64_t C) {
  add_partials_body(DeviceThread{}, target0, target1, partial, chunks, outputs, C);
}

__global__ void residual_dropout_kernel(float* out, const float* residual, const float* inp,
                                        std::int64_t n, std::int64_t T, std::int64_t C,
                                        DropoutSite dropout) {
  residual_dropout_body(DeviceThread{}, out, residual, inp, n, T, C, dropout);
}

template <typename Out>
__global__ void gelu_forward_kernel(Out* out, const float* inp, std::int64_t n) {
  gelu_forward_body(DeviceThread{}, out, inp, n);
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout,
                                     std::int64_t n) {
  gelu_backward_body(DeviceThread{}, dinp, inp, dout, n);
}

template <typename In>
__global__ void crossentropy_forward_kernel(float* losses, float* logsumexp, const In* logits,
                                            const int* targets, std::int64_t V, std::int64_t Vp,
                                            float label_smoothing) {
  __shared__ CrossentropyShared shared;
  crossentropy_forward_body(DeviceThread{}, shared, losses, logsumexp, logits, targets, V, Vp,
                            label_smoothing);
}

template <typename Out, typename In>
__global__ void crossentropy_backward_kernel(Out* dlogits, const In* logits, const float* logsumexp,
                                             const int* targets, std::int64_t V, std::int64_t Vp,
                                             float scale, float label_smoothing) {
  crossentropy_backward_body(DeviceThread{}, dlogits, logits, logsumexp, targets, V, Vp, scale,
                             label_smoothing);
}

void check_label_smoothing(const char* what, float label_smoothing) {
  ZERO_CHECK(label_smoothing >= 0.0f && label_smoothing < 1.0f, what,
             ": label smoothing must be in [0, 1), got ", label_smoothing);
}

// `bytes` of device scratch for work enqueued on `stream`: from scratch.allocate (the caller frees
// it), else cudaMallocAsync (free_scratch frees it on the stream).
void* take_scratch(const Scratch& scratch, std::size_t bytes, cudaStream_t stream) {
  if (scratch.allocate) return scratch.allocate(bytes);
  void* data = nullptr;
  ZERO_CUDA_CHECK(cudaMallocAsync(&data, bytes, stream));
  return data;
}
void free_scratch(const Scratch& scratch, void* data, cudaStream_t stream) {
  if (!scratch.allocate) ZERO_CUDA_CHECK(cudaFreeAsync(data, stream));
}

template <typename Terms>
void column_sums(float* target0, float* target1, const Terms& terms, std::int64_t N, std::int64_t C,
                 cudaStream_t stream, const Scratch& scratch) {
  if (N == 0 || C == 0) return;
  const std::int64_t chunks = row_chunks(N);
  const std::size_t bytes =
      static_cast<std::size_t>(column_partials_elements(N, C, Terms::kOutputs)) * sizeof(float);
  float* partial = static_cast<float*>(take_scratch(scratch, bytes, stream));
  launch_kernel(column_partials_kernel<Terms>, column_partials_launch(N, C), stream, partial, terms,
                N, C);
  launch_kernel(add_partials_kernel, elementwise_launch(C), stream, target0, target1,
                static_cast<const float*>(partial), chunks, Terms::kOutputs, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  free_scratch(scratch, partial, stream);
}

// target0[c] += Σ over chunks of rows[chunk][0][c], target1[c] += ... rows[chunk][1][c], in a
// fixed order: column sums over the (chunks, 2·C) table.
void reduce_chunk_rows(float* target0, float* target1, const float* rows, std::int64_t chunks,
                       std::int64_t C, cudaStream_t stream, const Scratch& scratch) {
  const std::int64_t columns = 2 * C;
  const std::size_t bytes =
      static_cast<std::size_t>(column_partials_elements(chunks, columns, 1)) * sizeof(float);
  float* partial = static_cast<float*>(take_scratch(scratch, bytes, stream));
  launch_kernel(column_partials_kernel<BiasTerms>, column_partials_launch(chunks, columns), stream,
                partial, BiasTerms{rows}, chunks, columns);
  launch_kernel(add_partials_kernel, elementwise_launch(C), stream, target0, target1,
                static_cast<const float*>(partial), row_chunks(chunks), 2, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  free_scratch(scratch, partial, stream);
}

// The dynamic shared memory a block of the current device may opt in to.
std::size_t max_dynamic_shared_bytes() {
  int device = 0, bytes = 0;
  ZERO_CUDA_CHECK(cudaGetDevice(&device));
  ZERO_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(bytes);
}

}  // namespace

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                     cudaStream_t stream) {
  if (B * T * C == 0) return;
  launch_kernel(encoder_forward_kernel, elementwise_launch(B * T * C), stream, out, tokens, wte,
                wpe, B, T, C, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* host_tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                      cudaStream_t stream, const Scratch& scratch) {
  const std::int64_t N = B * T;
  if (N == 0 || C == 0) return;
  const TokenBuckets grouped = token_buckets(host_tokens, N);
  const std::int64_t buckets = grouped.buckets;
  const std::vector<int>& table = grouped.table;
  const std::size_t bytes = table.size() * sizeof(int);
  int* device_table = static_cast<int*>(take_scratch(scratch, bytes, stream));
  // From pageable memory: returns once `table` is staged, so it may go out of scope.
  ZERO_CUDA_CHECK(
      cudaMemcpyAsync(device_table, table.data(), bytes, cudaMemcpyHostToDevice, stream));
  const TokenTable parts = token_table(device_table, buckets);
  launch_kernel(encoder_wte_backward_kernel, elementwise_launch(buckets * C), stream, dwte, dout,
                parts.bucket_token, parts.bucket_begin, parts.rows, buckets, T, C, dropout);
  if (dwpe != nullptr)
    launch_kernel(encoder_wpe_backward_kernel, elementwise_launch(T * C), stream, dwpe, dout, B, T,
                  C, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
  free_scratch(scratch, device_table, stream);
}

void layernorm_forward(void* out, DType out_dtype, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, std::int64_t N, std::int64_t C,
                       float epsilon, cudaStream_t stream) {
  if (N == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(layernorm_forward_kernel<Out>, row_warp_launch(N), stream, static_cast<Out*>(out),
                  mean, rstd, inp, weight, bias, N, C, epsilon);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void residual_layernorm_forward(float* residual_out, void* out, DType out_dtype, float* mean,
                                float* rstd, const float* residual, const float* inp,
                                const float* weight, const float* bias, std::int64_t B,
                                std::int64_t T, std::int64_t C, float epsilon,
                                const DropoutSite& dropout, cudaStream_t stream) {
  const std::int64_t N = B * T;
  if (N == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(residual_layernorm_forward_kernel<Out>, row_warp_launch(N), stream, residual_out,
                  static_cast<Out*>(out), mean, rstd, residual, inp, weight, bias, N, T, C, epsilon,
                  dropout);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C, cudaStream_t stream,
                        const Scratch& scratch) {
  if (N == 0 || C == 0) return;
  const kernels::LaunchConfig config = layernorm_backward_launch(N, C);
  if (config.dynamic_shared_bytes > max_dynamic_shared_bytes()) {
    // Past the block's shared memory (C above about 7,000 on an H100): dinp in one pass, the
    // parameter gradients in a second.
    launch_kernel(layernorm_backward_input_kernel, row_warp_launch(N), stream, dinp, dout, inp,
                  weight, mean, rstd, N, C);
    ZERO_CUDA_CHECK(cudaGetLastError());
    column_sums(dweight, dbias, LayernormTerms{dout, inp, mean, rstd}, N, C, stream, scratch);
    return;
  }
  // The chunks' (dweight, dbias) rows, then their sums as one 2·C-column table: the layout of
  // column_sums' partials with two outputs.
  const std::int64_t chunks = norm_chunks(N);
  float* partial = static_cast<float*>(
      take_scratch(scratch, static_cast<std::size_t>(chunks * 2 * C) * sizeof(float), stream));
  ZERO_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(layernorm_backward_kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(config.dynamic_shared_bytes)));
  launch_kernel(layernorm_backward_kernel, config, stream, dinp, partial, dout,
                static_cast<const float*>(inp), weight, mean, rstd, N, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  reduce_chunk_rows(dweight, dbias, partial, chunks, C, stream, scratch);
  free_scratch(scratch, partial, stream);
}

void rmsnorm_forward(void* out, DType out_dtype, float* rstd, const float* inp, const float* weight,
                     std::int64_t N, std::int64_t C, float epsilon, cudaStream_t stream) {
  if (N == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(rmsnorm_forward_kernel<Out>, row_warp_launch(N), stream, static_cast<Out*>(out),
                  rstd, inp, weight, N, C, epsilon);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void residual_rmsnorm_forward(float* residual_out, void* out, DType out_dtype, float* rstd,
                              const float* residual, const float* inp, const float* weight,
                              std::int64_t B, std::int64_t T, std::int64_t C, float epsilon,
                              const DropoutSite& dropout, cudaStream_t stream) {
  const std::int64_t N = B * T;
  if (N == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(residual_rmsnorm_forward_kernel<Out>, row_warp_launch(N), stream, residual_out,
                  static_cast<Out*>(out), rstd, residual, inp, weight, N, T, C, epsilon, dropout);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C,
                      cudaStream_t stream, const Scratch& scratch) {
  if (N == 0 || C == 0) return;
  launch_kernel(rmsnorm_backward_input_kernel, row_warp_launch(N), stream, dinp, dout, inp, weight,
                rstd, N, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  column_sums(dweight, nullptr, RmsnormTerms{dout, inp, rstd}, N, C, stream, scratch);
}

void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t OC,
                   cudaStream_t stream, const Scratch& scratch) {
  column_sums(dbias, nullptr, BiasTerms{dout}, N, OC, stream, scratch);
}

namespace {

// column_sums of Terms<T>{inputs..., staged} into dbias, T the 16-bit storage type of `dtype`.
template <template <typename> class Terms, typename... Inputs>
void staged_column_sums(const char* what, float* dbias, void* staged, DType dtype, std::int64_t N,
                        std::int64_t OC, cudaStream_t stream, const Scratch& scratch,
                        Inputs... inputs) {
  ZERO_CHECK(dtype != DType::kFloat32, what, ": the staged copy must be 16-bit, not ",
             name_of(dtype));
  with_storage_type(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if constexpr (!std::is_same_v<T, float>)
      column_sums(dbias, nullptr, Terms<T>{inputs..., static_cast<T*>(staged)}, N, OC, stream,
                  scratch);
  });
}

}  // namespace

void bias_backward_staged(float* dbias, void* staged, DType dtype, const float* dout,
                          std::int64_t N, std::int64_t OC, cudaStream_t stream,
                          const Scratch& scratch) {
  staged_column_sums<StagedBiasTerms>("bias_backward_staged", dbias, staged, dtype, N, OC, stream,
                                      scratch, dout);
}

void gelu_bias_backward_staged(float* dbias, void* staged, DType dtype, const float* dout,
                               const float* preactivation, std::int64_t N, std::int64_t OC,
                               cudaStream_t stream, const Scratch& scratch) {
  staged_column_sums<StagedGeluBiasTerms>("gelu_bias_backward_staged", dbias, staged, dtype, N, OC,
                                          stream, scratch, dout, preactivation);
}

void residual_dropout_forward(float* out, const float* residual, const float* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                              cudaStream_t stream) {
  const std::int64_t n = B * T * C;
  if (n == 0) return;
  launch_kernel(residual_dropout_kernel, elementwise_launch(n), stream, out, residual, inp, n, T, C,
                dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void dropout_backward(float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                      std::int64_t C, const DropoutSite& dropout, cudaStream_t stream) {
  residual_dropout_forward(dinp, nullptr, dout, B, T, C, dropout, stream);
}

void gelu_forward(void* out, DType out_dtype, const float* inp, std::int64_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  with_storage_type(out_dtype, [&](auto* tag) {
    using Out = std::remove_pointer_t<decltype(tag)>;
    launch_kernel(gelu_forward_kernel<Out>, elementwise_launch(n), stream, static_cast<Out*>(out),
                  inp, n);
  });
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  launch_kernel(gelu_backward_kernel, elementwise_launch(n), stream, dinp, inp, dout, n);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_forward(float* losses, float* logsumexp, const void* logits, DType logits_dtype,
                          const int* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                          cudaStream_t stream, float label_smoothing) {
  ZERO_CHECK(V > 0 && V <= Vp, "crossentropy_forward: V = ", V, " must be in [1, Vp = ", Vp, "]");
  check_label_smoothing("crossentropy_forward", label_smoothing);
  ZERO_CHECK(logits_dtype != DType::kFloat16, "crossentropy_forward: fp16 logits (fp32 or bf16)");
  if (N == 0) return;
  ZERO_CHECK(N < (std::int64_t{1} << 31), "crossentropy_forward: ", N, " rows exceed the grid");
  if (logits_dtype == DType::kBFloat16)
    launch_kernel(crossentropy_forward_kernel<Bf16Element>, row_block_launch(N), stream, losses,
                  logsumexp, static_cast<const Bf16Element*>(logits), targets, V, Vp,
                  label_smoothing);
  else
    launch_kernel(crossentropy_forward_kernel<float>, row_block_launch(N), stream, losses,
                  logsumexp, static_cast<const float*>(logits), targets, V, Vp, label_smoothing);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_forward(float* losses, float* logsumexp, const float* logits, const int* targets,
                          std::int64_t N, std::int64_t V, std::int64_t Vp, cudaStream_t stream,
                          float label_smoothing) {
  crossentropy_forward(losses, logsumexp, logits, DType::kFloat32, targets, N, V, Vp, stream,
                       label_smoothing);
}

void crossentropy_backward(void* dlogits, DType dtype, const void* logits, DType logits_dtype,
                           const float* logsumexp, const int* targets, std::int64_t N,
                           std::int64_t V, std::int64_t Vp, float scale, cudaStream_t stream,
                           float label_smoothing) {
  ZERO_CHECK(V > 0 && V <= Vp, "crossentropy_backward: V = ", V, " must be in [1, Vp = ", Vp, "]");
  check_label_smoothing("crossentropy_backward", label_smoothing);
  ZERO_CHECK(logits_dtype == DType::kFloat32 ||
                 (logits_dtype == DType::kBFloat16 && dtype == DType::kBFloat16),
             "crossentropy_backward: ", name_of(logits_dtype), " logits into a ", name_of(dtype),
             " gradient (fp32 logits into any dtype, or bf16 into bf16)");
  if (N == 0) return;
  ZERO_CHECK(N < (std::int64_t{1} << 31), "crossentropy_backward: ", N, " rows exceed the grid");
  const LaunchConfig config = row_block_launch(N);
  const auto* z = static_cast<const float*>(logits);
  if (logits_dtype == DType::kBFloat16) {
    launch_kernel(crossentropy_backward_kernel<Bf16Element, Bf16Element>, config, stream,
                  static_cast<Bf16Element*>(dlogits), static_cast<const Bf16Element*>(logits),
                  logsumexp, targets, V, Vp, scale, label_smoothing);
    ZERO_CUDA_CHECK(cudaGetLastError());
    return;
  }
  switch (dtype) {
    case DType::kFloat32:
      launch_kernel(crossentropy_backward_kernel<float, float>, config, stream,
                    static_cast<float*>(dlogits), z, logsumexp, targets, V, Vp, scale,
                    label_smoothing);
      break;
    case DType::kBFloat16:
      launch_kernel(crossentropy_backward_kernel<Bf16Element, float>, config, stream,
                    static_cast<Bf16Element*>(dlogits), z, logsumexp, targets, V, Vp, scale,
                    label_smoothing);
      break;
    case DType::kFloat16:
      launch_kernel(crossentropy_backward_kernel<Fp16Element, float>, config, stream,
                    static_cast<Fp16Element*>(dlogits), z, logsumexp, targets, V, Vp, scale,
                    label_smoothing);
      break;
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_backward(float* logits, const float* logsumexp, const int* targets,
                           std::int64_t N, std::int64_t V, std::int64_t Vp, float scale,
                           cudaStream_t stream, float label_smoothing) {
  crossentropy_backward(logits, DType::kFloat32, logits, DType::kFloat32, logsumexp, targets, N, V,
                        Vp, scale, stream, label_smoothing);
}

}  // namespace zero::gpt2::cuda
