// The model's kernels on the CPU backend (kernels.h): layers_cpu.h's kernels, on the calling
// thread when the context's model runs on the host, else as tasks of the stream.
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "kernels_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2 {
namespace {

class CpuKernels final : public Kernels {
 public:
  explicit CpuKernels(bool on_host) : on_host_(on_host) {}
  std::string_view backend() const override { return "cpu"; }

  void encoder_forward(Stream& stream, float* out, const int* tokens, const float* wte,
                       const float* wpe, std::int64_t B, std::int64_t T, std::int64_t C,
                       const DropoutSite& dropout) override {
    run(stream, [=] { cpu::encoder_forward(out, tokens, wte, wpe, B, T, C, dropout); });
  }
  void encoder_backward(Stream& stream, float* dwte, float* dwpe, const float* dout,
                        const int* tokens, const int*, std::int64_t B, std::int64_t T,
                        std::int64_t C, const DropoutSite& dropout) override {
    run(stream, [=] { cpu::encoder_backward(dwte, dwpe, dout, tokens, B, T, C, dropout); });
  }

  void layernorm_forward(Stream& stream, ActivationOut activation, float* mean, float* rstd,
                         const float* inp, const float* weight, const float* bias, std::int64_t N,
                         std::int64_t C, float epsilon) override {
    float* out = activation.fp32("GPT-2 CPU layernorm_forward (out)");
    run(stream, [=] { cpu::layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, epsilon); });
  }
  void residual_layernorm_forward(Stream& stream, float* residual_out, ActivationOut activation,
                                  float* mean, float* rstd, const float* residual, const float* inp,
                                  const float* weight, const float* bias, std::int64_t B,
                                  std::int64_t T, std::int64_t C, float epsilon,
                                  const DropoutSite& dropout) override {
    float* out = activation.fp32("GPT-2 CPU residual_layernorm_forward (out)");
    run(stream, [=] {
      cpu::residual_dropout_forward(residual_out, residual, inp, B, T, C, dropout);
      cpu::layernorm_forward(out, mean, rstd, residual_out, weight, bias, B * T, C, epsilon);
    });
  }
  void residual_forward(Stream& stream, float* out, const float* residual, const float* inp,
                        std::int64_t B, std::int64_t T, std::int64_t C,
                        const DropoutSite& dropout) override {
    run(stream, [=] { cpu::residual_dropout_forward(out, residual, inp, B, T, C, dropout); });
  }
  void layernorm_backward(Stream& stream, float* dinp, float* dweight, float* dbias,
                          const float* dout, const float* inp, const float* weight,
                          const float* mean, const float* rstd, std::int64_t N,
                          std::int64_t C) override {
    run(stream, [=] {
      cpu::layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    });
  }
  void dropout_backward(Stream& stream, float* dinp, const float* dout, std::int64_t B,
                        std::int64_t T, std::int64_t C, const DropoutSite& dropout) override {
    run(stream, [=] { cpu::dropout_backward(dinp, dout, B, T, C, dropout); });
  }

