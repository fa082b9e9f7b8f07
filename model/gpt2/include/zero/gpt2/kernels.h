// The model's kernel seam: every operation GPT-2 (GPT2Compute, ClassifierHead) runs on its
// activations, behind one interface with CPU and CUDA implementations as peers, chosen in one
// place (make_kernels) from the rank's DeviceContext, as the engine's operations are
// (zero/core/device_context.h; ggml's ggml_backend_i is the model).
//   cpu   the kernels of layers_cpu.h (the oracle); on the calling thread when the context's
//         model_runs_on_host() (today's CPU backend), else submitted to the stream
//   cuda  the kernels of src/cuda/ (layers.cu, attention.cu, cuBLASLt), enqueued on the stream's
//         cudaStream_t; compiled only in a build with CUDA
// Both implement the same fusion boundaries (a GEMM with its bias and GELU epilogues, residual +
// norm with a layer norm or RMSNorm, softmax + cross-entropy), so a model written against this
// header runs the same sequence of operations on either. Pointers are memory of the context's
// device space (host memory on the CPU backend) unless named host_*; counts are elements;
// row-major; N = B·T rows. Every call is asynchronous on `stream` (the context's compute stream): a
// pointer must stay valid until the stream has run the call. Backward kernels accumulate (+=) into
// parameter gradients.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/stream.h"
#include "zero/gpt2/cached_attention.h"
#include "zero/gpt2/layer_kinds.h"
#include "zero/gpt2/rng.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2 {

// A parameter matrix in the parameters' dtype (fp32, bf16, fp16), and a gradient one (fp32 or
// the parameters' dtype; 16-bit gradients get one rounding per element per call).
struct Matrix {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
};
struct GradMatrix {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
};

// An activation a kernel reads (Activation) or writes (ActivationOut): fp32, or 16-bit where
// gemm_input_dtype() keeps the activations only GEMMs read (layer norm outputs, GELU's output) in
// the GEMMs' operand dtype, so no pass rounds them again before each product. A float pointer
// converts implicitly (fp32); a kernel that computes in fp32 only takes fp32(what), which throws
// zero::Error naming `what` for a 16-bit activation.
struct Activation {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  Activation() = default;
  Activation(const float* fp32) : data(fp32) {}
  Activation(const void* elements, DType element_dtype) : data(elements), dtype(element_dtype) {}
  const float* fp32(std::string_view what) const;
};
struct ActivationOut {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  ActivationOut() = default;
  ActivationOut(float* fp32) : data(fp32) {}
  ActivationOut(void* elements, DType element_dtype) : data(elements), dtype(element_dtype) {}
  operator Activation() const { return {data, dtype}; }
  float* fp32(std::string_view what) const;
};

// Scratch a GEMM with 16-bit parameters uses (views of GPT2Compute's workspace, unused with fp32
// parameters): activations rounded to 16 bits (staged_a, staged_b: staged_a_elements and
// staged_b_elements 16-bit elements, each at least 4·N·C) and fp32 products of 16-bit gradients
// before they are added (staged_grad, staged_grad_elements floats). 16-bit attention stages its
// operands in staged_a and staged_b too (calls on one stream run in order, so a call may reuse
// what the previous one staged), and gives its library the workspace `library_workspace`
// (library_workspace_bytes: attention_layout's, planned and allocated with the activations; the
// CPU's attention takes it with fp32 parameters too, where the other views are null).
struct GemmScratch {
  void* staged_a = nullptr;
  void* staged_b = nullptr;
  float* staged_grad = nullptr;
  std::int64_t staged_grad_elements = 0;
  std::int64_t staged_a_elements = 0, staged_b_elements = 0;
  void* library_workspace = nullptr;
  std::int64_t library_workspace_bytes = 0;
};

