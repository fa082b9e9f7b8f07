// GPT2Compute's forward and backward passes, unit by unit, through the model's kernel seam
// (kernels.h) on the context's compute stream.
#include <cstring>

#include "compute_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

BlockLayout block_layout(const GPT2Config& config) {
  BlockLayout layout;
  std::int64_t offset = 0;
  for (const TensorSpec& tensor : block_tensors(config)) {
    const std::int64_t elements = static_cast<std::int64_t>(tensor.num_elements());
    const bool vector = tensor.shape.size() == 1;
    const BlockRole role = block_role(config.family, tensor.name);
    if (role != BlockRole::kContinued)
      layout.roles[static_cast<int>(role)] = {offset, vector ? layout.vector_elements : -1};
    if (vector) {
      layout.vectors.push_back({offset, layout.vector_elements, elements});
      layout.vector_elements += elements;
    }
    offset += elements;
  }
  return layout;
}

// fp32 units point into the unit; 16-bit ones have their vectors widened into `staging`
// (BlockLayout::vector_elements floats).
BlockParams block_params(Kernels& kernels, Stream& stream, const ConstUnitData& unit,
                         const GPT2Config& config, const BlockLayout& layout, float* staging) {
  const bool fp32 = unit.dtype == DType::kFloat32;
  const std::size_t element = size_of(unit.dtype);
  const auto* base = static_cast<const char*>(unit.data);
  if (!fp32)
    for (const BlockVector& v : layout.vectors)
      kernels.widen(stream, staging + v.staged, base + v.offset * element, unit.dtype, v.elements);
  auto vector = [&](BlockRole role) -> const float* {
    const BlockSlot& slot = layout[role];
    if (!slot.present()) return nullptr;
    return fp32 ? reinterpret_cast<const float*>(base) + slot.offset : staging + slot.staged;
  };
  auto matrix = [&](BlockRole role) -> const void* {
    const BlockSlot& slot = layout[role];
    return slot.present() ? base + slot.offset * element : nullptr;
  };
  const NormKind norm = family_spec(config.family).norm;
  const float epsilon = static_cast<float>(config.layer_norm_epsilon);
  using enum BlockRole;
  return {{norm, vector(kNorm1Weight), vector(kNorm1Bias), epsilon},
          {norm, vector(kNorm2Weight), vector(kNorm2Bias), epsilon},
          vector(kQkvBias),
          vector(kOutBias),
          vector(kMlpInBias),
          vector(kMlpOutBias),
          matrix(kQkvWeight),
          matrix(kOutWeight),
          matrix(kMlpInWeight),
          matrix(kMlpOutWeight),
          matrix(kQkvBias)};
}

namespace {

// Gradient vectors of 16-bit units go to zeroed fp32 `staging`, added by finish_block_grads.
BlockGrads block_grads(Kernels& kernels, Stream& stream, const UnitData& unit,
                       const BlockLayout& layout, float* staging) {
  const bool fp32 = unit.dtype == DType::kFloat32;
  const std::size_t element = size_of(unit.dtype);
  auto* base = static_cast<char*>(unit.data);
  if (!fp32) kernels.zero(stream, staging, layout.vector_elements);
  auto vector = [&](BlockRole role) -> float* {
    const BlockSlot& slot = layout[role];
    if (!slot.present()) return nullptr;
    return fp32 ? reinterpret_cast<float*>(base) + slot.offset : staging + slot.staged;
  };
  auto matrix = [&](BlockRole role) -> void* {
    const BlockSlot& slot = layout[role];
    return slot.present() ? base + slot.offset * element : nullptr;
  };
  using enum BlockRole;
  return {vector(kNorm1Weight), vector(kNorm1Bias), vector(kNorm2Weight), vector(kNorm2Bias),
          vector(kQkvBias),     vector(kOutBias),   vector(kMlpInBias),   vector(kMlpOutBias),
          matrix(kQkvWeight),   matrix(kOutWeight), matrix(kMlpInWeight), matrix(kMlpOutWeight)};
}

void finish_block_grads(Kernels& kernels, Stream& stream, const UnitData& unit,
                        const BlockLayout& layout, const float* staging) {
  if (unit.dtype == DType::kFloat32) return;
  auto* base = static_cast<char*>(unit.data);
  for (const BlockVector& v : layout.vectors)
    kernels.accumulate(stream, base + v.offset * std::int64_t(size_of(unit.dtype)), unit.dtype,
                       staging + v.staged, v.elements);
}

}  // namespace