  void rmsnorm_forward(Stream& stream, ActivationOut activation, float* rstd, const float* inp,
                       const float* weight, std::int64_t N, std::int64_t C,
                       float epsilon) override {
    float* out = activation.fp32("CPU rmsnorm_forward (out)");
    run(stream, [=] { cpu::rmsnorm_forward(out, rstd, inp, weight, N, C, epsilon); });
  }
  void residual_rmsnorm_forward(Stream& stream, float* residual_out, ActivationOut activation,
                                float* rstd, const float* residual, const float* inp,
                                const float* weight, std::int64_t B, std::int64_t T, std::int64_t C,
                                float epsilon, const DropoutSite& dropout) override {
    float* out = activation.fp32("CPU residual_rmsnorm_forward (out)");
    run(stream, [=] {
      cpu::residual_dropout_forward(residual_out, residual, inp, B, T, C, dropout);
      cpu::rmsnorm_forward(out, rstd, residual_out, weight, B * T, C, epsilon);
    });
  }
  void rmsnorm_backward(Stream& stream, float* dinp, float* dweight, const float* dout,
                        const float* inp, const float* weight, const float* rstd, std::int64_t N,
                        std::int64_t C) override {
    run(stream, [=] { cpu::rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C); });
  }
  // Validated here, computed in the stream's order (a table is written once per shape).
  void rope_table(Stream& stream, float* table, const RopeParameters& parameters,
                  std::int64_t positions) override {
    validate(parameters);
    ZERO_CHECK(positions >= 0, "CPU rope_table: ", positions, " positions");
    run(stream, [=] {
      const std::vector<float> values = gpt2::rope_table(parameters, positions);
      std::copy(values.begin(), values.end(), table);
    });
  }
  void rope_forward(Stream& stream, ActivationOut x, const float* table,
                    std::int64_t table_positions, const RopeLayout& layout) override {
    check_rope(layout, table_positions, "CPU rope_forward");
    float* x32 = x.fp32("CPU rope_forward (x)");
    run(stream, [=] { cpu::rope_forward(x32, table, layout); });
  }
  void rope_backward(Stream& stream, float* dx, const float* table, std::int64_t table_positions,
                     const RopeLayout& layout) override {
    check_rope(layout, table_positions, "CPU rope_backward");
    run(stream, [=] { cpu::rope_backward(dx, table, layout); });
  }
  void swiglu_forward(Stream& stream, ActivationOut activation, const float* inp, std::int64_t N,
                      std::int64_t H) override {
    float* out = activation.fp32("CPU swiglu_forward (out)");
    run(stream, [=] { cpu::swiglu_forward(out, inp, N, H); });
  }
  void repeat_kv_forward(Stream& stream, ActivationOut heads, Activation qkv, std::int64_t N,
                         std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    ZERO_CHECK(heads.dtype == qkv.dtype, "CPU repeat_kv_forward: heads are ", name_of(heads.dtype),
               " but qkv ", name_of(qkv.dtype));
    check_heads("CPU repeat_kv_forward", NH, KVH);
    void* out = heads.data;
    const void* in = qkv.data;
    const std::size_t bytes = size_of(qkv.dtype);
    run(stream, [=] { cpu::repeat_kv_forward(out, in, bytes, N, NH, KVH, HS); });
  }
  void repeat_kv_backward(Stream& stream, float* dqkv, const float* dheads, std::int64_t N,
                          std::int64_t NH, std::int64_t KVH, std::int64_t HS) override {
    check_heads("CPU repeat_kv_backward", NH, KVH);
    run(stream, [=] { cpu::repeat_kv_backward(dqkv, dheads, N, NH, KVH, HS); });
  }
  void swiglu_backward(Stream& stream, float* dinp, const float* dout, const float* inp,
                       std::int64_t N, std::int64_t H) override {
    run(stream, [=] { cpu::swiglu_backward(dinp, dout, inp, N, H); });
  }

  // The activations' dtypes are checked at the call, as the layer norms' are (in asynchronous mode
  // a check inside the task would surface later, as the stream's error).
  void linear_forward(Stream& stream, const LinearForward& call,
                      const GemmScratch& scratch) override {
    call.inp.fp32("GPT-2 CPU linear_forward (inp)");
    call.out.fp32("GPT-2 CPU linear_forward (out)");
    if (call.gelu_out.data != nullptr) call.gelu_out.fp32("GPT-2 CPU linear_forward (gelu_out)");
    run(stream, [=] { linear_forward_now(call, scratch); });
  }
  void linear_backward(Stream& stream, const LinearBackward& call,
                       const GemmScratch& scratch) override {
    call.inp.fp32("GPT-2 CPU linear_backward (inp)");
    run(stream, [=] { linear_backward_now(call, scratch); });
  }
  void weight_gemm(Stream& stream, const WeightGemm& call, const GemmScratch& scratch) override {
    run(stream, [=] { weight_gemm_now(call, scratch); });
  }
  void grad_gemm(Stream& stream, const GradGemm& call, const GemmScratch& scratch) override {
    run(stream, [=] { grad_gemm_now(call, scratch); });
  }
  void gemm(Stream& stream, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N,
            std::int64_t K, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
            float beta, float* C, std::int64_t ldc) override {
    run(stream, [=] { cpu::gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc); });
  }

  // att is the log-sum-exp (B, NH, T) of each row (attention_layout): the backward recomputes the
  // probabilities from it.
  void attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                         std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                         const DropoutSite& dropout, DType precision,
                         const GemmScratch& scratch) override {
    float* out32 = out.fp32("GPT-2 CPU attention_forward (out)");
    const float* qkv32 = qkv.fp32("GPT-2 CPU attention_forward (qkv)");
    const cpu::FlashAttentionScratch flash = flash_scratch(precision, scratch, B * T, C);
    run(stream,
        [=] { cpu::flash_attention_forward(out32, att, qkv32, B, T, C, NH, dropout, flash); });
  }
  // `out` and `datt` unused: the kernel sums Σ p·dp over each row's recomputed probabilities.
  void attention_backward(Stream& stream, float* dqkv, float* /*datt*/, const float* dout,
                          Activation /*out*/, Activation qkv, const float* att, std::int64_t B,
                          std::int64_t T, std::int64_t C, std::int64_t NH,
                          const DropoutSite& dropout, DType precision,
                          const GemmScratch& scratch) override {
    const float* qkv32 = qkv.fp32("GPT-2 CPU attention_backward (qkv)");
    const cpu::FlashAttentionScratch flash = flash_scratch(precision, scratch, B * T, C);
    run(stream, [=] {
      cpu::flash_attention_backward(dqkv, dout, qkv32, att, B, T, C, NH, dropout, flash);
    });
  }

  void cached_attention_forward(Stream& stream, const CachedAttention& call) override {
    check_cached_attention(call, "CPU cached_attention_forward");
    run(stream, [=] { cpu::cached_attention_forward(call); });
  }

  void crossentropy_forward(Stream& stream, float* losses, float* logsumexp, const float* logits,
                            const int* targets, std::int64_t N, std::int64_t V,
                            std::int64_t Vp) override {
    run(stream, [=] { cpu::crossentropy_forward(losses, logsumexp, logits, targets, N, V, Vp); });
  }
  void crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                             const int* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                             float scale) override {
    run(stream, [=] { cpu::crossentropy_backward(logits, logsumexp, targets, N, V, Vp, scale); });
  }
  bool supports_label_smoothing() const override { return true; }
  void smoothed_crossentropy_forward(Stream& stream, float* losses, float* logsumexp,
                                     const float* logits, const int* targets, std::int64_t N,
                                     std::int64_t V, std::int64_t Vp,
                                     float label_smoothing) override {
    run(stream, [=] {
      cpu::crossentropy_forward(losses, logsumexp, logits, targets, N, V, Vp, label_smoothing);
    });
  }
  void smoothed_crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                                      const int* targets, std::int64_t N, std::int64_t V,
                                      std::int64_t Vp, float scale,
                                      float label_smoothing) override {
    run(stream, [=] {
      cpu::crossentropy_backward(logits, logsumexp, targets, N, V, Vp, scale, label_smoothing);
    });
  }

  void widen(Stream& stream, float* out, const void* in, DType dtype, std::int64_t n) override {
    run(stream, [=] { cpu::widen(out, in, dtype, n); });
  }
  void accumulate(Stream& stream, void* out, DType dtype, const float* in,
                  std::int64_t n) override {
    run(stream, [=] { cpu::accumulate(out, dtype, in, n); });
  }
  void widen_rows(Stream& stream, float* out, const void* table, DType dtype, const int* host_rows,
                  std::int64_t count, std::int64_t C) override {
    run(stream, [=] {
      const std::size_t row_bytes = static_cast<std::size_t>(C) * size_of(dtype);
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < count; ++i)
        cpu::widen(out + i * C, static_cast<const char*>(table) + host_rows[i] * row_bytes, dtype,
                   C);
    });
  }
  void accumulate_rows(Stream& stream, void* table, DType dtype, const float* in,
                       const int* host_rows, std::int64_t count, std::int64_t C) override {
    run(stream, [=] {
      const std::size_t row_bytes = static_cast<std::size_t>(C) * size_of(dtype);
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < count; ++i)
        cpu::accumulate(static_cast<char*>(table) + host_rows[i] * row_bytes, dtype, in + i * C, C);
    });
  }
  void zero(Stream& stream, float* out, std::int64_t n) override {
    run(stream, [=] { std::memset(out, 0, static_cast<std::size_t>(n) * sizeof(float)); });
  }
  void copy(Stream& stream, float* out, const float* in, std::int64_t n) override {
    run(stream, [=] { std::memcpy(out, in, static_cast<std::size_t>(n) * sizeof(float)); });
  }
  void copy_rows(Stream& stream, float* out, const float* in, const std::int64_t* host_rows,
                 std::int64_t count, std::int64_t C, bool scatter) override {
    run(stream, [=] {
      const std::size_t row_bytes = static_cast<std::size_t>(C) * sizeof(float);
      for (std::int64_t i = 0; i < count; ++i) {
        if (scatter)
          std::memcpy(out + host_rows[i] * C, in + i * C, row_bytes);
        else
          std::memcpy(out + i * C, in + host_rows[i] * C, row_bytes);
      }
    });
  }

 private:
  // Runs `task` now on the host (the context's model runs there) or in `stream`'s order.
  template <typename Task>
  void run(Stream& stream, Task&& task) {
    if (on_host_)
      task();
    else
      stream.submit(std::function<void()>(std::forward<Task>(task)));
  }

  // The attention's products in bf16 where `precision` is bf16 and the bf16 GEMM is native (as
  // the linear layers'), with q, k, v staged in staged_a and dout in staged_b; its per-thread
  // blocks in library_workspace (attention_layout's library_workspace_bytes).
  static cpu::FlashAttentionScratch flash_scratch(DType precision, const GemmScratch& scratch,
                                                  std::int64_t N, std::int64_t C);
  static void weight_gemm_now(const WeightGemm& call, const GemmScratch& scratch);
  static void grad_gemm_now(const GradGemm& call, const GemmScratch& scratch);
  static void linear_forward_now(const LinearForward& call, const GemmScratch& scratch);
  static void linear_backward_now(const LinearBackward& call, const GemmScratch& scratch);

  bool on_host_;
};