// out (N, OC) = inp (N, C) · weight (C, OC) + bias (OC), or inp · weightᵀ for a weight stored
// (OC, C) (weight_layout kOutIn, nn.Linear's: the Llama family's); with gelu_out, gelu_out =
// gelu(out) as well (the GELU epilogue; out keeps the pre-activation for the backward). bias may be
// null. inp and gelu_out are fp32 or the weight's 16-bit dtype (gemm_input_dtype). out is fp32, or
// the weight's 16-bit dtype where attention_io_dtype() keeps qkv in it (no gelu_out then; CUDA
// only): the GEMM writes it rounded once, adding stored_bias, the same bias in the weight's dtype
// (the unit's own elements, of which `bias` is the widening; cuBLASLt adds a bias of D's type).
struct LinearForward {
  ActivationOut out;
  ActivationOut gelu_out;
  Activation inp;
  Matrix weight;
  const float* bias = nullptr;
  std::int64_t N = 0, C = 0, OC = 0;
  const void* stored_bias = nullptr;
  WeightLayout weight_layout = WeightLayout::kInOut;
};

// With g = dout (N, OC), the gradient of out: dinp (N, C) = g · weightᵀ (overwritten; skipped
// when null); dweight (C, OC) += inpᵀ · g; dbias (OC) += column sums of g (skipped when null);
// with weight_layout kOutIn, dinp = g · weight and dweight (OC, C) += gᵀ · inp. inp
// is the forward's (fp32 or the weight's 16-bit dtype).
// With gelu_preactivation (N, OC, fp32), the forward ran its GELU epilogue (LinearForward::
// gelu_out) and dout is the gradient of gelu(out), gelu_preactivation the forward's out: then g =
// dout ⊙ gelu'(gelu_preactivation): GELU's backward belongs to this linear's backward, applied
// where dout is read. dout must then be the caller's scratch, not read after the call: a kernel
// may overwrite it with g (the CPU kernels, and CUDA with fp32 parameters, apply GELU's backward
// in place before the products; CUDA with 16-bit parameters computes g in the one pass that
// rounds it into the GEMM staging and sums dbias, and leaves dout as it was).
struct LinearBackward {
  float* dinp = nullptr;
  GradMatrix dweight;
  float* dbias = nullptr;
  float* dout = nullptr;
  Activation inp;
  Matrix weight;
  std::int64_t N = 0, C = 0, OC = 0;
  const float* gelu_preactivation = nullptr;
  WeightLayout weight_layout = WeightLayout::kInOut;
};

// out (M, N) = A (M, K) · op(W) + beta · out, W stored (K, N), or (N, K) when trans_w, row
// stride ldw; beta 0 or 1. The tied LM head's products (logits, and d(ln_f) from dlogits).
struct WeightGemm {
  bool trans_w = false;
  std::int64_t M = 0, N = 0, K = 0;
  const float* A = nullptr;
  Matrix W;
  std::int64_t ldw = 0;
  float beta = 0.0f;
  float* out = nullptr;
};

// G (M, N) += Aᵀ · B, A stored (K, M) with row stride lda, B (K, N). a_is_staged: the previous
// weight_gemm on this stream already staged this same A (K · lda elements) in
// GemmScratch::staged_a, so it is not rounded again. param_dtype: the parameters' dtype (the
// precision the product takes its operands in).
struct GradGemm {
  std::int64_t M = 0, N = 0, K = 0;
  const float* A = nullptr;
  std::int64_t lda = 0;
  const float* B = nullptr;
  GradMatrix G;
  DType param_dtype = DType::kFloat32;
  bool a_is_staged = false;
};

// The tied LM head's forward: logits (N, Vp, of logits_dtype: see logits_dtype()) = ln_f (N, C) ·
// wteᵀ, then, when targets is not null, the (label-smoothed) cross-entropy's losses (N) and
// logsumexp (N) over the first V columns (smoothed_crossentropy_forward). Kernels' own version
// makes those two calls and takes fp32 logits only.
struct LogitsForward {
  void* logits = nullptr;
  DType logits_dtype = DType::kFloat32;
  Activation ln_f;
  Matrix wte;
  std::int64_t N = 0, V = 0, Vp = 0, C = 0;
  const int* targets = nullptr;
  float* losses = nullptr;
  float* logsumexp = nullptr;
  float label_smoothing = 0.0f;
};

