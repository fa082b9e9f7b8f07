// GPT-2 layer kernels on a CUDA device, beside the CPU ones (zero/gpt2/layers_cpu.h, their test
// oracle): the same shapes, conventions and dropout masks (DropoutSite), every pointer device
// memory unless named host, every call asynchronous on `stream`. Activations are fp32 as on the
// CPU; GEMMs take fp32, bf16 or fp16 operands with fp32 accumulation (cuBLASLt). Internal to
// zero::gpt2 (C++17 so nvcc compiles it); errors throw zero::Error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "token_buckets.h"
#include "zero/core/dtype.h"
#include "zero/gpt2/cached_attention.h"
#include "zero/gpt2/rng.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2::cuda {

// Device scratch for one call (parameter-gradient partial sums, encoder_backward's token table):
// `allocate` returns `bytes` of device memory that the caller keeps alive until the call's stream
// has run the work the call enqueued (the CUDA Kernels take it from the context's device allocator
// under `workspace`, so it is in the ledger, and release it with release_after once the call has
// returned). Without `allocate`: cudaMallocAsync/cudaFreeAsync on the stream (kernel tests).
struct Scratch {
  std::function<void*(std::size_t bytes)> allocate;
};

// out (B, T, C) = dropout(wte[tokens[b, t]] + wpe[t]).
void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                     cudaStream_t stream);
// dwte[tokens] += mask · dout, dwpe[t] += mask · dout, each element summed over rows in row order
// (bit for bit the CPU kernel's sums). `host_tokens` (B·T, host memory, the same values as
// `tokens`) groups the rows by token on the host, as llm.c's encoder_backward does.
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* host_tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                      cudaStream_t stream, const Scratch& scratch = {});

// Rows of a (·, C) table, one launch each (rows.cu); `rows` (count indices) is device memory.
// out[i] (C fp32) = table[rows[i]] widened from `dtype` (fp32, bf16, fp16).
void widen_rows(float* out, const void* table, DType dtype, const int* rows, std::int64_t count,
                std::int64_t C, cudaStream_t stream);
// table[rows[i]] (of `dtype`) += in[i] (C fp32), one rounding per element; the rows are distinct.
void accumulate_rows(void* table, DType dtype, const float* in, const int* rows, std::int64_t count,
                     std::int64_t C, cudaStream_t stream);
// fp32 rows: out[i] = in[rows[i]] (gather), or out[rows[i]] = in[i] (`scatter`; rows distinct).
void copy_rows(float* out, const float* in, const std::int64_t* rows, std::int64_t count,
               std::int64_t C, bool scatter, cudaStream_t stream);

// out (N, C, of out_dtype: fp32, bf16 or fp16, rounded once) = (inp - mean) · rstd · weight +
// bias; mean, rstd (N) kept for backward.
void layernorm_forward(void* out, DType out_dtype, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, std::int64_t N, std::int64_t C,
                       float epsilon, cudaStream_t stream);
// The residual and the next layer norm in one pass: residual_out (B, T, C) = residual +
// dropout(inp) (cpu::residual_dropout_forward), then out = layernorm(residual_out) as above.
void residual_layernorm_forward(float* residual_out, void* out, DType out_dtype, float* mean,
                                float* rstd, const float* residual, const float* inp,
                                const float* weight, const float* bias, std::int64_t B,
                                std::int64_t T, std::int64_t C, float epsilon,
                                const DropoutSite& dropout, cudaStream_t stream);
// dinp += ..., dweight += ..., dbias += ... (dinp is the residual stream's gradient, so the
// residual's backward is this accumulation). dweight/dbias are summed over rows in a fixed order
// (deterministic run to run).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C, cudaStream_t stream,
                        const Scratch& scratch = {});

// RMSNorm (the Llama family's; layers.cu, bodies in llama_body.h), cpu::rmsnorm_*'s contract:
// out (N, C, of out_dtype, rounded once) = (inp · rstd) · weight, rstd (N) kept; the residual
// fused as residual_layernorm_forward's; dinp += and dweight += (its column sums in a fixed
// order, deterministic).
void rmsnorm_forward(void* out, DType out_dtype, float* rstd, const float* inp, const float* weight,
                     std::int64_t N, std::int64_t C, float epsilon, cudaStream_t stream);
void residual_rmsnorm_forward(float* residual_out, void* out, DType out_dtype, float* rstd,
                              const float* residual, const float* inp, const float* weight,
                              std::int64_t B, std::int64_t T, std::int64_t C, float epsilon,
                              const DropoutSite& dropout, cudaStream_t stream);
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C,
                      cudaStream_t stream, const Scratch& scratch = {});