cpu::FlashAttentionScratch CpuKernels::flash_scratch(DType precision, const GemmScratch& scratch,
                                                     std::int64_t N, std::int64_t C) {
  cpu::FlashAttentionScratch flash;
  flash.bf16 = precision == DType::kBFloat16 && cpu::gemm_bf16_native();
  if (flash.bf16 && scratch.staged_a != nullptr) {
    ZERO_CHECK(scratch.staged_a_elements >= 3 * N * C && scratch.staged_b_elements >= N * C,
               "GPT-2 CPU attention: staging of ", scratch.staged_a_elements, " and ",
               scratch.staged_b_elements, " elements; bf16 q, k, v and dout take ", 3 * N * C,
               " and ", N * C);
    flash.staged_qkv = static_cast<BFloat16*>(scratch.staged_a);
    flash.staged_dout = static_cast<BFloat16*>(scratch.staged_b);
  }
  flash.blocks = scratch.library_workspace;
  flash.blocks_bytes = scratch.library_workspace_bytes;
  return flash;
}

void CpuKernels::weight_gemm_now(const WeightGemm& c, const GemmScratch& scratch) {
  const float* A = c.A;
  if (c.W.dtype == DType::kFloat32) {
    cpu::gemm(false, c.trans_w, c.M, c.N, c.K, 1.0f, A, c.K, static_cast<const float*>(c.W.data),
              c.ldw, c.beta, c.out, c.N);
  } else if (c.W.dtype == DType::kBFloat16 && cpu::gemm_bf16_native()) {
    auto* a16 = static_cast<BFloat16*>(scratch.staged_a);
    cpu::to_bf16(a16, A, c.M * c.K);
    cpu::gemm_bf16(false, c.trans_w, c.M, c.N, c.K, a16, c.K,
                   static_cast<const BFloat16*>(c.W.data), c.ldw, c.beta, c.out, c.N);
  } else {
    cpu::gemm_widen_b(false, c.trans_w, c.M, c.N, c.K, A, c.K, c.W.data, c.W.dtype, c.ldw, c.beta,
                      c.out, c.N);
  }
}

