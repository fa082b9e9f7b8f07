// make_kernels: the one place the model's kernels are chosen from the device context; the
// Kernels defaults (label smoothing 0, the LM head's forward and backward as their calls) every
// backend inherits; the dtypes of what the kernels keep.
#include <omp.h>

#include <algorithm>

#include "kernels_internal.h"
#ifdef ZERO_GPT2_WITH_CUDA
#include "cuda/attention_cudnn.h"
#endif
#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2 {

void Kernels::smoothed_crossentropy_forward(Stream& stream, float* losses, float* logsumexp,
                                            const float* logits, const int* targets, std::int64_t N,
                                            std::int64_t V, std::int64_t Vp,
                                            float label_smoothing) {
  ZERO_CHECK(label_smoothing == 0.0f, "label smoothing ", label_smoothing,
             " (--label_smoothing_factor): the ", backend(), " kernels do not implement it");
  crossentropy_forward(stream, losses, logsumexp, logits, targets, N, V, Vp);
}

void Kernels::smoothed_crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                                             const int* targets, std::int64_t N, std::int64_t V,
                                             std::int64_t Vp, float scale, float label_smoothing) {
  ZERO_CHECK(label_smoothing == 0.0f, "label smoothing ", label_smoothing,
             " (--label_smoothing_factor): the ", backend(), " kernels do not implement it");
  crossentropy_backward(stream, logits, logsumexp, targets, N, V, Vp, scale);
}

void Kernels::norm_forward(Stream& stream, ActivationOut out, NormStatistics kept, const float* inp,
                           const Norm& norm, std::int64_t N, std::int64_t C) {
  if (norm.kind == NormKind::kRmsNorm) {
    ZERO_CHECK(norm.bias == nullptr, "norm_forward: RMSNorm has no bias");
    rmsnorm_forward(stream, out, kept.rstd, inp, norm.weight, N, C, norm.epsilon);
    return;
  }
  ZERO_CHECK(norm.bias != nullptr && kept.mean != nullptr,
             "norm_forward: a layer norm needs its bias and a mean to keep");
  layernorm_forward(stream, out, kept.mean, kept.rstd, inp, norm.weight, norm.bias, N, C,
                    norm.epsilon);
}

void Kernels::residual_norm_forward(Stream& stream, float* residual_out, ActivationOut out,
                                    NormStatistics kept, const float* residual, const float* inp,
                                    const Norm& norm, std::int64_t B, std::int64_t T,
                                    std::int64_t C, const DropoutSite& dropout) {
  if (norm.kind == NormKind::kRmsNorm) {
    ZERO_CHECK(norm.bias == nullptr, "residual_norm_forward: RMSNorm has no bias");
    residual_rmsnorm_forward(stream, residual_out, out, kept.rstd, residual, inp, norm.weight, B, T,
                             C, norm.epsilon, dropout);
    return;
  }
  ZERO_CHECK(norm.bias != nullptr && kept.mean != nullptr,
             "residual_norm_forward: a layer norm needs its bias and a mean to keep");
  residual_layernorm_forward(stream, residual_out, out, kept.mean, kept.rstd, residual, inp,
                             norm.weight, norm.bias, B, T, C, norm.epsilon, dropout);
}

void Kernels::norm_backward(Stream& stream, float* dinp, float* dweight, float* dbias,
                            const float* dout, const float* inp, const Norm& norm,
                            const float* mean, const float* rstd, std::int64_t N, std::int64_t C) {
  if (norm.kind == NormKind::kRmsNorm) {
    ZERO_CHECK(norm.bias == nullptr && dbias == nullptr,
               "norm_backward: RMSNorm has no bias (nor its gradient)");
    rmsnorm_backward(stream, dinp, dweight, dout, inp, norm.weight, rstd, N, C);
    return;
  }
  ZERO_CHECK(norm.bias != nullptr && dbias != nullptr && mean != nullptr,
             "norm_backward: a layer norm needs its bias, its gradient and the kept mean");
  layernorm_backward(stream, dinp, dweight, dbias, dout, inp, norm.weight, mean, rstd, N, C);
}