// Without learned positions (RoPE's families) the embeddings unit holds wte alone: wpe is null.
void GPT2Compute::forward_embeddings(ConstUnitData params) {
  if (planning_) return;  // a plan has no memory to compute in
  ZERO_CHECK(!tokens_.empty(), "GPT-2 forward: set_inputs was not called");
  check_params(params, "forward_embeddings");
  const std::int64_t C = config_.n_embd, Vp = config_.padded_vocab_size();
  const bool learned = family_spec(config_.family).positions == PositionKind::kLearned;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  Kernels& k = *kernels_;
  if (params.dtype == DType::kFloat32) {
    const auto* wte = static_cast<const float*>(params.data);
    k.encoder_forward(stream(), activation("encoded"), kernel_tokens(), wte,
                      learned ? wte + Vp * C : nullptr, B_, T_, C, dropout);
    return;
  }
  // The batch's distinct wte rows and wpe[0, T) widened to fp32; rows addressed by slot.
  const auto* wte16 = static_cast<const std::uint16_t*>(params.data);
  const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
  float* wte = workspace("param32");
  float* wpe = learned ? wte + U * C : nullptr;
  k.widen_rows(stream(), wte, wte16, params.dtype, unique_tokens_.data(), U, C);
  if (learned) k.widen(stream(), wpe, wte16 + Vp * C, params.dtype, T_ * C);
  k.encoder_forward(stream(), activation("encoded"), kernel_slots(), wte, wpe, B_, T_, C, dropout);
}

void GPT2Compute::forward_block(int layer, ConstUnitData params) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 forward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "forward_block");
  forward_block_impl(layer, params);
}

Activation GPT2Compute::attention_heads(const BlockActivations& a) {
  if (config_.kv_heads() == config_.n_head) return a.qkv;
  const ActivationOut heads{workspace("qkv_heads"), a.qkv.dtype};
  kernels_->repeat_kv_forward(stream(), heads, a.qkv, B_ * T_, config_.n_head, config_.kv_heads(),
                              config_.head_size());
  return heads;
}