// The rotary embedding in place on x (of `dtype`: fp32, bf16 or fp16, computed in fp32 and rounded
// once), cpu::rope_forward's contract, or its backward's (`backward`); `table` device memory
// (rope_table). SwiGLU, cpu::swiglu_*'s: out of out_dtype rounded once; dinp overwritten.
// llama_layers.cu.
void rope(void* x, DType dtype, const float* table, const RopeLayout& layout, bool backward,
          cudaStream_t stream);
void swiglu_forward(void* out, DType out_dtype, const float* inp, std::int64_t N, std::int64_t H,
                    cudaStream_t stream);
void swiglu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N,
                     std::int64_t H, cudaStream_t stream);
// Grouped-query attention's repetition (kernels.h repeat_kv_*): heads and qkv of `dtype`.
void repeat_kv_forward(void* heads, const void* qkv, DType dtype, std::int64_t N, std::int64_t NH,
                       std::int64_t KVH, std::int64_t HS, cudaStream_t stream);
void repeat_kv_backward(float* dqkv, const float* dheads, std::int64_t N, std::int64_t NH,
                        std::int64_t KVH, std::int64_t HS, cudaStream_t stream);

// Generation's attention over a KV cache, cpu::cached_attention_forward's contract (fp32; heads
// up to kCachedAttentionMaxHeadSize channels). cached_attention.cu.
void cached_attention_forward(const CachedAttention& call, cudaStream_t stream);

// out (B, T, C) = residual + dropout(inp) (cpu::residual_dropout_forward); residual may be null
// (out = dropout(inp)).
void residual_dropout_forward(float* out, const float* residual, const float* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                              cudaStream_t stream);
// dinp (B, T, C) = mask · scale · dout (cpu::dropout_backward), overwritten.
void dropout_backward(float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                      std::int64_t C, const DropoutSite& dropout, cudaStream_t stream);

// GELU, tanh approximation: out (of out_dtype, rounded once) = gelu(inp). dinp = dout · gelu'(inp)
// (may alias dout).
void gelu_forward(void* out, DType out_dtype, const float* inp, std::int64_t n,
                  cudaStream_t stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n,
                   cudaStream_t stream);

// Cross-entropy over the first V of Vp logit columns (N, Vp), fused with the softmax: one pass
// per row keeps a running max and sum (no probability is written). losses[row] = logsumexp -
// logit[target] for target in [0, V), 0 for other rows; logsumexp (N) kept for backward. With
// label smoothing ε in [0, 1) (--label_smoothing_factor; else zero::Error) a counted row's loss is
// (1 - ε)·(logsumexp - logit[target]) + ε·(logsumexp - mean of its V logits), as
// cpu::crossentropy_forward. The number of counted rows is the host's to count (it has the
// targets).
void crossentropy_forward(float* losses, float* logsumexp, const float* logits, const int* targets,
                          std::int64_t N, std::int64_t V, std::int64_t Vp, cudaStream_t stream,
                          float label_smoothing = 0.0f);
// The same over logits of `logits_dtype`: fp32, or bf16 (widened exactly; the sums in fp32).
void crossentropy_forward(float* losses, float* logsumexp, const void* logits, DType logits_dtype,
                          const int* targets, std::int64_t N, std::int64_t V, std::int64_t Vp,
                          cudaStream_t stream, float label_smoothing = 0.0f);
// In place: logits (N, Vp) becomes scale · (softmax - (1 - ε)·onehot(target) - ε / V) on the
// first V columns of counted rows, 0 for ignored rows and for columns past V.
void crossentropy_backward(float* logits, const float* logsumexp, const int* targets,
                           std::int64_t N, std::int64_t V, std::int64_t Vp, float scale,
                           cudaStream_t stream, float label_smoothing = 0.0f);
// The same gradient from `logits` (unchanged; fp32, or bf16 widened exactly) into dlogits (N, Vp)
// of `dtype`, each element rounded once: with a 16-bit dtype, the LM head's GEMM operand, and no
// fp32 dlogits written. bf16 logits take a bf16 dlogits.
void crossentropy_backward(void* dlogits, DType dtype, const void* logits, DType logits_dtype,
                           const float* logsumexp, const int* targets, std::int64_t N,
                           std::int64_t V, std::int64_t Vp, float scale, cudaStream_t stream,
                           float label_smoothing = 0.0f);

// Causal self-attention, the CPU kernel's contract for out and dqkv: qkv (B, T, 3C), out (B, T, C),
// dqkv (B, T, 3C) overwritten, the same dropout masks. Tiled (attention_flash.cu, FlashAttention-2
// style, nothing T×T written) for head sizes C / NH up to 128 (kFlashMaxHead): att's first
// B·NH·T floats receive the log-sum-exp of each (b, h, t) row's scores, the rest of att and datt
// is untouched but for datt's first B·NH·T floats (the backward's row terms D = dout · out, from
// the backward's `out`: the forward's out, which the tiled backward requires). Larger heads take
// the plain kernels below, with att holding the probabilities (their backward ignores `out`).
// att and datt are (B, NH, T, T) either way.
void attention_forward(float* out, float* att, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout,
                       cudaStream_t stream);
