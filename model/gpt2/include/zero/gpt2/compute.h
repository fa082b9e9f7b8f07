// GPT2Compute: the activations of one micro-batch and the per-unit forward and backward the
// engine (or GPT2Model) calls between gathering and releasing each unit's parameters.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/flat_buffer.h"
#include "zero/core/stream.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

// Where a block's tensors lie in its unit, and their views (compute_internal.h).
struct BlockLayout;
struct BlockParams;
struct BlockGrads;

struct ComputeOptions {
  // Keep only each block's output; recompute the block's internals in its backward: every block.
  bool activation_checkpointing = false;
  // Without activation_checkpointing: recompute only the first `recompute_blocks` blocks
  // (0 <= k <= L; the constructor throws zero::Error otherwise), the ones whose activations would
  // live longest (kept from the first forward to the last backward). With 0 < k < L they cost no
  // slot of their own: each is recomputed into block L-1's internals, dead once L-1's backward has
  // run, so they save k blocks' internals exactly (recomputed_blocks()).
  int recompute_blocks = 0;
  // Storage of the parameters every call passes (fp32, bf16 or fp16). Activations and the
  // arithmetic stay fp32; with bf16 the GEMMs take bf16 inputs (activations rounded to bf16,
  // fp32 accumulation) through gemm_bf16 when it runs native kernels; with fp16 (or bf16 without
  // them) the 16-bit weights are widened to fp32 slice by slice. 16-bit storage adds scratch
  // (ActivationPlan::workspace_bytes).
  DType param_dtype = DType::kFloat32;
  // The device whose kernels run the model: what the attention keeps (attention_layout) and so
  // the activation layout. GPT2Compute sets it from its context; a plan (a planning context runs
  // no kernels) says where the run will run.
  DeviceKind device = DeviceKind::kCpu;
  // ε of the cross-entropy losses, the LM head's and a classifier head's (Kernels::
  // smoothed_crossentropy_forward; Hugging Face's --label_smoothing_factor). Not 0 needs kernels
  // that support it (the CPU's); the constructor throws zero::Error otherwise.
  float label_smoothing = 0.0f;
};

// The blocks `options` recompute, the first ones: L with activation_checkpointing, else
// options.recompute_blocks.
int recomputed_blocks(const GPT2Config& config, const ComputeOptions& options);

// One unit's parameters (read) or gradients (accumulated, +=): a pointer to the unit's flat
// elements (layout of gpt2_units(config)[u].tensors) and their dtype. A float pointer converts
// implicitly (fp32). Gradients are fp32 or the parameters' dtype: 16-bit gradients are computed in
// fp32 and added with one rounding per element per call.
struct ConstUnitData {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  ConstUnitData(const float* fp32) : data(fp32) {}
  ConstUnitData(const void* elements, DType element_dtype) : data(elements), dtype(element_dtype) {}
};
struct UnitData {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  UnitData(float* fp32) : data(fp32) {}
  UnitData(void* elements, DType element_dtype) : data(elements), dtype(element_dtype) {}
};

// What keys dropout for one micro-step. Masks are pure functions of (seed, step, site, global
// sample index = sample_offset + b, position t, element), so a run's numbers do not depend on
// the world size, the stage or the thread count. training = false turns dropout off.
struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::int64_t sample_offset = 0;
  bool training = false;
};

// Bytes one micro-batch (B, T) keeps, for the planner. kept_bytes[u] is what unit u's forward
// keeps until its backward (the head's ln_f output, logits and per-row losses count under the
// ln_f unit; a recomputed block keeps its output only); recompute_bytes is the one block's
// internals shared by all blocks when every block is recomputed (0 otherwise: some recompute into
// the last block's); workspace_bytes is scratch live during forward/backward only.
struct ActivationPlan {
  std::vector<std::size_t> kept_bytes;
  int recomputed_blocks = 0;  // the first blocks recomputed (recomputed_blocks())
  std::size_t recompute_bytes = 0;
  std::size_t workspace_bytes = 0;
  std::size_t total_bytes() const;
};