// The tied LM head's backward from the forward's logits (N, Vp) and logsumexp (N): dlogits =
// scale · the (label-smoothed) cross-entropy's gradient (smoothed_crossentropy_backward), dln (N,
// C) = dlogits · wte (overwritten), dwte (Vp, C) += dlogitsᵀ · ln_f, the products' operands in
// param_dtype as GradGemm's. `logits` may be overwritten with dlogits: Kernels' own version makes
// those three calls, in place, on fp32 logits; CUDA with 16-bit parameters writes dlogits straight
// into its 16-bit GEMM staging instead (no fp32 dlogits, and logits left as they were).
struct LogitsBackward {
  void* logits = nullptr;
  DType logits_dtype = DType::kFloat32;
  const float* logsumexp = nullptr;
  const int* targets = nullptr;
  std::int64_t N = 0, V = 0, Vp = 0, C = 0;
  float scale = 1.0f, label_smoothing = 0.0f;
  Activation ln_f;
  Matrix wte;
  GradMatrix dwte;
  DType param_dtype = DType::kFloat32;
  float* dln = nullptr;
};

// A norm, the one choice a fused residual + norm leaves to the family (norm_forward,
// residual_norm_forward, norm_backward): GPT-2's layer norm (weight and bias) or the Llama family's
// RMSNorm (weight; bias null). epsilon: layer_norm_epsilon, rms_norm_eps.
struct Norm {
  NormKind kind = NormKind::kLayerNorm;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float epsilon = 1e-5f;
};
// What a norm's forward keeps for its backward, N floats each: the rows' mean (a layer norm's;
// unused by RMSNorm, which may pass null) and rstd.
struct NormStatistics {
  float* mean = nullptr;
  float* rstd = nullptr;
};

class Kernels {
 public:
  virtual ~Kernels() = default;
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  virtual std::string_view backend() const = 0;  // "cpu", "cuda"

  // ---- embeddings ----
  // out (B, T, C) = dropout(wte[tokens[b, t]] + wpe[t]); wpe null (and dwpe null in the backward)
  // for a family without learned positions (RoPE's).
  virtual void encoder_forward(Stream& stream, float* out, const int* tokens, const float* wte,
                               const float* wpe, std::int64_t B, std::int64_t T, std::int64_t C,
                               const DropoutSite& dropout) = 0;
  // dwte[tokens] += mask · dout, dwpe[t] += mask · dout, summed in row order. host_tokens holds
  // the values of tokens in host memory (the CUDA kernel groups rows by token on the host).
  virtual void encoder_backward(Stream& stream, float* dwte, float* dwpe, const float* dout,
                                const int* tokens, const int* host_tokens, std::int64_t B,
                                std::int64_t T, std::int64_t C, const DropoutSite& dropout) = 0;

  // ---- layer norm and residual ----
  // out (N, C) = (inp - mean) · rstd · weight + bias; mean, rstd (N) kept for backward. out is
  // fp32 or, where the next GEMM reads it, gemm_input_dtype's (rounded once).
  virtual void layernorm_forward(Stream& stream, ActivationOut out, float* mean, float* rstd,
                                 const float* inp, const float* weight, const float* bias,
                                 std::int64_t N, std::int64_t C, float epsilon) = 0;
  // residual_out (B, T, C) = residual + dropout(inp), then out = layernorm(residual_out).
  virtual void residual_layernorm_forward(Stream& stream, float* residual_out, ActivationOut out,
                                          float* mean, float* rstd, const float* residual,
                                          const float* inp, const float* weight, const float* bias,
                                          std::int64_t B, std::int64_t T, std::int64_t C,
                                          float epsilon, const DropoutSite& dropout) = 0;
  // out (B, T, C) = residual + dropout(inp) (a block's output).
  virtual void residual_forward(Stream& stream, float* out, const float* residual, const float* inp,
                                std::int64_t B, std::int64_t T, std::int64_t C,
                                const DropoutSite& dropout) = 0;
  // dinp += ..., dweight += ..., dbias += ... (dinp is the residual stream's gradient).
  virtual void layernorm_backward(Stream& stream, float* dinp, float* dweight, float* dbias,
                                  const float* dout, const float* inp, const float* weight,
                                  const float* mean, const float* rstd, std::int64_t N,
                                  std::int64_t C) = 0;
  // dinp (B, T, C) = mask · scale · dout (overwritten).
  virtual void dropout_backward(Stream& stream, float* dinp, const float* dout, std::int64_t B,
                                std::int64_t T, std::int64_t C, const DropoutSite& dropout) = 0;

