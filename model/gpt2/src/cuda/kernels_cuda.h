// CudaKernels, the model's kernels on the CUDA backend (kernels.h): layers_cuda.h's kernels and
// cuBLASLt GEMMs, enqueued on the stream's cudaStream_t; dtype conversions, fills and copies
// through the device context's own operations on the same stream. With 16-bit parameters the GEMMs
// take their activations rounded to the parameters' dtype (GemmScratch) and accumulate in fp32. The
// GEMMs are defined in kernels_cuda.cc, the attention (cuDNN's or the tiled kernels) in
// kernels_cuda_attention.cc. Internal to zero::gpt2.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../kernels_internal.h"
#include "attention_cudnn.h"
#include "layers_cuda.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/error.h"

namespace zero::gpt2 {

inline cudaStream_t native(Stream& stream) {
  return static_cast<cudaStream_t>(cuda_stream_handle(stream));
}

class CudaKernels final : public Kernels {
 public:
  explicit CudaKernels(DeviceContext& context) : context_(context) {}
  ~CudaKernels() override {
    if (cudnn_workspace_)
      context_.release_after(*cudnn_workspace_stream_, std::move(cudnn_workspace_));
  }
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;
  std::string_view backend() const override { return "cuda"; }

  void encoder_forward(Stream& stream, float* out, const int* tokens, const float* wte,
                       const float* wpe, std::int64_t B, std::int64_t T, std::int64_t C,
                       const DropoutSite& dropout) override {
    cuda::encoder_forward(out, tokens, wte, wpe, B, T, C, dropout, native(stream));
  }
  void encoder_backward(Stream& stream, float* dwte, float* dwpe, const float* dout, const int*,
                        const int* host_tokens, std::int64_t B, std::int64_t T, std::int64_t C,
                        const DropoutSite& dropout) override {
    with_scratch(stream, [&](const cuda::Scratch& scratch) {
      cuda::encoder_backward(dwte, dwpe, dout, host_tokens, B, T, C, dropout, native(stream),
                             scratch);
    });
  }

  void layernorm_forward(Stream& stream, ActivationOut out, float* mean, float* rstd,
                         const float* inp, const float* weight, const float* bias, std::int64_t N,
                         std::int64_t C, float epsilon) override {
    cuda::layernorm_forward(out.data, out.dtype, mean, rstd, inp, weight, bias, N, C, epsilon,
                            native(stream));
  }
  void residual_layernorm_forward(Stream& stream, float* residual_out, ActivationOut out,
                                  float* mean, float* rstd, const float* residual, const float* inp,
                                  const float* weight, const float* bias, std::int64_t B,
                                  std::int64_t T, std::int64_t C, float epsilon,
                                  const DropoutSite& dropout) override {
    cuda::residual_layernorm_forward(residual_out, out.data, out.dtype, mean, rstd, residual, inp,
                                     weight, bias, B, T, C, epsilon, dropout, native(stream));
  }
  void residual_forward(Stream& stream, float* out, const float* residual, const float* inp,
                        std::int64_t B, std::int64_t T, std::int64_t C,
                        const DropoutSite& dropout) override {
    cuda::residual_dropout_forward(out, residual, inp, B, T, C, dropout, native(stream));
  }
  void layernorm_backward(Stream& stream, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight,
                          const float* mean, const float* rstd, std::int64_t N,
                          std::int64_t C) override {
    with_scratch(stream, [&](const cuda::Scratch& scratch) {
      cuda::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C,
                               native(stream), scratch);
    });
  }
  void dropout_backward(Stream& stream, float* dinp, const float* dout, std::int64_t B,
                        std::int64_t T, std::int64_t C, const DropoutSite& dropout) override {
    cuda::dropout_backward(dinp, dout, B, T, C, dropout, native(stream));
  }

