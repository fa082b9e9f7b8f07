// The model's kernels on the CUDA backend (kernels.h): layers_cuda.h's kernels and cuBLASLt
// GEMMs, enqueued on the stream's cudaStream_t; dtype conversions, fills and copies through the
// device context's own operations on the same stream. With 16-bit parameters the GEMMs take their
// activations rounded to the parameters' dtype (GemmScratch) and accumulate in fp32.
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
namespace {

cudaStream_t native(Stream& stream) {
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
  // `source` (n elements) as a GEMM operand of `dtype`: itself when it is of that dtype already
  // (an fp32 GEMM's, or a 16-bit activation: gemm_input_dtype), else fp32 rounded into `staged`.
  const void* operand(Stream& stream, Activation source, std::int64_t n, DType dtype,
                      void* staged) {
    if (source.dtype == dtype) return source.data;
    ZERO_CHECK(source.dtype == DType::kFloat32, "GPT-2 CUDA kernels: a ", name_of(dtype),
               " GEMM given a ", name_of(source.dtype), " operand");
    ZERO_CHECK(staged != nullptr, "GPT-2 CUDA kernels: a ", name_of(dtype),
               " GEMM without staging scratch");
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
  void report_attention(const std::string& what);
  // An attention call's shape: qkv (B, T, 3C), out (B, T, C), NH heads.
  struct AttentionShape {
    std::int64_t B, T, C, NH;
    std::size_t out_elements() const { return static_cast<std::size_t>(B * T * C); }
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
  // `source` (n elements) as bf16 for cuDNN: itself when bf16 (attention_io_dtype), else fp32
  // rounded into `staged`.
  const void* bf16_operand(Stream& stream, Activation source, std::size_t n, void* staged);
  // `source` (n elements) as fp32 for the tiled kernels: itself when fp32, else bf16 widened into
  // `scratch`'s memory.
  const float* fp32_operand(Stream& stream, Activation source, std::size_t n,
                            const cuda::Scratch& scratch);
  void* cudnn_workspace(Stream& stream, std::size_t bytes, const GemmScratch& scratch);
  // One buffer serves both directions: the larger of the two plans' workspaces.
  std::size_t cudnn_workspace_bytes(std::int64_t B, std::int64_t T, std::int64_t C,
                                    std::int64_t NH) {
    return std::max(cudnn_.forward_workspace(B, T, C, NH), cudnn_.backward_workspace(B, T, C, NH));
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
  // ZERO_GELU_BACKWARD=fused: GELU's backward in the dinp GEMM's epilogue (cuBLASLt's DGELU)
  // instead of its own kernel after the GEMM. Off by default: on an H100 (cuBLASLt 13.1, the
  // heuristic's first algorithm) the fused GEMM took 0.96 ms per fc_proj backward against 0.81 ms
  // for GEMM + kernel (ZERO_KERNEL_PROFILE, benchmarks/RESULTS.md).
  const bool fused_gelu_backward_ = [] {
    const char* value = std::getenv("ZERO_GELU_BACKWARD");
    return value != nullptr && std::string_view(value) == "fused";
  }();
  const cuda::AttentionChoice attention_choice_ = cuda::attention_choice_from_environment();
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

// cuDNN's fused SDPA runs the attention when the run rounds matmul inputs to bf16 anyway, dropout
// is off (cuDNN's dropout masks are not the model's DropoutSite ones) and cuDNN takes the shape;
// else the tiled fp32 kernels. The choice is a function of the call's arguments, so a forward and
// its backward (and an activation-checkpointing recompute) always take the same path.
bool CudaKernels::use_cudnn(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                            const DropoutSite& dropout, DType precision) {
  const AttentionCall call{B, T, C, NH, dropout.active(), precision};
  if (!last_attention_ || last_attention_->first != call)
    last_attention_.emplace(call, choose_attention(B, T, C, NH, dropout, precision));
  return last_attention_->second;
}

bool CudaKernels::choose_attention(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                   const DropoutSite& dropout, DType precision) {
  if (attention_choice_ == cuda::AttentionChoice::kTiled) {
    report_attention("the tiled fp32 kernels (ZERO_ATTENTION=tiled)");
    return false;
  }
  std::string why;
  if (precision != DType::kBFloat16) {
    why = "the parameters are " + std::string(name_of(precision)) + ", not bf16";
  } else if (dropout.active()) {
    why = "attention dropout is on (attn_pdrop " + std::to_string(dropout.probability) + ")";
  } else if (cudnn_.supports(B, T, C, NH, &why)) {
    report_attention("cuDNN's fused SDPA, bf16 (" + cuda::CudnnAttention::version() +
                     ", workspace " + std::to_string(cudnn_.forward_workspace(B, T, C, NH)) +
                     " + " + std::to_string(cudnn_.backward_workspace(B, T, C, NH)) + " bytes)");
    return true;
  }
  ZERO_CHECK(attention_choice_ != cuda::AttentionChoice::kCudnn,
             "ZERO_ATTENTION=cudnn, but cuDNN's attention cannot run: ", why);
  if (precision == DType::kBFloat16)
    report_attention("the tiled fp32 kernels (not cuDNN's SDPA: " + why + ")");
  return false;
}

// One line on stderr each time the attention's implementation changes (normally once per run).
void CudaKernels::report_attention(const std::string& what) {
  if (what == reported_attention_) return;
  reported_attention_ = what;
  std::fprintf(stderr, "zero: GPT-2 attention on %s\n", what.c_str());
}

// The workspace cuDNN's plans ask for: the planned slot of GPT2Compute's workspace
// (GemmScratch::library_workspace, attention_layout's bytes) when it is large enough; else (a shape
// cuDNN asks more for than planned, or no slot) one buffer of the kernels' own reused by the calls
// on `stream` (which run in order), replaced (the old one released once `stream` has run) for
// another stream or a larger size: per-call scratch would let the host, running ahead of the
// device, hold one per layer in flight.
void* CudaKernels::cudnn_workspace(Stream& stream, std::size_t bytes, const GemmScratch& scratch) {
  if (bytes == 0) return nullptr;
  if (scratch.library_workspace != nullptr &&
      static_cast<std::size_t>(scratch.library_workspace_bytes) >= bytes)
    return scratch.library_workspace;
  if (cudnn_workspace_ &&
      (&stream != cudnn_workspace_stream_ || cudnn_workspace_->size_bytes() < bytes))
    context_.release_after(*cudnn_workspace_stream_, std::move(cudnn_workspace_));
  if (!cudnn_workspace_) {
    cudnn_workspace_ = std::make_shared<Buffer>(
        context_.allocator(MemorySpace::kDevice).allocate(bytes, MemoryCategory::kWorkspace));
    cudnn_workspace_stream_ = &stream;
  }
  return cudnn_workspace_->data();
}

// The 16-bit GEMM staging (GemmScratch) holds at least `a` elements in staged_a and `b` in
// staged_b. cuDNN's attention stages its bf16 operands there too: 4·N·C elements in each.
void check_staging(const GemmScratch& scratch, std::int64_t a, std::int64_t b) {
  ZERO_CHECK(scratch.staged_a != nullptr && scratch.staged_b != nullptr &&
                 scratch.staged_a_elements >= a && scratch.staged_b_elements >= b,
             "GPT-2 CUDA kernels: 16-bit operands need staging of ", a, " and ", b,
             " elements (GemmScratch has ", scratch.staged_a_elements, " and ",
             scratch.staged_b_elements, ")");
}

const void* CudaKernels::bf16_operand(Stream& stream, Activation source, std::size_t n,
                                      void* staged) {
  if (source.dtype == DType::kBFloat16) return source.data;
  ZERO_CHECK(source.dtype == DType::kFloat32, "GPT-2 CUDA attention: a ", name_of(source.dtype),
             " activation (fp32 or bf16 expected)");
  context_.convert(stream, source.data, DType::kFloat32, staged, DType::kBFloat16, n);
  return staged;
}

const float* CudaKernels::fp32_operand(Stream& stream, Activation source, std::size_t n,
                                       const cuda::Scratch& scratch) {
  if (source.dtype == DType::kFloat32) return static_cast<const float*>(source.data);
  auto* widened = static_cast<float*>(scratch.allocate(n * sizeof(float)));
  context_.convert(stream, source.data, source.dtype, widened, DType::kFloat32, n);
  return widened;
}

// cuDNN's forward from qkv and into out as they are where they are bf16 (attention_io_dtype); an
// fp32 qkv rounded into staged_a first, an fp32 out written bf16 into staged_b and widened. att
// takes cuDNN's (B, NH, T) softmax statistics.
void CudaKernels::cudnn_attention_forward(Stream& stream, ActivationOut out, float* att,
                                          Activation qkv, const AttentionShape& s,
                                          const GemmScratch& scratch) {
  const std::size_t n = s.out_elements();
  const bool staged = qkv.dtype != DType::kBFloat16 || out.dtype != DType::kBFloat16;
  if (staged) check_staging(scratch, 4 * s.B * s.T * s.C, 4 * s.B * s.T * s.C);
  const void* qkv16 = bf16_operand(stream, qkv, 3 * n, scratch.staged_a);
  void* out16 = out.dtype == DType::kBFloat16 ? out.data : scratch.staged_b;
  void* workspace = cudnn_workspace(stream, cudnn_workspace_bytes(s.B, s.T, s.C, s.NH), scratch);
  cudnn_.forward(out16, att, qkv16, s.B, s.T, s.C, s.NH, workspace, native(stream));
  if (out16 != out.data)
    context_.convert(stream, out16, DType::kBFloat16, out.fp32("GPT-2 CUDA attention_forward"),
                     DType::kFloat32, n);
}

// The forward's qkv and out read where they are bf16, else rounded to bf16 again (the same bf16
// values cuDNN's forward saw and wrote) into staged_a; dout rounded into staged_b, cuDNN's
// backward into bf16 dq, dk, dv (staged_b), widened into the fp32 dqkv.
void CudaKernels::cudnn_attention_backward(Stream& stream, float* dqkv, const float* dout,
                                           Activation out, Activation qkv, const float* att,
                                           const AttentionShape& s, const GemmScratch& scratch) {
  ZERO_CHECK(out.data != nullptr,
             "GPT-2 CUDA attention_backward: cuDNN's backward needs the forward's "
             "out (got null)");
  const std::size_t n = s.out_elements();
  check_staging(scratch, 4 * s.B * s.T * s.C, 4 * s.B * s.T * s.C);
  // staged_a: qkv (3n) then out (n) where they are fp32; staged_b: dqkv (3n) then dout (n).
  auto* staged_a = static_cast<std::uint16_t*>(scratch.staged_a);
  auto* staged_b = static_cast<std::uint16_t*>(scratch.staged_b);
  const void* qkv16 = bf16_operand(stream, qkv, 3 * n, staged_a);
  const void* out16 = bf16_operand(stream, out, n, staged_a + 3 * n);
  void *dqkv16 = staged_b, *dout16 = staged_b + 3 * n;
  void* workspace = cudnn_workspace(stream, cudnn_workspace_bytes(s.B, s.T, s.C, s.NH), scratch);
  context_.convert(stream, dout, DType::kFloat32, dout16, DType::kBFloat16, n);
  cudnn_.backward(dqkv16, qkv16, out16, dout16, att, s.B, s.T, s.C, s.NH, workspace,
                  native(stream));
  context_.convert(stream, dqkv16, DType::kBFloat16, dqkv, DType::kFloat32, 3 * n);
}

// The tiled fp32 kernels. A bf16 qkv (a layout made for cuDNN that the device's cuDNN then
// refused) is widened into scratch, and a bf16 out written through fp32 scratch, rounded once.
void CudaKernels::tiled_attention_forward(Stream& stream, ActivationOut out, float* att,
                                          Activation qkv, const AttentionShape& s,
                                          const DropoutSite& dropout) {
  if (qkv.dtype == DType::kFloat32 && out.dtype == DType::kFloat32) {
    cuda::attention_forward(static_cast<float*>(out.data), att, static_cast<const float*>(qkv.data),
                            s.B, s.T, s.C, s.NH, dropout, native(stream));
    return;
  }
  const std::size_t n = s.out_elements();
  with_scratch(stream, [&](const cuda::Scratch& memory) {
    const float* qkv32 = fp32_operand(stream, qkv, 3 * n, memory);
    float* out32 = out.dtype == DType::kFloat32
                       ? static_cast<float*>(out.data)
                       : static_cast<float*>(memory.allocate(n * sizeof(float)));
    cuda::attention_forward(out32, att, qkv32, s.B, s.T, s.C, s.NH, dropout, native(stream));
    if (out32 != out.data) context_.convert(stream, out32, DType::kFloat32, out.data, out.dtype, n);
  });
}

void CudaKernels::tiled_attention_backward(Stream& stream, float* dqkv, float* datt,
                                           const float* dout, Activation out, Activation qkv,
                                           const float* att, const AttentionShape& s,
                                           const DropoutSite& dropout) {
  const std::size_t n = s.out_elements();
  with_scratch(stream, [&](const cuda::Scratch& memory) {
    const float* qkv32 = fp32_operand(stream, qkv, 3 * n, memory);
    const float* out32 = out.data == nullptr ? nullptr : fp32_operand(stream, out, n, memory);
    cuda::attention_backward(dqkv, datt, dout, out32, qkv32, att, s.B, s.T, s.C, s.NH, dropout,
                             native(stream));
  });
}

void CudaKernels::linear_forward(Stream& stream, const LinearForward& c,
                                 const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  const bool gelu = c.gelu_out.data != nullptr;
  if (c.out.dtype != DType::kFloat32) {
    linear_forward_16bit_out(stream, c, scratch);
    return;
  }
  float* out = static_cast<float*>(c.out.data);
  if (dtype == DType::kFloat32 && !gelu) {
    cuda::matmul_forward(out, c.inp.fp32("GPT-2 CUDA linear_forward (inp)"),
                         static_cast<const float*>(c.weight.data), c.bias, c.N, c.C, c.OC,
                         native(stream));
    return;
  }
  // out (N, OC) = inp · weight + bias, through cuBLASLt's bias (and GELU_AUX) epilogues.
  const void* A = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  cuda::GemmEpilogue epilogue;
  epilogue.bias = c.bias;
  float* destination = out;
  // cuBLASLt's GELU_AUX stores the pre-activation (its aux) in D's type and wants the aux
  // matrix's leading dimension a multiple of 8: fused for an fp32 gelu_out only; a 16-bit one
  // (gemm_input_dtype) is written by GELU's own pass from the fp32 pre-activation, rounded once.
  const bool fused_gelu = gelu && c.gelu_out.dtype == DType::kFloat32 && c.OC % 8 == 0;
  if (fused_gelu) {
    epilogue.gelu = true;
    epilogue.pre_gelu = out;
    destination = static_cast<float*>(c.gelu_out.data);
  }
  cuda::gemm(false, false, c.N, c.OC, c.C, A, c.C, c.weight.data, c.OC, dtype, 0.0f, destination,
             c.OC, DType::kFloat32, epilogue, native(stream));
  if (gelu && !fused_gelu)
    cuda::gelu_forward(c.gelu_out.data, c.gelu_out.dtype, out, c.N * c.OC, native(stream));
}

// A 16-bit out (attention_io_dtype's qkv): the GEMM writes it in the weight's dtype, rounded once
// from the fp32 sums, with the unit's own 16-bit bias in its epilogue (cuBLASLt's bias is of D's
// type; the fp32 bias is that bias widened, so the sum is the same).
void CudaKernels::linear_forward_16bit_out(Stream& stream, const LinearForward& c,
                                           const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  ZERO_CHECK(c.out.dtype == dtype && c.gelu_out.data == nullptr, "GPT-2 CUDA linear_forward: a ",
             name_of(c.out.dtype), " out needs ", name_of(c.out.dtype), " weights (got ",
             name_of(dtype), ") and no GELU");
  ZERO_CHECK(c.bias == nullptr || c.stored_bias != nullptr, "GPT-2 CUDA linear_forward: a ",
             name_of(dtype), " out with a bias needs the bias in ", name_of(dtype),
             " (LinearForward::stored_bias)");
  const void* A = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  cuda::GemmEpilogue epilogue;
  epilogue.bias = c.bias != nullptr ? c.stored_bias : nullptr;
  cuda::gemm(false, false, c.N, c.OC, c.C, A, c.C, c.weight.data, c.OC, dtype, 0.0f, c.out.data,
             c.OC, dtype, epilogue, native(stream));
}

// 16-bit parameters: dout is read once, by one pass that rounds it into staged_b (both GEMMs' dout
// operand) and sums dbias's columns; an fp32 inp is rounded into staged_a (a 16-bit one, the
// forward's gemm_input_dtype activation, is the operand as it is). With gelu_input, GELU's
// backward runs after dinp's GEMM (or, under ZERO_GELU_BACKWARD=fused and where cuBLASLt has an
// algorithm for it, in the GEMM's DGELU epilogue).
void CudaKernels::linear_backward(Stream& stream, const LinearBackward& c,
                                  const GemmScratch& scratch) {
  const DType dtype = c.weight.dtype;
  if (dtype == DType::kFloat32 && c.dweight.dtype == DType::kFloat32) {
    with_scratch(stream, [&](const cuda::Scratch& sums) {
      cuda::matmul_backward(c.dinp, static_cast<float*>(c.dweight.data), c.dbias, c.dout,
                            c.inp.fp32("GPT-2 CUDA linear_backward (inp)"),
                            static_cast<const float*>(c.weight.data), c.N, c.C, c.OC,
                            native(stream), sums);
    });
    if (c.gelu_input != nullptr && c.dinp != nullptr)
      cuda::gelu_backward(c.dinp, c.gelu_input, c.dinp, c.N * c.C, native(stream));
    return;
  }
  const void* dout = c.dout;
  if (dtype != DType::kFloat32) {
    check_staging(scratch, c.N * c.C, c.N * c.OC);
    dout = scratch.staged_b;
    if (c.dbias != nullptr) {
      with_scratch(stream, [&](const cuda::Scratch& sums) {
        cuda::bias_backward_staged(c.dbias, scratch.staged_b, dtype, c.dout, c.N, c.OC,
                                   native(stream), sums);
      });
    } else {
      context_.convert(stream, c.dout, DType::kFloat32, scratch.staged_b, dtype,
                       static_cast<std::size_t>(c.N * c.OC));
    }
  } else if (c.dbias != nullptr) {
    with_scratch(stream, [&](const cuda::Scratch& sums) {
      cuda::bias_backward(c.dbias, c.dout, c.N, c.OC, native(stream), sums);
    });
  }
  if (c.dinp != nullptr) {
    // dinp (N, C) = dout · weightᵀ [· gelu'(gelu_input)]
    bool gelu_done = false;
    if (c.gelu_input != nullptr && c.C % 8 == 0 && fused_gelu_backward_) {
      cuda::GemmEpilogue epilogue;
      epilogue.gelu_input = c.gelu_input;
      gelu_done =
          cuda::try_gemm(false, true, c.N, c.C, c.OC, dout, c.OC, c.weight.data, c.OC, dtype, 0.0f,
                         c.dinp, c.C, DType::kFloat32, epilogue, native(stream));
    }
    if (!gelu_done)
      cuda::gemm(false, true, c.N, c.C, c.OC, dout, c.OC, c.weight.data, c.OC, dtype, 0.0f, c.dinp,
                 c.C, DType::kFloat32, {}, native(stream));
    if (c.gelu_input != nullptr && !gelu_done)
      cuda::gelu_backward(c.dinp, c.gelu_input, c.dinp, c.N * c.C, native(stream));
  }
  // dweight (C, OC) += inpᵀ · dout, rounded once into dweight's dtype.
  const void* inp = operand(stream, c.inp, c.N * c.C, dtype, scratch.staged_a);
  cuda::gemm(true, false, c.C, c.OC, c.N, inp, c.C, dout, c.OC, dtype, 1.0f, c.dweight.data, c.OC,
             c.dweight.dtype, {}, native(stream));
}

// fp32 logits: Kernels' two calls. bf16 (logits_dtype): ln_f (bf16 already, gemm_input_dtype, or
// rounded into staged_a), the GEMM
// writes the logits in bf16, and the cross-entropy reads them widened.
void CudaKernels::logits_forward(Stream& stream, const LogitsForward& c,
                                 const GemmScratch& scratch) {
  if (c.logits_dtype == DType::kFloat32) {
    Kernels::logits_forward(stream, c, scratch);
    return;
  }
  ZERO_CHECK(c.wte.dtype == c.logits_dtype, "GPT-2 CUDA logits_forward: ", name_of(c.logits_dtype),
             " logits from ", name_of(c.wte.dtype),
             " embeddings (the GEMM writes its operands' dtype)");
  check_staging(scratch, c.N * c.C, 0);
  const void* ln_f = operand(stream, c.ln_f, c.N * c.C, c.wte.dtype, scratch.staged_a);
  // logits (N, Vp) = ln_f (N, C) · wteᵀ, rounded once into bf16
  cuda::gemm(false, true, c.N, c.Vp, c.C, ln_f, c.C, c.wte.data, c.C, c.wte.dtype, 0.0f, c.logits,
             c.Vp, c.logits_dtype, {}, native(stream));
  if (c.targets != nullptr)
    cuda::crossentropy_forward(c.losses, c.logsumexp, c.logits, c.logits_dtype, c.targets, c.N, c.V,
                               c.Vp, native(stream), c.label_smoothing);
}

// 16-bit embeddings: the cross-entropy's gradient is written once, rounded, into staged_a (N, Vp),
// the operand of both products; an fp32 ln_f is rounded into staged_b. fp32: Kernels' three
// calls.
void CudaKernels::logits_backward(Stream& stream, const LogitsBackward& c,
                                  const GemmScratch& scratch) {
  const DType dtype = c.param_dtype;
  if (dtype == DType::kFloat32 || c.wte.dtype != dtype) {
    Kernels::logits_backward(stream, c, scratch);
    return;
  }
  check_staging(scratch, c.N * c.Vp, c.N * c.C);
  cuda::crossentropy_backward(scratch.staged_a, dtype, c.logits, c.logits_dtype, c.logsumexp,
                              c.targets, c.N, c.V, c.Vp, c.scale, native(stream),
                              c.label_smoothing);
  // dln (N, C) = dlogits (N, Vp) · wte (Vp, C)
  cuda::gemm(false, false, c.N, c.C, c.Vp, scratch.staged_a, c.Vp, c.wte.data, c.C, dtype, 0.0f,
             c.dln, c.C, DType::kFloat32, {}, native(stream));
  // dwte (Vp, C) += dlogitsᵀ · ln_f
  const void* ln_f = operand(stream, c.ln_f, c.N * c.C, dtype, scratch.staged_b);
  cuda::gemm(true, false, c.Vp, c.C, c.N, scratch.staged_a, c.Vp, ln_f, c.C, dtype, 1.0f,
             c.dwte.data, c.C, c.dwte.dtype, {}, native(stream));
}

void CudaKernels::weight_gemm(Stream& stream, const WeightGemm& c, const GemmScratch& scratch) {
  const void* A = operand(stream, c.A, c.M * c.K, c.W.dtype, scratch.staged_a);
  cuda::gemm(false, c.trans_w, c.M, c.N, c.K, A, c.K, c.W.data, c.ldw, c.W.dtype, c.beta, c.out,
             c.N, DType::kFloat32, {}, native(stream));
}

void CudaKernels::grad_gemm(Stream& stream, const GradGemm& c, const GemmScratch& scratch) {
  const DType dtype = c.param_dtype;
  const void* A = c.a_is_staged && dtype != DType::kFloat32
                      ? scratch.staged_a
                      : operand(stream, c.A, c.K * c.lda, dtype, scratch.staged_a);
  const void* B = operand(stream, c.B, c.K * c.N, dtype, scratch.staged_b);
  // G += Aᵀ · B with one rounding into G's dtype (fp32, or the parameters' 16 bits).
  cuda::gemm(true, false, c.M, c.N, c.K, A, c.lda, B, c.N, dtype, 1.0f, c.G.data, c.N, c.G.dtype,
             {}, native(stream));
}

}  // namespace

std::unique_ptr<Kernels> make_cuda_kernels(DeviceContext& context) {
  const char* profile = std::getenv("ZERO_KERNEL_PROFILE");
  if (profile != nullptr && *profile != '\0' && std::string_view(profile) != "0")
    return profile_kernels(std::make_unique<CudaKernels>(context));
  return std::make_unique<CudaKernels>(context);
}

}  // namespace zero::gpt2