  // ---- RMSNorm (the Llama family's norm; layers_cpu.h's rmsnorm_*) ----
  // out (N, C) = (inp · rstd) · weight, rstd (N) = 1 / sqrt(mean of inp² + epsilon) kept for the
  // backward; out fp32 or gemm_input_dtype's (rounded once), as layernorm_forward's.
  virtual void rmsnorm_forward(Stream& stream, ActivationOut out, float* rstd, const float* inp,
                               const float* weight, std::int64_t N, std::int64_t C,
                               float epsilon) = 0;
  // residual_out (B, T, C) = residual + dropout(inp), then out = rmsnorm(residual_out): layer
  // norm's fusion with the other norm.
  virtual void residual_rmsnorm_forward(Stream& stream, float* residual_out, ActivationOut out,
                                        float* rstd, const float* residual, const float* inp,
                                        const float* weight, std::int64_t B, std::int64_t T,
                                        std::int64_t C, float epsilon,
                                        const DropoutSite& dropout) = 0;
  // dinp += ..., dweight += ... (dinp is the residual stream's gradient).
  virtual void rmsnorm_backward(Stream& stream, float* dinp, float* dweight, const float* dout,
                                const float* inp, const float* weight, const float* rstd,
                                std::int64_t N, std::int64_t C) = 0;

  // ---- a norm chosen by Norm::kind: the layer norm calls above, or the RMSNorm ones ----
  // The same operation for either family: mean is written for a layer norm only; a bias with
  // RMSNorm, or a layer norm without bias or mean, is a zero::Error.
  void norm_forward(Stream& stream, ActivationOut out, NormStatistics kept, const float* inp,
                    const Norm& norm, std::int64_t N, std::int64_t C);
  void residual_norm_forward(Stream& stream, float* residual_out, ActivationOut out,
                             NormStatistics kept, const float* residual, const float* inp,
                             const Norm& norm, std::int64_t B, std::int64_t T, std::int64_t C,
                             const DropoutSite& dropout);
  // dbias: a layer norm's (null for RMSNorm).
  void norm_backward(Stream& stream, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const Norm& norm, const float* mean, const float* rstd,
                     std::int64_t N, std::int64_t C);

  // ---- rotary position embedding (rope.h; layers_cpu.h's rope_*) ----
  // table (rope_table_elements(head_dim, positions) floats, device memory) = rope_table(parameters,
  // positions), computed on the host (transformers' fp32 arithmetic) and copied in stream order:
  // once per shape, by the model that keeps it.
  virtual void rope_table(Stream& stream, float* table, const RopeParameters& parameters,
                          std::int64_t positions) = 0;
  // The rotation of the heads `layout` names, in place on x (fp32; on CUDA also the 16-bit qkv of
  // attention_io_dtype, computed in fp32 and rounded once), at positions position_offset + t
  // from `table` (rope_table of table_positions ≥ position_offset + T positions and the layout's
  // head_dim). rope_backward applies the transposed rotation to the gradient dx in place. A layout
  // past its rows or its table is a zero::Error.
  virtual void rope_forward(Stream& stream, ActivationOut x, const float* table,
                            std::int64_t table_positions, const RopeLayout& layout) = 0;
  virtual void rope_backward(Stream& stream, float* dx, const float* table,
                             std::int64_t table_positions, const RopeLayout& layout) = 0;