void CpuKernels::grad_gemm_now(const GradGemm& c, const GemmScratch& scratch) {
  const std::int64_t M = c.M, N = c.N, K = c.K, lda = c.lda;
  // bf16 parameters with native kernels: both activations rounded to bf16 (as autocast does).
  const bool bf16 = c.param_dtype == DType::kBFloat16 && cpu::gemm_bf16_native();
  BFloat16 *a16 = nullptr, *b16 = nullptr;
  if (bf16) {
    a16 = static_cast<BFloat16*>(scratch.staged_a);
    b16 = static_cast<BFloat16*>(scratch.staged_b);
    if (!c.a_is_staged) cpu::to_bf16(a16, c.A, K * lda);
    cpu::to_bf16(b16, c.B, K * N);
  }
  auto product = [&](std::int64_t m0, std::int64_t rows, float beta, float* C) {
    if (bf16)
      cpu::gemm_bf16(true, false, rows, N, K, a16 + m0, lda, b16, N, beta, C, N);
    else
      cpu::gemm(true, false, rows, N, K, 1.0f, c.A + m0, lda, c.B, N, beta, C, N);
  };
  if (c.G.dtype == DType::kFloat32) {
    product(0, M, 1.0f, static_cast<float*>(c.G.data));
    return;
  }
  // 16-bit gradients: fp32 products of a bounded number of rows, each added with one rounding.
  const std::int64_t rows = std::max<std::int64_t>(1, scratch.staged_grad_elements / N);
  for (std::int64_t m0 = 0; m0 < M; m0 += rows) {
    const std::int64_t count = std::min(rows, M - m0);
    product(m0, count, 0.0f, scratch.staged_grad);
    cpu::accumulate(static_cast<char*>(c.G.data) + m0 * N * std::int64_t(size_of(c.G.dtype)),
                    c.G.dtype, scratch.staged_grad, count * N);
  }
}