// norm → q/k/v (RoPE on q and k) → attention → out projection → residual + norm → MLP →
// residual, each choice the family's (family.h): the norm, the weights' layout, the positions,
// the key/value heads and the MLP.
void GPT2Compute::forward_block_impl(int layer, const ConstUnitData& params) {
  Kernels& k = *kernels_;
  Stream& s = stream();
  const DType dtype = params.dtype;
  const BlockParams p =
      block_params(k, s, params, config_, *block_layout_, workspace_or_null("param32"));
  const BlockActivations& a = blocks_[layer];
  const FamilySpec& family = family_spec(config_.family);
  const BlockWidths widths = block_widths(config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd;
  const WeightLayout weights = family.linear_layout;
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  const GemmScratch scratch = gemm_scratch();
  float* proj = workspace("proj");
  k.norm_forward(s, a.ln1, {a.ln1_mean, a.ln1_rstd}, block_input(layer), p.norm1, N, C);
  k.linear_forward(s,
                   {a.qkv,
                    nullptr,
                    a.ln1,
                    {p.qkv_weight, dtype},
                    p.qkv_bias,
                    N,
                    C,
                    widths.qkv,
                    p.qkv_stored_bias,
                    weights},
                   scratch);
  if (family.positions == PositionKind::kRope)
    k.rope_forward(s, a.qkv, workspace("rope"), T_, rope_layout());
  const DropoutSite attention_dropout = dropout_site(site + 1, config_.attn_pdrop);
  if (config_.kv_heads() == config_.n_head ||
      !k.grouped_attention_forward(s, a.atty, a.att, a.qkv, B_, T_, widths.q, config_.n_head,
                                   config_.kv_heads(), attention_dropout, dtype, scratch))
    k.attention_forward(s, a.atty, a.att, attention_heads(a), B_, T_, widths.q, config_.n_head,
                        attention_dropout, dtype, scratch);
  k.linear_forward(
      s,
      {proj, nullptr, a.atty, {p.out_weight, dtype}, p.out_bias, N, widths.q, C, nullptr, weights},
      scratch);
  k.residual_norm_forward(s, a.residual2, a.ln2, {a.ln2_mean, a.ln2_rstd}, block_input(layer), proj,
                          p.norm2, B_, T_, C, dropout_site(site + 2, config_.resid_pdrop));
  forward_mlp(a, p, dtype);
  k.residual_forward(s, a.residual3, a.residual2, proj, B_, T_, C,
                     dropout_site(site + 3, config_.resid_pdrop));
}

// The MLP into the workspace's "proj": GELU's (the first GEMM's epilogue) or SwiGLU's (one GEMM
// for gate and up, then silu(gate) · up).
void GPT2Compute::forward_mlp(const BlockActivations& a, const BlockParams& p, DType dtype) {
  Kernels& k = *kernels_;
  Stream& s = stream();
  const BlockWidths widths = block_widths(config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = widths.mlp_hidden;
  const WeightLayout weights = family_spec(config_.family).linear_layout;
  const GemmScratch scratch = gemm_scratch();
  const bool gelu = family_spec(config_.family).mlp == MlpKind::kGelu;
  k.linear_forward(s,
                   {a.fch,
                    gelu ? a.mlp_act : ActivationOut{},
                    a.ln2,
                    {p.mlp_in_weight, dtype},
                    p.mlp_in_bias,
                    N,
                    C,
                    widths.mlp_in,
                    nullptr,
                    weights},
                   scratch);
  if (!gelu) k.swiglu_forward(s, a.mlp_act, a.fch, N, H);
  k.linear_forward(s,
                   {workspace("proj"),
                    nullptr,
                    a.mlp_act,
                    {p.mlp_out_weight, dtype},
                    p.mlp_out_bias,
                    N,
                    H,
                    C,
                    nullptr,
                    weights},
                   scratch);
}

const void* GPT2Compute::head_weight(const ConstUnitData& unit) const {
  if (config_.tie_word_embeddings) return unit.data;  // wte leads the embeddings
  return static_cast<const char*>(unit.data) + config_.n_embd * std::int64_t(size_of(unit.dtype));
}
void* GPT2Compute::head_weight(const UnitData& unit) const {
  return const_cast<void*>(head_weight(ConstUnitData{unit.data, unit.dtype}));
}

Norm final_unit_norm(const GPT2Config& config, const float* vectors) {
  const NormKind kind = family_spec(config.family).norm;
  return {kind, vectors, kind == NormKind::kLayerNorm ? vectors + config.n_embd : nullptr,
          static_cast<float>(config.layer_norm_epsilon)};
}
std::int64_t final_norm_elements(const GPT2Config& config) {
  return family_spec(config.family).norm == NormKind::kLayerNorm ? 2 * config.n_embd
                                                                 : config.n_embd;
}

// The final unit's norm, its vectors widened to fp32 for a 16-bit unit.
Norm GPT2Compute::final_norm(const ConstUnitData& unit) {
  const float* vectors = static_cast<const float*>(unit.data);
  if (unit.dtype != DType::kFloat32) {
    float* staged = workspace("param32");
    kernels_->widen(stream(), staged, unit.data, unit.dtype, final_norm_elements(config_));
    vectors = staged;
  }
  return final_unit_norm(config_, vectors);
}

void GPT2Compute::forward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(final_norm_params, "forward_head (final norm)");
  check_params(embedding_params, "forward_head (embeddings)");
  Kernels& k = *kernels_;
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  const ActivationOut ln_f = gemm_input_activation("ln_f");
  k.norm_forward(stream(), ln_f, {activation_or_null("ln_f.mean"), activation("ln_f.rstd")},
                 blocks_.back().residual3, final_norm(final_norm_params), N, C);
  loss_ = 0.0f;
  loss_pending_ = false;
  counted_ = 0;
  const bool targets = !targets_.empty();
  float* losses = activation("losses");
  // logits (N, Vp) = ln_f (N, C) · Wᵀ (wte, or the untied lm_head.weight), and the losses
  k.logits_forward(stream(),
                   {activation("logits"),
                    logits_dtype(),
                    ln_f,
                    {head_weight(embedding_params), embedding_params.dtype},
                    N,
                    config_.vocab_size,
                    Vp,
                    C,
                    targets ? kernel_targets() : nullptr,
                    losses,
                    activation("logsumexp"),
                    options_.label_smoothing},
                   gemm_scratch());
  if (targets) {
    counted_ = targets_in_range_;
    finish_loss(losses);
  }
  if (!on_host_) inputs_released_ = stream().record();
}

void GPT2Compute::backward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params,
                                UnitData final_norm_grads, UnitData embedding_grads,
                                float loss_scale) {
  if (planning_) return;  // a plan has no memory to compute in
  ZERO_CHECK(!targets_.empty(), "GPT-2 backward: no targets were given to set_inputs");
  check_params(final_norm_params, "backward_head (final norm)");
  check_params(embedding_params, "backward_head (embeddings)");
  check_grads(final_norm_grads, "backward_head (final norm)");
  check_grads(embedding_grads, "backward_head (embeddings)");
  Kernels& k = *kernels_;
  Stream& s = stream();
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  const float scale =
      loss_scale >= 0.0f ? loss_scale : (counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f);
  const Norm norm = final_norm(final_norm_params);
  const std::int64_t vectors = final_norm_elements(config_);
  float* dweight = static_cast<float*>(final_norm_grads.data);
  if (final_norm_grads.dtype != DType::kFloat32) {
    dweight = workspace("gradvec32");
    k.zero(s, dweight, vectors);
  }
  float* dbias = norm.kind == NormKind::kLayerNorm ? dweight + C : nullptr;
  float* dln = workspace("dln");
  float* dresidual = workspace("dresidual");
  k.logits_backward(s,
                    {activation("logits"),
                     logits_dtype(),
                     activation("logsumexp"),
                     kernel_targets(),
                     N,
                     config_.vocab_size,
                     Vp,
                     C,
                     scale,
                     options_.label_smoothing,
                     gemm_input_activation("ln_f"),
                     {head_weight(embedding_params), embedding_params.dtype},
                     {head_weight(embedding_grads), embedding_grads.dtype},
                     options_.param_dtype,
                     dln},
                    gemm_scratch());
  k.zero(s, dresidual, N * C);
  k.norm_backward(s, dresidual, dweight, dbias, dln, blocks_.back().residual3, norm,
                  activation_or_null("ln_f.mean"), activation("ln_f.rstd"), N, C);
  if (final_norm_grads.dtype != DType::kFloat32)
    k.accumulate(s, final_norm_grads.data, final_norm_grads.dtype, dweight, vectors);
}