  // ---- SwiGLU (layers_cpu.h's swiglu_*) ----
  // The MLP's gate and up projections are one GEMM (linear_forward with OC = 2H: its weight the
  // two matrices side by side) whose output inp (N, 2H) holds [gate | up] per row, so one GEMM,
  // one output and one backward GEMM pair serve both, and this reads it in place:
  // out (N, H) = silu(gate) · up (fp32 or gemm_input_dtype's: the down projection's operand).
  virtual void swiglu_forward(Stream& stream, ActivationOut out, const float* inp, std::int64_t N,
                              std::int64_t H) = 0;
  // dinp (N, 2H) = [dout · up · silu'(gate) | dout · silu(gate)] (overwritten): the fused GEMM's
  // dout.
  virtual void swiglu_backward(Stream& stream, float* dinp, const float* dout, const float* inp,
                               std::int64_t N, std::int64_t H) = 0;

  // ---- grouped-query attention (KVH key/value heads shared by NH query heads, G = NH / KVH) ----
  // heads (N, 3·NH·HS) = [q | k | v] with NH heads each, from qkv (N, (NH + 2·KVH)·HS): q as it
  // is, and key/value head j repeated as heads j·G .. j·G + G - 1 (transformers' repeat_kv), so
  // the attention runs on NH heads. heads and qkv have one dtype (fp32, or attention_io_dtype's).
  virtual void repeat_kv_forward(Stream& stream, ActivationOut heads, Activation qkv,
                                 std::int64_t N, std::int64_t NH, std::int64_t KVH,
                                 std::int64_t HS) = 0;
  // dqkv (N, (NH + 2·KVH)·HS, overwritten) from dheads (N, 3·NH·HS): q's gradient as it is, and
  // each key/value head's the sum of its G heads' gradients, in head order.
  virtual void repeat_kv_backward(Stream& stream, float* dqkv, const float* dheads, std::int64_t N,
                                  std::int64_t NH, std::int64_t KVH, std::int64_t HS) = 0;

  // ---- GEMMs (fp32 activations, parameters in their storage dtype, fp32 accumulation) ----
  virtual void linear_forward(Stream& stream, const LinearForward& call,
                              const GemmScratch& scratch) = 0;
  virtual void linear_backward(Stream& stream, const LinearBackward& call,
                               const GemmScratch& scratch) = 0;
  virtual void weight_gemm(Stream& stream, const WeightGemm& call, const GemmScratch& scratch) = 0;
  virtual void grad_gemm(Stream& stream, const GradGemm& call, const GemmScratch& scratch) = 0;
  // fp32 C (M, N) = op(A) · op(B) + beta · C (layers_cpu.h gemm with alpha 1), beta 0 or 1.
  virtual void gemm(Stream& stream, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N,
                    std::int64_t K, const float* A, std::int64_t lda, const float* B,
                    std::int64_t ldb, float beta, float* C, std::int64_t ldc) = 0;

