// CudaKernels' attention (kernels_cuda.h): cuDNN's fused SDPA where the call allows it (bf16
// precision, no dropout, a shape cuDNN takes), else the tiled fp32 kernels; qkv and out of either
// dtype attention_io_dtype() makes them, staged or widened where the path takes the other.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "kernels_cuda.h"
#include "zero/core/error.h"

namespace zero::gpt2 {

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

bool CudaKernels::use_native_gqa(std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                 std::int64_t KVH, const DropoutSite& dropout, DType precision) {
  if (!native_gqa_ || KVH == NH || !use_cudnn(B, T, C, NH, dropout, precision)) return false;
  std::string why;
  const bool supported = cudnn_.supports(B, T, C, NH, &why, KVH);
  if (!reported_native_gqa_) {
    reported_native_gqa_ = true;
    std::fprintf(
        stderr, "zero: grouped-query attention (%lld query heads on %lld key/value heads) %s\n",
        static_cast<long long>(NH), static_cast<long long>(KVH),
        supported ? "on cuDNN without repeating k and v (ZERO_CUDNN_NATIVE_GQA=1)"
                  : ("with k and v repeated: cuDNN refused the grouped shape: " + why).c_str());
  }
  return supported;
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
  const void* qkv16 = operand(stream, qkv, s.qkv_elements(), DType::kBFloat16, scratch.staged_a);
  void* out16 = out.dtype == DType::kBFloat16 ? out.data : scratch.staged_b;
  void* workspace =
      cudnn_workspace(stream, cudnn_workspace_bytes(s.B, s.T, s.C, s.NH, s.KVH), scratch);
  cudnn_.forward(out16, att, qkv16, s.B, s.T, s.C, s.NH, workspace, native(stream), s.KVH);
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
  const std::size_t n = s.out_elements(), m = s.qkv_elements();  // m <= 3n
  check_staging(scratch, 4 * s.B * s.T * s.C, 4 * s.B * s.T * s.C);
  // staged_a: qkv (m) then out (n) where they are fp32; staged_b: dqkv (m) then dout (n).
  auto* staged_a = static_cast<std::uint16_t*>(scratch.staged_a);
  auto* staged_b = static_cast<std::uint16_t*>(scratch.staged_b);
  const void* qkv16 = operand(stream, qkv, m, DType::kBFloat16, staged_a);
  const void* out16 = operand(stream, out, n, DType::kBFloat16, staged_a + m);
  void *dqkv16 = staged_b, *dout16 = staged_b + m;
  void* workspace =
      cudnn_workspace(stream, cudnn_workspace_bytes(s.B, s.T, s.C, s.NH, s.KVH), scratch);
  context_.convert(stream, dout, DType::kFloat32, dout16, DType::kBFloat16, n);
  cudnn_.backward(dqkv16, qkv16, out16, dout16, att, s.B, s.T, s.C, s.NH, workspace, native(stream),
                  s.KVH);
  context_.convert(stream, dqkv16, DType::kBFloat16, dqkv, DType::kFloat32, m);
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

}  // namespace zero::gpt2