void GPT2Compute::backward_block(int layer, ConstUnitData params, UnitData grads) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 backward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_block");
  check_grads(grads, "backward_block");
  if (layer < recomputed_blocks(config_, options_)) forward_block_impl(layer, params);
  Kernels& k = *kernels_;
  Stream& s = stream();
  const BlockParams p =
      block_params(k, s, params, config_, *block_layout_, workspace_or_null("param32"));
  const BlockGrads g = block_grads(k, s, grads, *block_layout_, workspace_or_null("gradvec32"));
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd;
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  float* dresidual = workspace("dresidual");
  float* dproj = workspace("dproj");
  float* dln = workspace("dln");

  const DropoutSite mlp_dropout = dropout_site(site + 3, config_.resid_pdrop);
  float* dmlp_out = dresidual;
  if (mlp_dropout.active()) {
    k.dropout_backward(s, dproj, dresidual, B_, T_, C, mlp_dropout);
    dmlp_out = dproj;
  }
  backward_mlp(a, p, g, params.dtype, grads.dtype, dmlp_out);
  k.norm_backward(s, dresidual, g.norm2_weight, g.norm2_bias, dln, a.residual2, p.norm2, a.ln2_mean,
                  a.ln2_rstd, N, C);

  const DropoutSite attention_out_dropout = dropout_site(site + 2, config_.resid_pdrop);
  float* dattention_out = dresidual;
  if (attention_out_dropout.active()) {
    k.dropout_backward(s, dproj, dresidual, B_, T_, C, attention_out_dropout);
    dattention_out = dproj;
  }
  backward_attention(layer, a, p, g, params.dtype, grads.dtype, dattention_out);
  k.norm_backward(s, dresidual, g.norm1_weight, g.norm1_bias, dln, block_input(layer), p.norm1,
                  a.ln1_mean, a.ln1_rstd, N, C);
  finish_block_grads(k, s, grads, *block_layout_, workspace_or_null("gradvec32"));
}

