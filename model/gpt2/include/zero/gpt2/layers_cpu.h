// GPT-2 layer kernels on CPU (OpenMP-parallel, GEMMs through OpenBLAS or Eigen). Plain pointers
// and counts; row-major; N = B·T rows. Each has a scalar twin in reference_kernels.h (the test
// oracle). Backward kernels accumulate (+=) into parameter gradients; the input gradient
// convention is stated per kernel.
#pragma once

#include <cstdint>
#include <string>

#include "zero/core/dtype.h"
#include "zero/gpt2/cached_attention.h"
#include "zero/gpt2/rng.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2::cpu {

enum class GemmBackend { kOpenBlas, kEigen };
// The GEMM backend of this process, chosen at first use: ZERO_GEMM_BACKEND=openblas|eigen when
// set; else OpenBLAS (when built with it) unless it runs generic pre-AVX2 kernels on an AVX2 CPU
// (OpenBLAS 0.3.21 does not recognise recent Xeons and falls back to "Prescott"; setting
// OPENBLAS_CORETYPE=SkylakeX or Haswell fixes that), in which case Eigen's own GEMM.
GemmBackend gemm_backend_kind();

// C (M, N) = alpha · op(A) · op(B) + beta · C, row-major, op = transpose when trans_x.
// lda/ldb/ldc are row strides of the stored matrices.
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc);
// Which backend and kernels run: "OpenBLAS (...; core SkylakeX, 2 threads)" or "Eigen 3.4.0 own
// GEMM ...".
std::string gemm_backend();

// bf16 GEMM: C (M, N, fp32) = op(A) · op(B) + beta · C with A, B bf16, products and sums in fp32;
// beta is 0 or 1 (anything else throws zero::Error). Row-major, strides as in gemm(). Runs
// oneDNN's matmul (AMX or AVX512-BF16 kernels where the CPU has them) when the build has oneDNN
// (libdnnl-dev) and ZERO_GEMM_BF16_BACKEND is not "widen"; otherwise widens A and B to fp32 and
// calls gemm() (same result up to fp32 summation order). Debian's OpenBLAS 0.3.21 declares
// cblas_sbgemm but is built without it (BUILD_BFLOAT16 off), so OpenBLAS is not a choice here.
void gemm_bf16(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               const BFloat16* A, std::int64_t lda, const BFloat16* B, std::int64_t ldb, float beta,
               float* C, std::int64_t ldc);
// True when gemm_bf16 runs native bf16 kernels (oneDNN), false when it widens to fp32.
bool gemm_bf16_native();
// "oneDNN 2.6.3 matmul (kernels seen: brg:avx512_core_amx_bf16)" or "widened to fp32 (...)".
std::string gemm_bf16_backend();

// C = op(A) · op(B) + beta · C with A fp32 and B 16-bit (bf16 or fp16, `b_dtype`): B is widened
// to fp32 in slices of at most a few MB and each slice goes through gemm(); fp32 arithmetic.
void gemm_widen_b(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                  const float* A, std::int64_t lda, const void* B, DType b_dtype, std::int64_t ldb,
                  float beta, float* C, std::int64_t ldc);

// Bulk conversions (OpenMP), rounding to nearest even exactly as zero::to_bf16 / zero::to_fp16.
void to_bf16(BFloat16* out, const float* in, std::int64_t n);
// out (fp32) = in (of `dtype`, any of fp32/bf16/fp16).
void widen(float* out, const void* in, DType dtype, std::int64_t n);
// out (of `dtype`) += in (fp32): each element widened, added in fp32 and rounded once.
void accumulate(void* out, DType dtype, const float* in, std::int64_t n);

// out (B, T, C) = dropout(wte[tokens[b, t]] + wpe[t]); wpe null: no learned positions (the Llama
// family's RoPE rotates q and k in the attention instead), and dwpe null in the backward.
void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout);
// dwte[tokens] += mask · dout, dwpe[t] += mask · dout (deterministic order).
void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout);

// out (N, C) = (inp - mean) · rstd · weight + bias; mean, rstd (N) kept for backward.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C, float epsilon);
// dinp += ..., dweight += ..., dbias += ...
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C);

// out (N, OC) = inp (N, C) · weight (C, OC) + bias (OC) (bias may be null).
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC);
// dinp (N, C) = dout · weightᵀ (overwritten; skipped when null), dweight += inpᵀ · dout,
// dbias += column sums of dout (skipped when null).
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC);
// dbias (OC) += column sums of dout (N, OC): matmul_backward's bias part.
void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t OC);

// Causal self-attention on qkv (B, T, 3C) = [q | k | v], heads of HS = C / NH:
// att (B, NH, T, T) = softmax(q·kᵀ/√HS, causal) (kept, before dropout; entries past t are 0),
// out (B, T, C) = dropout(att) · v. Attention dropout element of row (b, t) is h·T + t2.
void attention_forward(float* out, float* att, const float* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout);
// dqkv (B, T, 3C) overwritten. datt (B, NH, T, T) is scratch.
void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                        const float* att, std::int64_t B, std::int64_t T, std::int64_t C,
                        std::int64_t NH, const DropoutSite& dropout);