void CpuKernels::linear_forward_now(const LinearForward& c, const GemmScratch& scratch) {
  const float* inp = c.inp.fp32("GPT-2 CPU linear_forward (inp)");
  float* out = c.out.fp32("GPT-2 CPU linear_forward (out)");
  const bool out_in = c.weight_layout == WeightLayout::kOutIn;
  if (c.weight.dtype == DType::kFloat32 && !out_in) {
    cpu::matmul_forward(out, inp, static_cast<const float*>(c.weight.data), c.bias, c.N, c.C, c.OC);
  } else {
    if (c.bias != nullptr) {
#pragma omp parallel for schedule(static)
      for (std::int64_t row = 0; row < c.N; ++row)
        std::memcpy(out + row * c.OC, c.bias, c.OC * sizeof(float));
    }
    weight_gemm_now({out_in, c.N, c.OC, c.C, inp, c.weight, out_in ? c.C : c.OC,
                     c.bias != nullptr ? 1.0f : 0.0f, out},
                    scratch);
  }
  if (c.gelu_out.data != nullptr)
    cpu::gelu_forward(c.gelu_out.fp32("GPT-2 CPU linear_forward (gelu_out)"), out, c.N * c.OC);
}

// GELU's backward in place on dout (LinearBackward's contract), then the linear's.
void CpuKernels::linear_backward_now(const LinearBackward& c, const GemmScratch& scratch) {
  const float* inp = c.inp.fp32("GPT-2 CPU linear_backward (inp)");
  if (c.gelu_preactivation != nullptr)
    cpu::gelu_backward(c.dout, c.gelu_preactivation, c.dout, c.N * c.OC);
  if (c.weight_layout == WeightLayout::kOutIn) {
    // dinp (N, C) = g · W (W stored (OC, C)); dweight (OC, C) += gᵀ · inp, whose A operand g the
    // first product staged already (16-bit parameters).
    if (c.dinp != nullptr)
      weight_gemm_now({false, c.N, c.C, c.OC, c.dout, c.weight, c.C, 0.0f, c.dinp}, scratch);
    grad_gemm_now({c.OC, c.C, c.N, c.dout, c.OC, inp, c.dweight, c.weight.dtype, c.dinp != nullptr},
                  scratch);
    if (c.dbias != nullptr) cpu::bias_backward(c.dbias, c.dout, c.N, c.OC);
  } else if (c.weight.dtype == DType::kFloat32 && c.dweight.dtype == DType::kFloat32) {
    cpu::matmul_backward(c.dinp, static_cast<float*>(c.dweight.data), c.dbias, c.dout, inp,
                         static_cast<const float*>(c.weight.data), c.N, c.C, c.OC);
  } else {
    if (c.dinp != nullptr)
      weight_gemm_now({true, c.N, c.C, c.OC, c.dout, c.weight, c.OC, 0.0f, c.dinp}, scratch);
    grad_gemm_now({c.C, c.OC, c.N, inp, c.C, c.dout, c.dweight, c.weight.dtype}, scratch);
    if (c.dbias != nullptr) cpu::bias_backward(c.dbias, c.dout, c.N, c.OC);
  }
}

}  // namespace

std::unique_ptr<Kernels> make_cpu_kernels(DeviceContext& context) {
  return std::make_unique<CpuKernels>(context.model_runs_on_host() || context.planning());
}

}  // namespace zero::gpt2