void attention_backward(float* dqkv, float* datt, const float* dout, const float* out,
                        const float* qkv, const float* att, std::int64_t B, std::int64_t T,
                        std::int64_t C, std::int64_t NH, const DropoutSite& dropout,
                        cudaStream_t stream);
// Whether attention_forward/backward run the tiled kernels for head size HS.
bool attention_is_tiled(std::int64_t HS);
// The plain kernels (attention.cu, the tiled ones' reference): att (B, NH, T, T) softmax kept (0
// past t); datt (B, NH, T, T) scratch.
void attention_plain_forward(float* out, float* att, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             const DropoutSite& dropout, cudaStream_t stream);
void attention_plain_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                              const float* att, std::int64_t B, std::int64_t T, std::int64_t C,
                              std::int64_t NH, const DropoutSite& dropout, cudaStream_t stream);

// cuBLASLt GEMM with CPU gemm()'s row-major contract: C (M, N) = op(A) · op(B) [+ bias] [GELU]
// + beta · C. A and B share `ab_dtype` (fp32, bf16, fp16); C is `c_dtype` (ab_dtype or fp32);
// products and sums in fp32 (fp32 operands: no TF32). bias (N, c_dtype) may be null. With `gelu`, C
// = gelu(product + bias) and, when pre_gelu is not null, pre_gelu (M, N, c_dtype) receives product
// + bias (cuBLASLt's GELU_AUX epilogue) for the backward. beta must be 0 when an epilogue is used;
// pre_gelu needs ldc a multiple of 8.
struct GemmEpilogue {
  const void* bias = nullptr;
  bool gelu = false;
  void* pre_gelu = nullptr;
};
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const void* A,
          std::int64_t lda, const void* B, std::int64_t ldb, DType ab_dtype, float beta, void* C,
          std::int64_t ldc, DType c_dtype, const GemmEpilogue& epilogue, cudaStream_t stream);

// out (N, OC) = inp (N, C) · weight (C, OC) + bias (OC), fp32 (cpu::matmul_forward).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC, cudaStream_t stream);
// dinp (N, C) = dout · weightᵀ (overwritten; skipped when null), dweight += inpᵀ · dout, dbias +=
// column sums of dout (skipped when null), fp32 (cpu::matmul_backward).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC,
                     cudaStream_t stream, const Scratch& scratch = {});
// dbias (OC) += column sums of dout (N, OC), summed over rows in a fixed order.
void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t OC,
                   cudaStream_t stream, const Scratch& scratch = {});
// bias_backward, and in the same pass staged (N, OC) = dout rounded to `dtype` (bf16 or fp16):
// a 16-bit linear's backward reads dout once for its bias gradient and both GEMMs' operand.
void bias_backward_staged(float* dbias, void* staged, DType dtype, const float* dout,
                          std::int64_t N, std::int64_t OC, cudaStream_t stream,
                          const Scratch& scratch = {});
// bias_backward_staged of g = dout ⊙ gelu'(preactivation) (N, OC), GELU's backward in the same
// pass: dout and preactivation read once, g summed in fp32 into dbias and rounded into staged, no
// fp32 g written (the backward of a linear whose forward ran the GELU epilogue).
void gelu_bias_backward_staged(float* dbias, void* staged, DType dtype, const float* dout,
                               const float* preactivation, std::int64_t N, std::int64_t OC,
                               cudaStream_t stream, const Scratch& scratch = {});

// The column-major problem gemm() hands cuBLASLt for its row-major call: Cᵀ (N, M) =
// op(B)ᵀ · op(A)ᵀ, B's storage first. rows/cols/ld describe each stored matrix as cuBLASLt's
// layouts do; *_transposed are its TRANSA/TRANSB. Host logic, tested without a device.
struct LtProblem {
  bool first_transposed, second_transposed;
  std::int64_t first_rows, first_cols, first_ld;     // B's storage
  std::int64_t second_rows, second_cols, second_ld;  // A's storage
  std::int64_t output_rows, output_cols, output_ld;  // C's storage
};
LtProblem lt_problem(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                     std::int64_t lda, std::int64_t ldb, std::int64_t ldc);

// How many cuBLASLt problems (shape, dtypes, epilogue, operand alignments, device) gemm() has
// planned: layouts and algorithm are cached per problem, for the process's life.
std::size_t gemm_plans_cached();

// "cuBLASLt 13.0.0": the library this process runs.
const char* cublaslt_version();

}  // namespace zero::gpt2::cuda