void check_rope(const RopeLayout& l, std::int64_t table_positions, const char* what) {
  ZERO_CHECK(l.head_dim > 0 && l.head_dim % 2 == 0, what, ": head_dim must be even and positive, ",
             "got ", l.head_dim);
  ZERO_CHECK(l.B >= 0 && l.T >= 0 && l.heads >= 0 && l.position_offset >= 0, what, ": negative B ",
             l.B, ", T ", l.T, ", heads ", l.heads, " or position_offset ", l.position_offset);
  ZERO_CHECK(l.heads * l.head_dim <= l.row_stride, what, ": ", l.heads, " heads of ", l.head_dim,
             " channels do not fit a row of ", l.row_stride);
  ZERO_CHECK(l.position_offset + l.T <= table_positions, what, ": positions ", l.position_offset,
             "..", l.position_offset + l.T - 1, " past a rotary table of ", table_positions,
             " positions");
}

void check_heads(const char* what, std::int64_t NH, std::int64_t KVH) {
  ZERO_CHECK(KVH > 0 && KVH <= NH && NH % KVH == 0, what, ": ", NH,
             " attention heads cannot share ", KVH,
             " key/value heads (a positive divisor of the heads is needed)");
}

void check_cached_attention(const CachedAttention& c, const char* what,
                            std::int64_t max_head_size) {
  check_heads(what, c.NH, c.KVH);
  ZERO_CHECK(c.Q >= 0 && c.first_position >= 0 && c.HS > 0, what, ": Q ", c.Q, ", first_position ",
             c.first_position, ", head size ", c.HS);
  ZERO_CHECK(c.first_position + c.Q <= c.max_positions, what, ": positions ", c.first_position,
             "..", c.first_position + c.Q - 1, " past a cache of ", c.max_positions, " positions");
  ZERO_CHECK(c.q_stride >= c.NH * c.HS, what, ": ", c.NH, " query heads of ", c.HS,
             " channels do not fit a row of ", c.q_stride);
  ZERO_CHECK(max_head_size <= 0 || c.HS <= max_head_size, what, ": heads of ", c.HS,
             " channels, the kernel takes at most ", max_head_size);
}

const float* Activation::fp32(std::string_view what) const {
  ZERO_CHECK(dtype == DType::kFloat32, what, ": an fp32 activation is needed, got ",
             name_of(dtype));
  return static_cast<const float*>(data);
}

float* ActivationOut::fp32(std::string_view what) const {
  ZERO_CHECK(dtype == DType::kFloat32, what, ": an fp32 activation is needed, got ",
             name_of(dtype));
  return static_cast<float*>(data);
}

namespace {

float* fp32_logits(void* logits, DType dtype, std::string_view backend, const char* what) {
  ZERO_CHECK(dtype == DType::kFloat32, what, ": the ", backend, " kernels keep fp32 logits, not ",
             name_of(dtype));
  return static_cast<float*>(logits);
}

}  // namespace

void Kernels::logits_forward(Stream& stream, const LogitsForward& c, const GemmScratch& scratch) {
  float* logits = fp32_logits(c.logits, c.logits_dtype, backend(), "logits_forward");
  // logits (N, Vp) = ln_f (N, C) · wteᵀ
  weight_gemm(
      stream,
      {true, c.N, c.Vp, c.C, c.ln_f.fp32("logits_forward (ln_f)"), c.wte, c.C, 0.0f, logits},
      scratch);
  if (c.targets != nullptr)
    smoothed_crossentropy_forward(stream, c.losses, c.logsumexp, logits, c.targets, c.N, c.V, c.Vp,
                                  c.label_smoothing);
}

void Kernels::logits_backward(Stream& stream, const LogitsBackward& c, const GemmScratch& scratch) {
  float* logits = fp32_logits(c.logits, c.logits_dtype, backend(), "logits_backward");
  smoothed_crossentropy_backward(stream, logits, c.logsumexp, c.targets, c.N, c.V, c.Vp, c.scale,
                                 c.label_smoothing);
  // dln (N, C) = dlogits (N, Vp) · wte (Vp, C); dwte (Vp, C) += dlogitsᵀ · ln_f. dlogits is
  // contiguous: the 16-bit copy weight_gemm makes of it is grad_gemm's A.
  weight_gemm(stream, {false, c.N, c.C, c.Vp, logits, c.wte, c.C, 0.0f, c.dln}, scratch);
  grad_gemm(stream,
            {c.Vp, c.C, c.N, logits, c.Vp, c.ln_f.fp32("logits_backward (ln_f)"), c.dwte,
             c.param_dtype, /*a_is_staged=*/true},
            scratch);
}