  void rmsnorm_forward(Stream& stream, ActivationOut out, float* rstd, const float* inp,
                       const float* weight, std::int64_t N, std::int64_t C,
                       float epsilon) override {
    cuda::rmsnorm_forward(out.data, out.dtype, rstd, inp, weight, N, C, epsilon, native(stream));
  }
  void residual_rmsnorm_forward(Stream& stream, float* residual_out, ActivationOut out, float* rstd,
                                const float* residual, const float* inp, const float* weight,
                                std::int64_t B, std::int64_t T, std::int64_t C, float epsilon,
                                const DropoutSite& dropout) override {
    cuda::residual_rmsnorm_forward(residual_out, out.data, out.dtype, rstd, residual, inp, weight,
                                   B, T, C, epsilon, dropout, native(stream));
  }
  void rmsnorm_backward(Stream& stream, float* dinp, float* dweight, const float* dout,
                        const float* inp, const float* weight, const float* rstd, std::int64_t N,
                        std::int64_t C) override {
    with_scratch(stream, [&](const cuda::Scratch& scratch) {
      cuda::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C, native(stream), scratch);
    });
  }
  void rope_table(Stream& stream, float* table, const RopeParameters& parameters,
                  std::int64_t positions) override;
  void rope_forward(Stream& stream, ActivationOut x, const float* table,
                    std::int64_t table_positions, const RopeLayout& layout) override {
    check_rope(layout, table_positions, "CUDA rope_forward");
    cuda::rope(x.data, x.dtype, table, layout, /*backward=*/false, native(stream));
  }
  void rope_backward(Stream& stream, float* dx, const float* table, std::int64_t table_positions,
                     const RopeLayout& layout) override {
    check_rope(layout, table_positions, "CUDA rope_backward");
    cuda::rope(dx, DType::kFloat32, table, layout, /*backward=*/true, native(stream));
  }
  void swiglu_forward(Stream& stream, ActivationOut out, const float* inp, std::int64_t N,
                      std::int64_t H) override {
    cuda::swiglu_forward(out.data, out.dtype, inp, N, H, native(stream));
  }
  void repeat_kv_forward(Stream& stream, ActivationOut heads, Activation qkv, std::int64_t N,
                         std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    ZERO_CHECK(heads.dtype == qkv.dtype, "CUDA repeat_kv_forward: heads are ", name_of(heads.dtype),
               " but qkv ", name_of(qkv.dtype));
    check_heads("CUDA repeat_kv_forward", NH, KVH);
    cuda::repeat_kv_forward(heads.data, qkv.data, qkv.dtype, N, NH, KVH, HS, native(stream));
  }
  void repeat_kv_backward(Stream& stream, float* dqkv, const float* dheads, std::int64_t N,
                          std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    check_heads("CUDA repeat_kv_backward", NH, KVH);
    cuda::repeat_kv_backward(dqkv, dheads, N, NH, KVH, HS, native(stream));
  }
  void cached_attention_forward(Stream& stream, const CachedAttention& call) override {
    check_cached_attention(call, "CUDA cached_attention_forward", kCachedAttentionMaxHeadSize);
    cuda::cached_attention_forward(call, native(stream));
  }
  void swiglu_backward(Stream& stream, float* dinp, const float* dout, const float* inp,
                       std::int64_t N, std::int64_t H) override {
    cuda::swiglu_backward(dinp, dout, inp, N, H, native(stream));
  }

  void linear_forward(Stream& stream, const LinearForward& call,
                      const GemmScratch& scratch) override;
  void linear_backward(Stream& stream, const LinearBackward& call,
                       const GemmScratch& scratch) override;
  void logits_forward(Stream& stream, const LogitsForward& call,
                      const GemmScratch& scratch) override;
  void logits_backward(Stream& stream, const LogitsBackward& call,
                       const GemmScratch& scratch) override;
  void weight_gemm(Stream& stream, const WeightGemm& call, const GemmScratch& scratch) override;
  void grad_gemm(Stream& stream, const GradGemm& call, const GemmScratch& scratch) override;
  void gemm(Stream& stream, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N,
            std::int64_t K, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
            float beta, float* C, std::int64_t ldc) override {
    cuda::gemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, DType::kFloat32, beta, C, ldc,
               DType::kFloat32, {}, native(stream));
  }

  void attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                         std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                         const DropoutSite& dropout, DType precision,
                         const GemmScratch& scratch) override {
    if (use_cudnn(B, T, C, NH, dropout, precision))
      cudnn_attention_forward(stream, out, att, qkv, {B, T, C, NH}, scratch);
    else
      tiled_attention_forward(stream, out, att, qkv, {B, T, C, NH}, dropout);
  }
  void attention_backward(Stream& stream, float* dqkv, float* datt, const float* dout,
                          Activation out, Activation qkv, const float* att, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH,
                          const DropoutSite& dropout, DType precision,
                          const GemmScratch& scratch) override {
    if (use_cudnn(B, T, C, NH, dropout, precision))
      cudnn_attention_backward(stream, dqkv, dout, out, qkv, att, {B, T, C, NH}, scratch);
    else
      tiled_attention_backward(stream, dqkv, datt, dout, out, qkv, att, {B, T, C, NH}, dropout);
  }
  bool grouped_attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                                 std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                 std::int64_t KVH, const DropoutSite& dropout, DType precision,
                                 const GemmScratch& scratch) override {
    if (!use_native_gqa(B, T, C, NH, KVH, dropout, precision)) return false;
    cudnn_attention_forward(stream, out, att, qkv, {B, T, C, NH, KVH}, scratch);
    return true;
  }
  bool grouped_attention_backward(Stream& stream, float* dqkv, const float* dout, Activation out,
                                  Activation qkv, const float* att, std::int64_t B, std::int64_t T,
                                  std::int64_t C, std::int64_t NH, std::int64_t KVH,
                                  const DropoutSite& dropout, DType precision,
                                  const GemmScratch& scratch) override {
    if (!use_native_gqa(B, T, C, NH, KVH, dropout, precision)) return false;
    cudnn_attention_backward(stream, dqkv, dout, out, qkv, att, {B, T, C, NH, KVH}, scratch);
    return true;
  }

  void crossentropy_forward(Stream& stream, float* losses, float* logsumexp, const float* logits,
                            const int* targets, std::int64_t N, std::int64_t V,
                            std::int64_t Vp) override {
    cuda::crossentropy_forward(losses, logsumexp, logits, targets, N, V, Vp, native(stream));
  }
  void crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                             const int* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                             float scale) override {
    cuda::crossentropy_backward(logits, logsumexp, targets, N, V, Vp, scale, native(stream));
  }
  bool supports_label_smoothing() const override { return true; }
  void smoothed_crossentropy_forward(Stream& stream, float* losses, float* logsumexp,
                                     const float* logits, const int* targets, std::int64_t N,
                                     std::int64_t V, std::int64_t Vp,
                                     float label_smoothing) override {
    cuda::crossentropy_forward(losses, logsumexp, logits, targets, N, V, Vp, native(stream),
                               label_smoothing);
  }
  void smoothed_crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                                      const int* targets, std::int64_t N, std::int64_t V,
                                      std::int64_t Vp, float scale,
                                      float label_smoothing) override {
    cuda::crossentropy_backward(logits, logsumexp, targets, N, V, Vp, scale, native(stream),
                                label_smoothing);
  }

  void widen(Stream& stream, float* out, const void* in, DType dtype, std::int64_t n) override {
    context_.convert(stream, in, dtype, out, DType::kFloat32, static_cast<std::size_t>(n));
  }
  void accumulate(Stream& stream, void* out, DType dtype, const float* in,
                  std::int64_t n) override {
    context_.axpy(stream, in, DType::kFloat32, out, dtype, static_cast<std::size_t>(n), 1.0f);
  }
  // One launch each (rows.cu), the row indices uploaded by with_device_rows.
  void widen_rows(Stream& stream, float* out, const void* table, DType dtype, const int* host_rows,
                  std::int64_t count, std::int64_t C) override {
    with_device_rows(stream, "widen_rows", host_rows, count, [&](const int* rows) {
      cuda::widen_rows(out, table, dtype, rows, count, C, native(stream));
    });
  }
  void accumulate_rows(Stream& stream, void* table, DType dtype, const float* in,
                       const int* host_rows, std::int64_t count, std::int64_t C) override {
    with_device_rows(stream, "accumulate_rows", host_rows, count, [&](const int* rows) {
      cuda::accumulate_rows(table, dtype, in, rows, count, C, native(stream));
    });
  }
  void zero(Stream& stream, float* out, std::int64_t n) override {
    context_.fill(stream, out, DType::kFloat32, static_cast<std::size_t>(n), 0.0f);
  }
  void copy(Stream& stream, float* out, const float* in, std::int64_t n) override {
    context_.copy(stream, in, out, static_cast<std::size_t>(n) * sizeof(float));
  }
  void copy_rows(Stream& stream, float* out, const float* in, const std::int64_t* host_rows,
                 std::int64_t count, std::int64_t C, bool scatter) override {
    with_device_rows(stream, "copy_rows", host_rows, count, [&](const std::int64_t* rows) {
      cuda::copy_rows(out, in, rows, count, C, scatter, native(stream));
    });
  }

 private:
  // `source` (n elements) as an operand of `dtype` (a GEMM's, or cuDNN's attention's bf16 ones):
  // itself when it is of that dtype already (an fp32 GEMM's, or a 16-bit activation:
  // gemm_input_dtype, attention_io_dtype), else fp32 rounded into `staged`.
  const void* operand(Stream& stream, Activation source, std::int64_t n, DType dtype,
                      void* staged) {
    if (source.dtype == dtype) return source.data;
    ZERO_CHECK(source.dtype == DType::kFloat32, "GPT-2 CUDA kernels: a ", name_of(dtype),
               " operand (a GEMM's or cuDNN's attention's) given a ", name_of(source.dtype),
               " activation");
    ZERO_CHECK(staged != nullptr, "GPT-2 CUDA kernels: a ", name_of(dtype),
               " operand without staging scratch");
    context_.convert(stream, source.data, DType::kFloat32, staged, dtype,
                     static_cast<std::size_t>(n));
    return staged;
  }

  // Runs `call` with device scratch from the context's device allocator (workspace, in the
  // ledger), each buffer released with release_after once `call` has enqueued its work on
  // `stream`, so no later allocation reuses it before that work has run.
  template <typename Call>
  void with_scratch(Stream& stream, Call&& call) {
    std::vector<std::shared_ptr<Buffer>> held;
    const cuda::Scratch scratch{[&](std::size_t bytes) {
      held.push_back(std::make_shared<Buffer>(
          context_.allocator(MemorySpace::kDevice).allocate(bytes, MemoryCategory::kWorkspace)));
      return held.back()->data();
    }};
    call(scratch);
    for (std::shared_ptr<Buffer>& buffer : held) context_.release_after(stream, std::move(buffer));
  }

  void linear_forward_16bit_out(Stream& stream, const LinearForward& call,
                                const GemmScratch& scratch);
  bool use_cudnn(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                 const DropoutSite& dropout, DType precision);
  bool choose_attention(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                        const DropoutSite& dropout, DType precision);
  // ZERO_CUDNN_NATIVE_GQA=1 and cuDNN runs this call's query heads (use_cudnn) and its grouped
  // shape: grouped-query attention on cuDNN without repeating k and v.
  bool use_native_gqa(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                      std::int64_t KVH, const DropoutSite& dropout, DType precision);
  void report_attention(const std::string& what);
  // An attention call's shape: qkv (B, T, C + 2·KVH·C/NH), out (B, T, C), NH query heads, KVH
  // key/value heads (0: NH, qkv (B, T, 3C)).
  struct AttentionShape {
    std::int64_t B, T, C, NH, KVH = 0;
    std::size_t out_elements() const { return static_cast<std::size_t>(B * T * C); }
    std::int64_t kv_heads() const { return KVH == 0 ? NH : KVH; }
    std::size_t qkv_elements() const {
      return static_cast<std::size_t>(B * T * (C + 2 * kv_heads() * (C / NH)));
    }
  };
  void cudnn_attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                               const AttentionShape& shape, const GemmScratch& scratch);
  void cudnn_attention_backward(Stream& stream, float* dqkv, const float* dout, Activation out,
                                Activation qkv, const float* att, const AttentionShape& shape,
                                const GemmScratch& scratch);
  void tiled_attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                               const AttentionShape& shape, const DropoutSite& dropout);
  void tiled_attention_backward(Stream& stream, float* dqkv, float* datt, const float* dout,
                                Activation out, Activation qkv, const float* att,
                                const AttentionShape& shape, const DropoutSite& dropout);
  // `source` (n elements) as fp32 for the tiled kernels: itself when fp32, else bf16 widened into
  // `scratch`'s memory.
  const float* fp32_operand(Stream& stream, Activation source, std::size_t n,
                            const cuda::Scratch& scratch);
  void* cudnn_workspace(Stream& stream, std::size_t bytes, const GemmScratch& scratch);
  // One buffer serves both directions: the larger of the two plans' workspaces.
  std::size_t cudnn_workspace_bytes(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                    std::int64_t KVH = 0) {
    return std::max(cudnn_.forward_workspace(B, T, C, NH, KVH),
                    cudnn_.backward_workspace(B, T, C, NH, KVH));
  }
  // Row indices on their way to the device (with_device_rows).
  struct StagedRows {
    Buffer pinned, device;
  };
  // Runs `call` with the `count` row indices at host_rows copied to the device in `stream`'s
  // order: staged in pinned memory here (host_rows may change once this returns), then copied on
  // the stream. Both buffers come from the context's allocators (workspace, in the ledger), sized
  // to a power of two so that the caching allocators hand the same blocks back step after step,
  // and are released together with one release_after (one host callback) once `call` has
  // enqueued its work (or thrown).
  template <typename Index, typename Call>
  void with_device_rows(Stream& stream, const char* what, const Index* host_rows,
                        std::int64_t count, Call&& call) {
    ZERO_CHECK(count >= 0, "GPT-2 CUDA kernels: ", what, " of ", count, " rows");
    if (count == 0) return;
    const std::size_t used = static_cast<std::size_t>(count) * sizeof(Index);
    const std::size_t bytes = std::bit_ceil(std::max<std::size_t>(used, 256));
    auto staged = std::make_shared<StagedRows>();
    staged->pinned =
        context_.allocator(MemorySpace::kHostPinned).allocate(bytes, MemoryCategory::kWorkspace);
    Index* indices = staged->pinned.data_as<Index>();
    for (std::int64_t i = 0; i < count; ++i) {
      ZERO_CHECK(host_rows[i] >= 0, "GPT-2 CUDA kernels: ", what, " given row ", host_rows[i],
                 " at index ", i);
      indices[i] = host_rows[i];
    }
    staged->device =
        context_.allocator(MemorySpace::kDevice).allocate(bytes, MemoryCategory::kWorkspace);
    context_.copy(stream, indices, staged->device.data(), used);
    const Index* rows = staged->device.data_as<const Index>();
    try {
      call(rows);
    } catch (...) {  // the copy is queued: release after it all the same
      context_.release_after(stream, std::move(staged));
      throw;
    }
    context_.release_after(stream, std::move(staged));
  }

  DeviceContext& context_;
  const cuda::AttentionChoice attention_choice_ = cuda::attention_choice_from_environment();
  const bool native_gqa_ = cuda::native_gqa_from_environment();
  bool reported_native_gqa_ = false;
  cuda::CudnnAttention cudnn_;
  std::string reported_attention_;
  // The last call's attention arguments and use_cudnn's answer for them: every layer's forward and
  // backward asks with the same ones, and the answer (with its log line) is worked out once.
  struct AttentionCall {
    std::int64_t B = 0, T = 0, C = 0, NH = 0;
    bool dropout = false;
    DType precision = DType::kFloat32;
    bool operator==(const AttentionCall&) const = default;
  };
  std::optional<std::pair<AttentionCall, bool>> last_attention_;
  // cuDNN's workspace, kept between calls on one stream (they run in order), in the ledger.
  std::shared_ptr<Buffer> cudnn_workspace_;
  Stream* cudnn_workspace_stream_ = nullptr;
};

// The 16-bit GEMM staging (GemmScratch) holds at least `a` elements in staged_a and `b` in
// staged_b. cuDNN's attention stages its bf16 operands there too: 4·N·C elements in each.
inline void check_staging(const GemmScratch& scratch, std::int64_t a, std::int64_t b) {
  ZERO_CHECK(scratch.staged_a != nullptr && scratch.staged_b != nullptr &&
                 scratch.staged_a_elements >= a && scratch.staged_b_elements >= b,
             "GPT-2 CUDA kernels: 16-bit operands need staging of ", a, " and ", b,
             " elements (GemmScratch has ", scratch.staged_a_elements, " and ",
             scratch.staged_b_elements, ")");
}

}  // namespace zero::gpt2