// dln = d(ln2) from the MLP output's gradient, and the MLP's weight gradients. GELU: the first
// linear's backward applies GELU's (kernels.h); SwiGLU: its own backward between the two.
void GPT2Compute::backward_mlp(const BlockActivations& a, const BlockParams& p, const BlockGrads& g,
                               DType dtype, DType grad_dtype, float* dmlp_out) {
  Kernels& k = *kernels_;
  Stream& s = stream();
  const BlockWidths widths = block_widths(config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = widths.mlp_hidden;
  const WeightLayout weights = family_spec(config_.family).linear_layout;
  const bool gelu = family_spec(config_.family).mlp == MlpKind::kGelu;
  const GemmScratch scratch = gemm_scratch();
  // d(mlp_act) = dmlp_out · W_outᵀ; GELU's backward follows in fc's linear backward (in place on
  // dhidden), SwiGLU's writes d[gate | up] into dhidden from it.
  float* dact = gelu ? workspace("dhidden") : workspace("dswiglu");
  k.linear_backward(s,
                    {dact,
                     {g.mlp_out_weight, grad_dtype},
                     g.mlp_out_bias,
                     dmlp_out,
                     a.mlp_act,
                     {p.mlp_out_weight, dtype},
                     N,
                     H,
                     C,
                     nullptr,
                     weights},
                    scratch);
  if (!gelu) k.swiglu_backward(s, workspace("dhidden"), dact, a.fch, N, H);
  k.linear_backward(s,
                    {workspace("dln"),
                     {g.mlp_in_weight, grad_dtype},
                     g.mlp_in_bias,
                     workspace("dhidden"),
                     a.ln2,
                     {p.mlp_in_weight, dtype},
                     N,
                     C,
                     widths.mlp_in,
                     gelu ? a.fch : nullptr,
                     weights},
                    scratch);
}

// dln = d(ln1) from the attention output's gradient, and the attention's weight gradients: the
// projection's backward, the attention's (over NH heads; summed back onto the key/value heads),
// RoPE's inverse rotation, then q/k/v's linear backward.
void GPT2Compute::backward_attention(int layer, const BlockActivations& a, const BlockParams& p,
                                     const BlockGrads& g, DType dtype, DType grad_dtype,
                                     float* dattention_out) {
  Kernels& k = *kernels_;
  Stream& s = stream();
  const FamilySpec& family = family_spec(config_.family);
  const BlockWidths widths = block_widths(config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd;
  const WeightLayout weights = family.linear_layout;
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  const GemmScratch scratch = gemm_scratch();
  float* datty = workspace("datty");
  k.linear_backward(s,
                    {datty,
                     {g.out_weight, grad_dtype},
                     g.out_bias,
                     dattention_out,
                     a.atty,
                     {p.out_weight, dtype},
                     N,
                     widths.q,
                     C,
                     nullptr,
                     weights},
                    scratch);
  float* dqkv = workspace("dqkv");
  const bool grouped = config_.kv_heads() != config_.n_head;
  const DropoutSite attention_dropout = dropout_site(site + 1, config_.attn_pdrop);
  if (!grouped || !k.grouped_attention_backward(s, dqkv, datty, a.atty, a.qkv, a.att, B_, T_,
                                                widths.q, config_.n_head, config_.kv_heads(),
                                                attention_dropout, dtype, scratch)) {
    float* dheads = grouped ? workspace("dqkv_heads") : dqkv;
    k.attention_backward(s, dheads, workspace("datt"), datty, a.atty, attention_heads(a), a.att, B_,
                         T_, widths.q, config_.n_head, attention_dropout, dtype, scratch);
    if (grouped)
      k.repeat_kv_backward(s, dqkv, dheads, N, config_.n_head, config_.kv_heads(),
                           config_.head_size());
  }
  if (family.positions == PositionKind::kRope)
    k.rope_backward(s, dqkv, workspace("rope"), T_, rope_layout());
  k.linear_backward(s,
                    {workspace("dln"),
                     {g.qkv_weight, grad_dtype},
                     g.qkv_bias,
                     dqkv,
                     a.ln1,
                     {p.qkv_weight, dtype},
                     N,
                     C,
                     widths.qkv,
                     nullptr,
                     weights},
                    scratch);
}

void GPT2Compute::backward_embeddings(ConstUnitData params, UnitData grads) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_embeddings");
  check_grads(grads, "backward_embeddings");
  Kernels& k = *kernels_;
  Stream& s = stream();
  const std::int64_t C = config_.n_embd, Vp = config_.padded_vocab_size();
  const bool learned = family_spec(config_.family).positions == PositionKind::kLearned;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  if (grads.dtype == DType::kFloat32) {
    auto* dwte = static_cast<float*>(grads.data);
    k.encoder_backward(s, dwte, learned ? dwte + Vp * C : nullptr, workspace("dresidual"),
                       kernel_tokens(), tokens_.data(), B_, T_, C, dropout);
  } else {
    // 16-bit: the batch's distinct wte rows and wpe[0, T) summed in fp32, then added once each.
    auto* dwte16 = static_cast<std::uint16_t*>(grads.data);
    const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
    float* dwte = workspace("grad32");
    float* dwpe = learned ? dwte + U * C : nullptr;
    k.zero(s, dwte, (U + (learned ? T_ : 0)) * C);
    k.encoder_backward(s, dwte, dwpe, workspace("dresidual"), kernel_slots(), token_slots_.data(),
                       B_, T_, C, dropout);
    k.accumulate_rows(s, dwte16, grads.dtype, dwte, unique_tokens_.data(), U, C);
    if (learned) k.accumulate(s, dwte16 + Vp * C, grads.dtype, dwpe, T_ * C);
  }
  if (!on_host_) inputs_released_ = stream().record();
}

}  // namespace zero::gpt2