  // ---- attention ----
  // qkv (B, T, 3C) = [q | k | v]; out (B, T, C); att holds what the backward reads, the
  // implementation's own, attention_layout(device).saved_per_row floats per (b, t): the CPU and
  // CUDA (tiled kernels, heads up to 128 channels) keep only the log-sum-exp of each (b, h, t)
  // row, B·NH·T floats (CUDA's wider heads: its plain kernels, the softmax (B, NH, T, T), 0 past
  // t).
  // `precision` is the dtype the attention's matmuls may round their inputs to, as the GEMMs
  // round theirs to the parameters' dtype (GemmScratch): with bf16, CUDA runs cuDNN's fused SDPA
  // on the tensor cores (src/cuda/attention_cudnn.h; bf16 q, k, v, out and dout, fp32 softmax,
  // when cuDNN takes the shape and dropout is off; ZERO_ATTENTION=tiled|cudnn overrides), the CPU
  // its products on the bf16 GEMM where that is native (q, k, v and dout staged rounded in
  // `scratch`, fp32 softmax and sums: layers_cpu.h FlashAttentionScratch); fp32 and fp16
  // compute in fp32. att is the same layout either way. qkv and out are
  // fp32 or, on CUDA, bf16 (attention_io_dtype: what cuDNN reads and writes, so no pass rounds
  // them); an fp32 one cuDNN takes is staged rounded in `scratch`, a bf16 one the tiled kernels
  // take is widened into scratch of the kernels' own. The CPU kernels take fp32 only.
  virtual void attention_forward(Stream& stream, ActivationOut out, float* att, Activation qkv,
                                 std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                                 const DropoutSite& dropout, DType precision,
                                 const GemmScratch& scratch) = 0;
  // dqkv (B, T, 3C, fp32) overwritten; datt scratch of attention_layout(device).scratch floats
  // (none on the CPU; B·NH·T for CUDA's tiled kernels). dout = d(out); out (B, T, C) is
  // the forward's out for these qkv, att and dropout (of its dtype): CUDA's tiled kernels take
  // each row's D = dout · out from it (one read of out, no forward re-run) and refuse a null
  // `out`; the CPU kernels (which recompute each row's probabilities whole) and CUDA's plain ones
  // ignore it.
  virtual void attention_backward(Stream& stream, float* dqkv, float* datt, const float* dout,
                                  Activation out, Activation qkv, const float* att, std::int64_t B,
                                  std::int64_t T, std::int64_t C, std::int64_t NH,
                                  const DropoutSite& dropout, DType precision,
                                  const GemmScratch& scratch) = 0;
  // Grouped-query attention without repeating k and v: attention_forward / attention_backward
  // over qkv (B, T, C + 2·KVH·HS) in the family's layout (repeat_kv_forward's input: key/value
  // head j serves query heads j·G .. j·G + G - 1), dqkv overwritten in that layout. Where the
  // kernels run the call so (CUDA: cuDNN's SDPA with ZERO_CUDNN_NATIVE_GQA=1, a choice that is a
  // function of the arguments, so a forward and its backward agree) they enqueue it and return
  // true; else they enqueue nothing and return false, and the caller repeats k and v
  // (repeat_kv_*) around attention_forward / attention_backward, the default path.
  virtual bool grouped_attention_forward(Stream& stream, ActivationOut out, float* att,
                                         Activation qkv, std::int64_t B, std::int64_t T,
                                         std::int64_t C, std::int64_t NH, std::int64_t KVH,
                                         const DropoutSite& dropout, DType precision,
                                         const GemmScratch& scratch) {
    return false;
  }
  virtual bool grouped_attention_backward(Stream& stream, float* dqkv, const float* dout,
                                          Activation out, Activation qkv, const float* att,
                                          std::int64_t B, std::int64_t T, std::int64_t C,
                                          std::int64_t NH, std::int64_t KVH,
                                          const DropoutSite& dropout, DType precision,
                                          const GemmScratch& scratch) {
    return false;
  }

  // ---- attention over a KV cache (generation: decoder.h) ----
  // CachedAttention's contract (cached_attention.h): Q query rows over the cached keys and values
  // of one layer, each head reading its key/value head (grouped-query attention in place), fp32.
  // A shape past the cache, heads KVH not dividing NH, or (CUDA) a head wider than
  // kCachedAttentionMaxHeadSize is a zero::Error.
  virtual void cached_attention_forward(Stream& stream, const CachedAttention& call) = 0;