// What flash_attention_* compute their products in, and where their scratch lives.
struct FlashAttentionScratch {
  // true: the products on gemm_bf16 (fp32 accumulation; meant where gemm_bf16_native()), as
  // PyTorch's bf16 SDPA on CPU: q, k, v and dout rounded to bf16 once, the probabilities and the
  // scores' gradient rounded to bf16 before the products that read them; scores, softmax,
  // log-sum-exp and row sums in fp32. false: every product in fp32 through gemm().
  bool bf16 = false;
  // bf16 only: where q, k, v (3·B·T·C elements) and the backward's dout (B·T·C) are rounded;
  // null: the kernels allocate them.
  BFloat16* staged_qkv = nullptr;
  BFloat16* staged_dout = nullptr;
  // Each thread's blocks of scores, flash_attention_thread_bytes(T, bf16) a thread, any alignment:
  // the kernels run on at most blocks_bytes / flash_attention_blocks_bytes(T, bf16, 1) threads.
  // Null: the kernels allocate them for omp_get_max_threads() threads.
  void* blocks = nullptr;
  std::int64_t blocks_bytes = 0;
};
// Bytes of FlashAttentionScratch::blocks for `threads` threads (64-byte alignment included).
std::int64_t flash_attention_blocks_bytes(std::int64_t T, bool bf16, std::int64_t threads);

// The same attention keeping lse (B, NH, T) = log Σ_{t2 ≤ t} exp(q·k_t2/√HS) per (b, h, t) row
// instead of the probabilities (attention_flash_cpu.cc): out as attention_forward's, in blocks of
// query rows through gemm() or gemm_bf16(); the backward recomputes the probabilities from lse.
// dqkv (B, T, 3C) overwritten. Dropout masks as attention_forward's. Results do not depend on
// the number of threads.
void flash_attention_forward(float* out, float* lse, const float* qkv, std::int64_t B,
                             std::int64_t T, std::int64_t C, std::int64_t NH,
                             const DropoutSite& dropout, const FlashAttentionScratch& scratch = {});
void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse,
                              std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                              const DropoutSite& dropout,
                              const FlashAttentionScratch& scratch = {});

// Attention over a KV cache (cached_attention.h), OpenMP over (query row, head): scores, their
// softmax and the weighted sum of the values in attention_forward's order of operations.
void cached_attention_forward(const CachedAttention& call);

// GELU, tanh approximation (Hugging Face gelu_new). dinp = dout · gelu'(inp) (may alias dout).
void gelu_forward(float* out, const float* inp, std::int64_t n);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n);

// out (B, T, C) = residual + dropout(inp); rows (b, t) key the mask, elements are channels.
void residual_dropout_forward(float* out, const float* residual, const float* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout);
// dinp (B, T, C) = mask · scale · dout (overwritten).
void dropout_backward(float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                      std::int64_t C, const DropoutSite& dropout);

// Cross-entropy over the first V of Vp logit columns (N, Vp). For each row with target in
// [0, V): losses[row] = logsumexp - logit[target]; rows with target == ignore_index (or any
// negative) get loss 0. logsumexp (N) kept for backward. Returns the number of counted rows.
// label_smoothing ε: losses[row] = (1 - ε)·(logsumexp - logit[target]) + ε·(logsumexp - mean
// of the row's V logits), torch's CrossEntropyLoss(label_smoothing=ε) per row.
std::int64_t crossentropy_forward(float* losses, float* logsumexp, const float* logits,
                                  const int* targets, std::int64_t N, std::int64_t V,
                                  std::int64_t Vp, float label_smoothing = 0.0f);
// In place: logits (N, Vp) becomes dlogits = scale · (softmax - (1 - ε)·onehot(target) - ε / V)
// for counted rows, 0 for ignored rows and for columns past V (ε = label_smoothing).
void crossentropy_backward(float* logits, const float* logsumexp, const int* targets,
                           std::int64_t N, std::int64_t V, std::int64_t Vp, float scale,
                           float label_smoothing = 0.0f);

// ---- the Llama family's (llama_layers_cpu.cc) ----

// RMSNorm, transformers' LlamaRMSNorm in fp32: rstd (N) = 1 / sqrt(mean over the row of inp² +
// epsilon), out (N, C) = (inp · rstd) · weight; rstd kept for the backward.
void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N,
                     std::int64_t C, float epsilon);
// dinp += rstd · (dout ⊙ weight) − inp · rstd³ · mean(dout ⊙ weight ⊙ inp) (dinp is the residual
// stream's gradient, as layernorm_backward's), dweight += column sums of dout ⊙ inp · rstd.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C);

// Rotary embedding in transformers' rotate-half layout, in place on the heads `layout` names, each
// head's channels i < h = head_dim / 2 paired with i + h, at position p = position_offset + t:
//   x[i] ← x[i]·cos(p·f_i) − x[i + h]·sin(p·f_i),  x[i + h] ← x[i + h]·cos(p·f_i) + x[i]·sin(p·f_i)
// with cos and sin from `table` (rope_table, at least position_offset + T positions).
void rope_forward(float* x, const float* table, const RopeLayout& layout);
// Its backward, in place: dx ← the rotation by −p·f_i of dx (the forward's transpose).
void rope_backward(float* dx, const float* table, const RopeLayout& layout);

// SwiGLU on the MLP's fused gate/up product: inp (N, 2H), each row [gate (H) | up (H)]; out (N, H)
// = silu(gate) · up, silu(g) = g / (1 + exp(-g)).
void swiglu_forward(float* out, const float* inp, std::int64_t N, std::int64_t H);
// Grouped-query attention's head repetition and its backward (kernels.h repeat_kv_*): heads and
// qkv of `element_bytes` bytes per element (a copy needs no arithmetic); dqkv overwritten.
void repeat_kv_forward(void* heads, const void* qkv, std::size_t element_bytes, std::int64_t N,
                       std::int64_t NH, std::int64_t KVH, std::int64_t HS);
void repeat_kv_backward(float* dqkv, const float* dheads, std::int64_t N, std::int64_t NH,
                        std::int64_t KVH, std::int64_t HS);
// dinp (N, 2H) = [dout · up · silu'(gate) | dout · silu(gate)] (overwritten).
void swiglu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N,
                     std::int64_t H);

}  // namespace zero::gpt2::cpu