// One micro-batch's forward and backward over parameter units, on one rank's DeviceContext:
// every operation goes through the context's model kernels (make_kernels, kernels.h) on its
// compute stream. All activations are one allocation (MemoryCategory::kActivations), all scratch
// another (kWorkspace), each with named views, from the context's device allocator (in its ledger)
// or the allocator given. Parameters arrive per unit as the unit's flat elements in
// options.param_dtype (layout of gpt2_units(config)[u].tensors, offset 0 = first tensor), in the
// context's device space; gradients likewise (fp32 or the parameters' dtype), accumulated (+=).
// The fp32 path is the reference: 16-bit storage changes nothing in it.
//
// Where the context's model runs on the host (model_runs_on_host(): today's CPU backend) every
// call computes on the calling thread and returns with its results written. Otherwise (CUDA)
// every call enqueues on context.compute_stream() and returns: set_inputs uploads the tokens
// through pinned host memory (kHostPinned) on the compute stream, forward_head enqueues the
// per-row losses' copy to pinned memory, and loss() waits for that copy (the only host wait of
// a step, where the caller needs the value); logits(), losses(), final_hidden_input() and
// final_hidden_grad() are then device memory, valid in the compute stream's order.
//
// Call order for one micro-step (what the engine does, gathering each unit around its call):
//   set_inputs(...)
//   forward_embeddings(P[emb]); for l: forward_block(l, P[h.l]); forward_head(P[ln_f], P[emb])
//   backward_head(P[ln_f], P[emb], G[ln_f], G[emb]); for l = L-1..0: backward_block(l, P[h.l],
//   G[h.l]); backward_embeddings(P[emb], G[emb])
// The head uses the tied wte, so the embeddings unit is needed again there (gather it twice, or
// keep it resident); its gradient is complete only after backward_embeddings.
// With a planning context (the planner's) or a planning allocator the buffers are recorded, not
// allocated, and every forward/backward call returns at once (loss() stays 0): the model runs its
// allocation sequence, proportional to the number of tensors, not their size.
class GPT2Compute {
 public:
  // Activations and scratch from context.allocator(MemorySpace::kDevice).
  GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
              DeviceContext& context, ComputeOptions options = {});
  // Activations and scratch from `activations` (a ledger of their own), which must allocate
  // memory the context's kernels address: its device space, or any host memory where the model
  // runs on the host. The context (and the allocator) must outlive this object.
  GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
              DeviceContext& context, Allocator& activations, ComputeOptions options = {});
  ~GPT2Compute();
  GPT2Compute(const GPT2Compute&) = delete;
  GPT2Compute& operator=(const GPT2Compute&) = delete;

  static ActivationPlan plan(const GPT2Config& config, std::int64_t batch_size,
                             std::int64_t seq_len, ComputeOptions options = {});

  // tokens (B, T) in [0, V); targets (B, T) in [0, V) or -100 (ignored; any negative is
  // ignored), or empty for no loss. Copies both (host memory; uploaded to the device when the
  // model does not run on the host). Throws zero::Error for sizes or ids out of range.
  void set_inputs(std::span<const int> tokens, std::span<const int> targets,
                  DropoutKey dropout = {});

  void forward_embeddings(ConstUnitData params);
  void forward_block(int layer, ConstUnitData params);
  // Final layer norm, tied logits and (with targets) the mean cross-entropy over counted targets.
  // embedding_params is the unit holding the head's weight: the embeddings when tied; an untied
  // head (the Llama family's lm_head.weight) is in the final unit, passed again.
  void forward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params);

  // loss_scale multiplies d(sum of per-row losses); the default (negative) means 1 / counted
  // targets, i.e. the gradient of loss(). A driver averaging over ranks or micro-batches passes
  // its own. May overwrite the logits with dlogits.
  void backward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params,
                     UnitData final_norm_grads, UnitData embedding_grads, float loss_scale = -1.0f);
  void backward_block(int layer, ConstUnitData params, UnitData grads);
  void backward_embeddings(ConstUnitData params, UnitData grads);

  // Mean over counted targets; where the model does not run on the host, waits for the copy of
  // the losses forward_head enqueued (the step's one host wait).
  float loss() const;
  std::int64_t num_counted_targets() const { return counted_; }
  // (B, T, Vp), valid after forward_head: logits() where they are fp32 (else zero::Error),
  // logits_data() of logits_dtype() always (bf16 on CUDA with bf16 parameters, kernels.h).
  const float* logits() const;
  const void* logits_data() const;
  DType logits_dtype() const;
  const float* losses() const;  // (B, T) per-row losses
  // The last block's output (B, T, C), ln_f's input; valid after forward_block(L - 1). Another
  // head than the tied LM head (classifier.h) reads it.
  const float* final_hidden_input() const;
  // d(loss)/d(last block's output) (B, T, C), which backward_block(L - 1) reads: another head
  // writes it (every element) in place of backward_head. (Defined in classifier_head.cc.)
  float* final_hidden_grad();
  std::int64_t batch_size() const { return B_; }
  std::int64_t seq_len() const { return T_; }
  const GPT2Config& config() const { return config_; }
  DType param_dtype() const { return options_.param_dtype; }
  float label_smoothing() const { return options_.label_smoothing; }
  // The seam this model computes through (a head of its own, classifier.h, uses it too).
  DeviceContext& context() const { return context_; }
  Kernels& kernels() const { return *kernels_; }
  Stream& stream() const { return context_.compute_stream(); }
  // True when the kernels run on the calling thread (host-readable results at return).
  bool runs_on_host() const { return on_host_; }

 private:
  void check_params(const ConstUnitData& params, const char* what) const;
  void check_grads(const UnitData& grads, const char* what) const;
  // Views of the workspace: the 16-bit GEMMs' staging (none with fp32 parameters) and the
  // attention's library workspace (where attention_layout plans one).
  GemmScratch gemm_scratch() const;
  // The tokens, targets and rows' slots (see unique_tokens_) as the kernels read them: the
  // uploaded device copies, or the host vectors where the model runs on the host.
  const int* kernel_tokens() const;
  const int* kernel_targets() const;
  const int* kernel_slots() const;
  void upload_inputs();
  void finish_loss(const float* losses);
  void forward_block_impl(int layer, const ConstUnitData& params);
  // ln1, ln2 and mlp_act only GEMMs read: kept in gemm_input_dtype() (kernels.h); qkv and atty
  // in attention_io_dtype(). The means are a layer norm's (null with RMSNorm); fch is the MLP's
  // first product (GELU's pre-activation, or SwiGLU's [gate | up]) and mlp_act its activation.
  struct BlockActivations {
    ActivationOut ln1;
    float* ln1_mean;
    float* ln1_rstd;
    ActivationOut qkv;
    float* att;
    ActivationOut atty;
    float* residual2;
    ActivationOut ln2;
    float* ln2_mean;
    float* ln2_rstd;
    float* fch;
    ActivationOut mlp_act;
    float* residual3;
  };
  // The attention's input over NH heads: qkv itself, or (grouped-query attention) the heads
  // repeat_kv_forward writes into the workspace from it.
  Activation attention_heads(const BlockActivations& a);
  void forward_mlp(const BlockActivations& a, const BlockParams& p, DType dtype);
  void backward_mlp(const BlockActivations& a, const BlockParams& p, const BlockGrads& g,
                    DType dtype, DType grad_dtype, float* dmlp_out);
  void backward_attention(int layer, const BlockActivations& a, const BlockParams& p,
                          const BlockGrads& g, DType dtype, DType grad_dtype,
                          float* dattention_out);
  DropoutSite dropout_site(std::uint32_t site, double probability) const;
  const float* block_input(int layer) const;
  // The LM head's weight in the unit forward_head is given: the embeddings' wte, or (untied) the
  // final unit's lm_head.weight after its norm.
  const void* head_weight(const ConstUnitData& unit) const;
  void* head_weight(const UnitData& unit) const;
  // The final norm from its unit (vectors widened into the workspace for 16-bit units).
  Norm final_norm(const ConstUnitData& unit);
  float* activation(const std::string& name) const;
  float* activation_or_null(const std::string& name) const;  // null where the layout has none
  RopeParameters rope_parameters() const;
  // RoPE over q's and k's heads of the qkv rows (NH + KVH heads of HS, rows of (NH + 2·KVH)·HS).
  RopeLayout rope_layout() const;
  // The activation `name`, one only GEMMs read, in gemm_input_dtype().
  ActivationOut gemm_input_activation(const std::string& name) const;
  DType gemm_input_dtype() const;
  // The attention's qkv or atty activation `name`, in attention_io_dtype().
  ActivationOut attention_activation(const std::string& name) const;
  float* workspace(const std::string& name) const;
  // The 16-bit staging slots ("param32", "gradvec32"); null when the parameters are fp32.
  float* workspace_or_null(const std::string& name) const;

  GPT2Config config_;
  std::int64_t B_, T_;
  ComputeOptions options_;
  DeviceContext& context_;
  std::unique_ptr<Kernels> kernels_;
  bool planning_ = false;  // the allocator records without memory: compute nothing
  bool on_host_ = true;    // the kernels run on the calling thread
  FlatLayout activation_layout_, workspace_layout_;
  Buffer activation_buffer_, workspace_buffer_;
  std::vector<BlockActivations> blocks_;
  std::shared_ptr<const BlockLayout> block_layout_;  // where each block tensor lies
  std::vector<int> tokens_, targets_;
  // The distinct tokens of the batch (ascending) and each row's index among them: 16-bit
  // embeddings are widened (and their gradients staged) for these rows only.
  std::vector<int> unique_tokens_, token_slots_;
  DropoutKey dropout_;
  std::int64_t targets_in_range_ = 0;  // targets in [0, V), counted by set_inputs
  // Off the host only: [tokens | targets | slots] (3 N ints) in pinned memory and on the device,
  // the event of their upload, and the per-row losses' pinned copy with its event.
  Buffer pinned_inputs_, device_inputs_, pinned_losses_;
  Event inputs_released_;  // recorded after the last call of a step that reads the inputs
  mutable Event losses_copied_;
  mutable bool loss_pending_ = false;
  mutable float loss_ = 0.0f;
  std::int64_t counted_ = 0;
};

}  // namespace zero::gpt2