  // ---- softmax + cross-entropy (fused) ----
  // Over the first V of Vp logit columns (N, Vp): losses[row] = logsumexp - logit[target] for
  // target in [0, V), 0 for other rows; logsumexp (N) kept. The host counts the rows (it has the
  // targets).
  virtual void crossentropy_forward(Stream& stream, float* losses, float* logsumexp,
                                    const float* logits, const int* targets, std::int64_t N,
                                    std::int64_t V, std::int64_t Vp) = 0;
  // In place: logits becomes scale · (softmax - onehot(target)) for counted rows, 0 elsewhere.
  virtual void crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                                     const int* targets, std::int64_t N, std::int64_t V,
                                     std::int64_t Vp, float scale) = 0;
  // With label smoothing ε (torch's CrossEntropyLoss(label_smoothing=ε), Hugging Face's
  // LabelSmoother): losses[row] = (1 - ε)·(logsumexp - logit[target]) + ε·(logsumexp - the mean
  // of the row's V logits), and backward scale · (softmax - (1 - ε)·onehot(target) - ε / V).
  // ε = 0 calls the two above (smoothed_crossentropy_*); other ε need supports_label_smoothing()
  // (else zero::Error).
  virtual bool supports_label_smoothing() const { return false; }
  virtual void smoothed_crossentropy_forward(Stream& stream, float* losses, float* logsumexp,
                                             const float* logits, const int* targets,
                                             std::int64_t N, std::int64_t V, std::int64_t Vp,
                                             float label_smoothing);
  virtual void smoothed_crossentropy_backward(Stream& stream, float* logits, const float* logsumexp,
                                              const int* targets, std::int64_t N, std::int64_t V,
                                              std::int64_t Vp, float scale, float label_smoothing);

  // The LM head's forward (LogitsForward) and backward (LogitsBackward).
  virtual void logits_forward(Stream& stream, const LogitsForward& call,
                              const GemmScratch& scratch);
  virtual void logits_backward(Stream& stream, const LogitsBackward& call,
                               const GemmScratch& scratch);

  // ---- storage: 16-bit parameters widened, fp32 gradients added, rows moved ----
  // out (fp32) = in (of `dtype`).
  virtual void widen(Stream& stream, float* out, const void* in, DType dtype, std::int64_t n) = 0;
  // out (of `dtype`) += in (fp32), one rounding per element.
  virtual void accumulate(Stream& stream, void* out, DType dtype, const float* in,
                          std::int64_t n) = 0;
  // out[i] (C fp32) = table[host_rows[i]] widened, i < count.
  virtual void widen_rows(Stream& stream, float* out, const void* table, DType dtype,
                          const int* host_rows, std::int64_t count, std::int64_t C) = 0;
  // table[host_rows[i]] (of `dtype`) += in[i] (C fp32), i < count; the rows are distinct.
  virtual void accumulate_rows(Stream& stream, void* table, DType dtype, const float* in,
                               const int* host_rows, std::int64_t count, std::int64_t C) = 0;
  // out[0, n) = 0.
  virtual void zero(Stream& stream, float* out, std::int64_t n) = 0;
  // out[0, n) = in[0, n) (the buffers do not overlap).
  virtual void copy(Stream& stream, float* out, const float* in, std::int64_t n) = 0;
  // out[i] (C) = in[host_rows[i]] (C), i < count (gather), or out[host_rows[i]] = in[i]
  // (scatter, `scatter` true); host_rows must stay valid until the stream has run the call.
  virtual void copy_rows(Stream& stream, float* out, const float* in, const std::int64_t* host_rows,
                         std::int64_t count, std::int64_t C, bool scatter) = 0;

 protected:
  Kernels() = default;
};

// The kernels for `context`, decided here and nowhere else: CUDA kernels on the CUDA backend,
// the CPU kernels on the CPU backend (on the calling thread when context.model_runs_on_host())
// and on the planning backend (where GPT2Compute calls none: a plan has no memory to compute in).
// The kernels keep a reference to `context`, which must outlive them.
std::unique_ptr<Kernels> make_kernels(DeviceContext& context);

// The widest head CUDA's tiled attention takes (cuda::attention_is_tiled); wider heads run its
// plain kernels.
inline constexpr std::int64_t kCudaTiledAttentionMaxHeadSize = 128;

// The widest head CUDA's cached attention takes (one warp per query head, 8 channels per lane).
inline constexpr std::int64_t kCachedAttentionMaxHeadSize = 256;