DType gemm_input_dtype(DeviceKind device, DType param_dtype) {
  return device == DeviceKind::kCuda && param_dtype == DType::kBFloat16 ? DType::kBFloat16
                                                                        : DType::kFloat32;
}

DType logits_dtype(DeviceKind device, DType param_dtype) {
  return device == DeviceKind::kCuda && param_dtype == DType::kBFloat16 ? DType::kBFloat16
                                                                        : DType::kFloat32;
}

std::unique_ptr<Kernels> make_kernels(DeviceContext& context) {
  if (context.device().kind == DeviceKind::kCuda && !context.planning()) {
#ifdef ZERO_GPT2_WITH_CUDA
    return make_cuda_kernels(context);
#else
    ZERO_THROW("GPT-2 kernels: the device context is ", context.backend(), " on ",
               context.device().to_string(), " but this build of zero::gpt2 has no CUDA kernels");
#endif
  }
  return make_cpu_kernels(context);
}

namespace {

// Whether this build runs cuDNN's attention for bf16 heads of HS channels (cuDNN's SDPA takes
// multiples of 8 up to 256); the device may still refuse a shape (CudaKernels::use_cudnn).
bool cudnn_takes_head(std::int64_t HS) {
#ifdef ZERO_GPT2_WITH_CUDA
  return cuda::cudnn_attention_built() && HS % 8 == 0 && HS <= 256;
#else
  (void)HS;
  return false;
#endif
}

bool attention_tiled_by_environment() {
#ifdef ZERO_GPT2_WITH_CUDA
  return cuda::attention_choice_from_environment() == cuda::AttentionChoice::kTiled;
#else
  return false;
#endif
}

}  // namespace

DType attention_io_dtype(DeviceKind device, DType param_dtype, std::int64_t C, std::int64_t NH,
                         double attention_dropout) {
  const bool cudnn = device == DeviceKind::kCuda && param_dtype == DType::kBFloat16 &&
                     attention_dropout == 0.0 && NH > 0 && C % NH == 0 &&
                     cudnn_takes_head(C / NH) && !attention_tiled_by_environment();
  return cudnn ? DType::kBFloat16 : DType::kFloat32;
}

AttentionLayout attention_layout(DeviceKind device, std::int64_t B, std::int64_t T, std::int64_t C,
                                 std::int64_t NH, DType precision) {
  ZERO_CHECK(NH > 0 && C % NH == 0, "GPT-2 attention: n_embd ", C, " is not a multiple of n_head ",
             NH);
  const std::int64_t HS = C / NH;
  // The CPU's log-sum-exps, NH per row rounded up to 16 floats: each block's activations then
  // keep the 64-byte alignment of the block before it, so that activation checkpointing's
  // recomputed block, in another buffer, meets the vectorised CPU kernels at the same alignment
  // and repeats the first forward bit for bit.
  // Its per-thread blocks of scores (bf16 ones too where its products run in bf16: kernels_cpu.cc)
  // are the library workspace, for this process's OpenMP threads.
  if (device == DeviceKind::kCpu) {
    const bool bf16 = precision == DType::kBFloat16 && cpu::gemm_bf16_native();
    return {.saved_per_row = (NH + 15) / 16 * 16,
            .scratch = 0,
            .library_workspace_bytes = cpu::flash_attention_blocks_bytes(
                std::max<std::int64_t>(T, 1), bf16, omp_get_max_threads())};
  }
  if (HS < 1 || HS > kCudaTiledAttentionMaxHeadSize)
    return {.saved_per_row = NH * T, .scratch = B * NH * T * T};
  AttentionLayout layout{.saved_per_row = NH, .scratch = B * NH * T};
  if (precision == DType::kBFloat16 && cudnn_takes_head(HS))
    layout.library_workspace_bytes = 4 * B * T * C + 4 * B * NH * T + 256;
  return layout;
}

}  // namespace zero::gpt2
