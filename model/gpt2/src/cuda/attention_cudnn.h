// Causal self-attention through cuDNN's fused scaled-dot-product attention (the graph API, built
// with NVIDIA's cudnn_frontend headers): FlashAttention-style kernels on the tensor cores, the T×T
// scores never in memory. bf16 inputs and outputs with fp32 softmax and accumulation, as PyTorch
// runs F.scaled_dot_product_attention under bf16 autocast. A library call (exempt from the
// emulated-body rule of src/cuda/): tests/model/gpt2_cuda_test.cc holds it to the CPU oracle at
// bf16 tolerance on a GPU.
//
// Layouts are the model's: qkv (B, T, 3C) = [q | k | v] and out (B, T, C), heads of HS = C / NH
// channels side by side, here in bf16; the tensors are strided views of those buffers (no
// transposes). stats (B, NH, T) fp32 is the log-sum-exp of each scaled score row that the backward
// reads (the tiled kernels' layout: attention_layout's NH floats per row). Grouped-query
// attention runs natively where a call names KVH < NH key/value heads: qkv (B, T, (NH + 2·KVH)·HS)
// = [q | k | v] with KVH heads in k and v, key/value head j serving query heads j·G .. j·G + G - 1
// (G = NH / KVH, transformers' repeat_kv order), and dqkv in that layout, cuDNN summing each
// group's dk and dv; KVH = NH is the plain layout. Graphs and their plans are built once per shape
// (B, T, NH, KVH, HS) and kept. Internal to zero::gpt2.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace zero::gpt2::cuda {

// Whether this build has the cuDNN attention (configure found the cudnn_frontend headers: cmake
// -DZERO_CUDNN_FRONTEND_INCLUDE, scripts/cudnn_frontend.sh). Without it every call below throws.
bool cudnn_attention_built();

// The ZERO_ATTENTION environment variable: "auto" (default: cuDNN when it takes the shape, else
// the tiled kernels), "cudnn" (cuDNN or an error naming why not) or "tiled" (never cuDNN).
enum class AttentionChoice { kAuto, kCudnn, kTiled };
AttentionChoice attention_choice_from_environment();
// The ZERO_CUDNN_NATIVE_GQA environment variable: "1" runs grouped-query attention on cuDNN with
// k and v as they are (KVH heads), unset or "0" (default, until a GPU run has compared the two)
// repeats them to NH heads first.
bool native_gqa_from_environment();

class CudnnAttention {
 public:
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN runs this shape on the current device, forward and backward (both graphs built
  // and their plans supported); when not, `why` says what cuDNN answered. Cached per shape. KVH
  // (0: NH) key/value heads, dividing NH.
  bool supports(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH, std::string* why,
                std::int64_t KVH = 0);
  // Device workspace bytes forward / backward take (their plans'), for a supported shape.
  std::size_t forward_workspace(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                std::int64_t KVH = 0);
  std::size_t backward_workspace(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                 std::int64_t KVH = 0);

  // out16 (B, T, C) bf16 and stats (B, NH, T) fp32 from qkv16 (B, T, C + 2·KVH·C/NH) bf16.
  void forward(void* out16, float* stats, const void* qkv16, std::int64_t B, std::int64_t T,
               std::int64_t C, std::int64_t NH, void* workspace, cudaStream_t stream,
               std::int64_t KVH = 0);
  // dqkv16 (B, T, C + 2·KVH·C/NH) bf16, overwritten, from the forward's qkv16, out16 and stats
  // and dout16.
  void backward(void* dqkv16, const void* qkv16, const void* out16, const void* dout16,
                const float* stats, std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                void* workspace, cudaStream_t stream, std::int64_t KVH = 0);

  // "cuDNN 9.19.0 (frontend 1.32.0)": the library the process loaded and the headers built with.
  static std::string version();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zero::gpt2::cuda