// The dtype a device's kernels keep the activations only GEMMs read in (Activation): the layer
// norms' outputs (ln_1, ln_2, ln_f) and GELU's output, each the A operand of its forward GEMM and
// of its weight gradient's. bf16 on CUDA with bf16 parameters, the dtype those GEMMs take their
// operands in, so each is written rounded once (the value the GEMM's staging would have made of
// the fp32 one) and read twice without another pass, at half the bytes; fp32 otherwise (the CPU
// kernels compute in fp32 and read these in fp32).
DType gemm_input_dtype(DeviceKind device, DType param_dtype);

// The dtype a device's kernels keep the attention's input qkv (the qkv GEMM's output) and output
// atty (the attention projection's input) in, decided here for the layout, the planner and the
// passes alike: bf16 where cuDNN's fused SDPA runs the attention on bf16 operands — CUDA with bf16
// parameters, a build with cuDNN's attention, a head of a multiple of 8 channels up to 256 (as
// attention_layout's library workspace), no attention dropout (attn_pdrop 0: cuDNN's dropout
// masks are not the model's) and ZERO_ATTENTION not "tiled" — so the GEMM writes qkv rounded once,
// cuDNN reads it and writes atty in place, and the projection's GEMM reads atty, with no pass
// between them; fp32 otherwise (the tiled kernels compute in fp32, the CPU kernels take fp32).
// Where the kernels end up not running cuDNN on a bf16 layout (cuDNN's library refuses the shape
// on the device) they widen into scratch of their own, correct but slower.
DType attention_io_dtype(DeviceKind device, DType param_dtype, std::int64_t C, std::int64_t NH,
                         double attention_dropout);

// The dtype a device's kernels keep the LM head's logits in (LogitsForward, GPT2Compute's
// "logits" activation): bf16 on CUDA with bf16 parameters (the GEMM writes them as PyTorch's
// autocast does; the cross-entropy reads them widened and sums in fp32), which halves the largest
// activation and its traffic; fp32 otherwise.
DType logits_dtype(DeviceKind device, DType param_dtype);

// What the attention of a device's kernels (make_kernels) keeps between its forward and backward
// (Kernels::attention_forward's att), in floats per (b, t) row, and the scratch its backward takes
// (attention_backward's datt), in floats. CUDA's kernels for heads past
// kCudaTiledAttentionMaxHeadSize channels keep the probabilities: NH·T per row and B·NH·T·T
// scratch. CUDA's tiled kernels keep a log-sum-exp per head, NH per row, and B·NH·T scratch; the
// CPU kernels (layers_cpu.h flash_attention_*) the same log-sum-exps, NH per row rounded up to 16
// floats (64 bytes: kernels.cc says why), and no scratch; their per-thread blocks of 64 query
// rows' scores (3·64·T floats a thread, and 2·64·T bf16 with bf16 products) are
// library_workspace_bytes, for omp_get_max_threads() threads, with any precision. The activation
// layout (GPT2Compute) and so the planner take their sizes from here.
// With `precision` bf16 on CUDA, where this build has cuDNN's attention and cuDNN takes the head
// (a multiple of 8 channels up to 256), library_workspace_bytes is the workspace that attention
// takes, a slot of GPT2Compute's workspace (GemmScratch::library_workspace), so planned: its
// backward's fp32 dq accumulator and per-row sums, 4·B·T·C + 4·B·NH·T + 256 bytes, what cuDNN 9.19
// asked for at GPT-2 124M's shape on an H100 (51,118,336 bytes at B 16, T 1024; RESULTS.md).
struct AttentionLayout {
  std::int64_t saved_per_row = 0;
  std::int64_t scratch = 0;
  std::int64_t library_workspace_bytes = 0;
};
AttentionLayout attention_layout(DeviceKind device, std::int64_t B, std::int64_t T, std::int64_t C,
                                 std::int64_t NH, DType precision = DType::kFloat32);

}  // namespace zero::gpt2
