// GPT2Compute's forward and backward passes, unit by unit, through the model's kernel seam
// (kernels.h) on the context's compute stream.
#include <cstring>

#include "compute_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

// A block's vectors (layer norms, biases) as fp32 and its matrices in the unit's dtype; the qkv
// bias in the unit's dtype too (qkv_stored_bias: the unit's elements), for a 16-bit qkv
// (attention_io_dtype) whose GEMM adds a bias of its own dtype.
struct BlockParams {
  const float *ln1_weight, *ln1_bias, *qkv_bias, *attproj_bias, *ln2_weight, *ln2_bias, *fc_bias,
      *fcproj_bias;
  const void *qkv_weight, *attproj_weight, *fc_weight, *fcproj_weight;
  const void* qkv_stored_bias;
};
struct BlockGrads {
  float *ln1_weight, *ln1_bias, *qkv_bias, *attproj_bias, *ln2_weight, *ln2_bias, *fc_bias,
      *fcproj_bias;
  void *qkv_weight, *attproj_weight, *fc_weight, *fcproj_weight;
};

// fp32 units point into the unit; 16-bit ones have their vectors widened into `staging`
// (block_vector_elements floats) in BlockTensors order.
BlockParams block_params(Kernels& kernels, Stream& stream, const ConstUnitData& unit,
                         const GPT2Config& config, float* staging) {
  if (unit.dtype == DType::kFloat32) {
    const BlockTensors<const float> p(static_cast<const float*>(unit.data), config);
    return {p.ln1_weight, p.ln1_bias,      p.qkv_bias,    p.attproj_bias, p.ln2_weight,
            p.ln2_bias,   p.fc_bias,       p.fcproj_bias, p.qkv_weight,   p.attproj_weight,
            p.fc_weight,  p.fcproj_weight, p.qkv_bias};
  }
  const BlockTensors<const std::uint16_t> p(static_cast<const std::uint16_t*>(unit.data), config);
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  float* at = staging;
  auto vector = [&](const std::uint16_t* source, std::int64_t count) {
    kernels.widen(stream, at, source, unit.dtype, count);
    at += count;
    return at - count;
  };
  BlockParams result{};
  result.ln1_weight = vector(p.ln1_weight, C);
  result.ln1_bias = vector(p.ln1_bias, C);
  result.qkv_bias = vector(p.qkv_bias, 3 * C);
  result.attproj_bias = vector(p.attproj_bias, C);
  result.ln2_weight = vector(p.ln2_weight, C);
  result.ln2_bias = vector(p.ln2_bias, C);
  result.fc_bias = vector(p.fc_bias, H);
  result.fcproj_bias = vector(p.fcproj_bias, C);
  result.qkv_weight = p.qkv_weight;
  result.attproj_weight = p.attproj_weight;
  result.fc_weight = p.fc_weight;
  result.fcproj_weight = p.fcproj_weight;
  result.qkv_stored_bias = p.qkv_bias;
  return result;
}

// Gradient vectors of 16-bit units go to zeroed fp32 `staging`, added by finish_block_grads.
BlockGrads block_grads(Kernels& kernels, Stream& stream, const UnitData& unit,
                       const GPT2Config& config, float* staging) {
  if (unit.dtype == DType::kFloat32) {
    const BlockTensors<float> g(static_cast<float*>(unit.data), config);
    return {g.ln1_weight, g.ln1_bias,       g.qkv_bias,  g.attproj_bias,
            g.ln2_weight, g.ln2_bias,       g.fc_bias,   g.fcproj_bias,
            g.qkv_weight, g.attproj_weight, g.fc_weight, g.fcproj_weight};
  }
  const BlockTensors<std::uint16_t> g(static_cast<std::uint16_t*>(unit.data), config);
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  kernels.zero(stream, staging, block_vector_elements(config));
  return {staging,         staging + C,      staging + 2 * C, staging + 5 * C,
          staging + 6 * C, staging + 7 * C,  staging + 8 * C, staging + 8 * C + H,
          g.qkv_weight,    g.attproj_weight, g.fc_weight,     g.fcproj_weight};
}

void finish_block_grads(Kernels& kernels, Stream& stream, const UnitData& unit,
                        const GPT2Config& config, const float* staging) {
  if (unit.dtype == DType::kFloat32) return;
  const BlockTensors<std::uint16_t> g(static_cast<std::uint16_t*>(unit.data), config);
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  const struct {
    std::uint16_t* to;
    std::int64_t offset, count;
  } vectors[] = {{g.ln1_weight, 0, C},       {g.ln1_bias, C, C},
                 {g.qkv_bias, 2 * C, 3 * C}, {g.attproj_bias, 5 * C, C},
                 {g.ln2_weight, 6 * C, C},   {g.ln2_bias, 7 * C, C},
                 {g.fc_bias, 8 * C, H},      {g.fcproj_bias, 8 * C + H, C}};
  for (const auto& v : vectors)
    kernels.accumulate(stream, v.to, unit.dtype, staging + v.offset, v.count);
}

}  // namespace

void GPT2Compute::forward_embeddings(ConstUnitData params) {
  if (planning_) return;  // a plan has no memory to compute in
  ZERO_CHECK(!tokens_.empty(), "GPT-2 forward: set_inputs was not called");
  check_params(params, "forward_embeddings");
  const std::int64_t C = config_.n_embd;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  Kernels& k = *kernels_;
  if (params.dtype == DType::kFloat32) {
    const EmbeddingTensors<const float> p(static_cast<const float*>(params.data), config_);
    k.encoder_forward(stream(), activation("encoded"), kernel_tokens(), p.wte, p.wpe, B_, T_, C,
                      dropout);
    return;
  }
  // The batch's distinct wte rows and wpe[0, T) widened to fp32; rows addressed by slot.
  const EmbeddingTensors<const std::uint16_t> p(static_cast<const std::uint16_t*>(params.data),
                                                config_);
  const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
  float* wte = workspace("param32");
  float* wpe = wte + U * C;
  k.widen_rows(stream(), wte, p.wte, params.dtype, unique_tokens_.data(), U, C);
  k.widen(stream(), wpe, p.wpe, params.dtype, T_ * C);
  k.encoder_forward(stream(), activation("encoded"), kernel_slots(), wte, wpe, B_, T_, C, dropout);
}

void GPT2Compute::forward_block(int layer, ConstUnitData params) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 forward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "forward_block");
  forward_block_impl(layer, params);
}

void GPT2Compute::forward_block_impl(int layer, const ConstUnitData& params) {
  Kernels& k = *kernels_;
  Stream& s = stream();
  const DType dtype = params.dtype;
  const BlockParams p = block_params(k, s, params, config_, workspace_or_null("param32"));
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = config_.hidden_size();
  const float epsilon = static_cast<float>(config_.layer_norm_epsilon);
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  const GemmScratch scratch = gemm_scratch();
  float* proj = workspace("proj");
  k.layernorm_forward(s, a.ln1, a.ln1_mean, a.ln1_rstd, block_input(layer), p.ln1_weight,
                      p.ln1_bias, N, C, epsilon);
  k.linear_forward(
      s, {a.qkv, nullptr, a.ln1, {p.qkv_weight, dtype}, p.qkv_bias, N, C, 3 * C, p.qkv_stored_bias},
      scratch);
  k.attention_forward(s, a.atty, a.att, a.qkv, B_, T_, C, config_.n_head,
                      dropout_site(site + 1, config_.attn_pdrop), dtype, scratch);
  k.linear_forward(s, {proj, nullptr, a.atty, {p.attproj_weight, dtype}, p.attproj_bias, N, C, C},
                   scratch);
  k.residual_layernorm_forward(s, a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, block_input(layer),
                               proj, p.ln2_weight, p.ln2_bias, B_, T_, C, epsilon,
                               dropout_site(site + 2, config_.resid_pdrop));
  k.linear_forward(s, {a.fch, a.fch_gelu, a.ln2, {p.fc_weight, dtype}, p.fc_bias, N, C, H},
                   scratch);
  k.linear_forward(s, {proj, nullptr, a.fch_gelu, {p.fcproj_weight, dtype}, p.fcproj_bias, N, H, C},
                   scratch);
  k.residual_forward(s, a.residual3, a.residual2, proj, B_, T_, C,
                     dropout_site(site + 3, config_.resid_pdrop));
}

void GPT2Compute::forward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(final_norm_params, "forward_head (final norm)");
  check_params(embedding_params, "forward_head (embeddings)");
  Kernels& k = *kernels_;
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  const float *weight, *bias;
  if (final_norm_params.dtype == DType::kFloat32) {
    const FinalNormTensors<const float> norm(static_cast<const float*>(final_norm_params.data),
                                             config_);
    weight = norm.weight;
    bias = norm.bias;
  } else {
    float* staged = workspace("param32");
    k.widen(stream(), staged, final_norm_params.data, final_norm_params.dtype, 2 * C);
    weight = staged;
    bias = staged + C;
  }
  const ActivationOut ln_f = gemm_input_activation("ln_f");
  k.layernorm_forward(stream(), ln_f, activation("ln_f.mean"), activation("ln_f.rstd"),
                      blocks_.back().residual3, weight, bias, N, C,
                      static_cast<float>(config_.layer_norm_epsilon));
  loss_ = 0.0f;
  loss_pending_ = false;
  counted_ = 0;
  const bool targets = !targets_.empty();
  float* losses = activation("losses");
  // logits (N, Vp) = ln_f (N, C) · wteᵀ (wte is the unit's first tensor), and the losses
  k.logits_forward(stream(),
                   {activation("logits"),
                    logits_dtype(),
                    ln_f,
                    {embedding_params.data, embedding_params.dtype},
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
  const float* weight;
  if (final_norm_params.dtype == DType::kFloat32) {
    weight =
        FinalNormTensors<const float>(static_cast<const float*>(final_norm_params.data), config_)
            .weight;
  } else {
    float* staged = workspace("param32");
    k.widen(s, staged, final_norm_params.data, final_norm_params.dtype, C);
    weight = staged;
  }
  float *dweight, *dbias;
  if (final_norm_grads.dtype == DType::kFloat32) {
    const FinalNormTensors<float> norm_grads(static_cast<float*>(final_norm_grads.data), config_);
    dweight = norm_grads.weight;
    dbias = norm_grads.bias;
  } else {
    dweight = workspace("gradvec32");
    dbias = dweight + C;
    k.zero(s, dweight, 2 * C);
  }
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
                     {embedding_params.data, embedding_params.dtype},
                     {embedding_grads.data, embedding_grads.dtype},
                     options_.param_dtype,
                     dln},
                    gemm_scratch());
  k.zero(s, dresidual, N * C);
  k.layernorm_backward(s, dresidual, dweight, dbias, dln, blocks_.back().residual3, weight,
                       activation("ln_f.mean"), activation("ln_f.rstd"), N, C);
  if (final_norm_grads.dtype != DType::kFloat32)
    k.accumulate(s, final_norm_grads.data, final_norm_grads.dtype, dweight, 2 * C);
}

void GPT2Compute::backward_block(int layer, ConstUnitData params, UnitData grads) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 backward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_block");
  check_grads(grads, "backward_block");
  if (options_.activation_checkpointing) forward_block_impl(layer, params);
  Kernels& k = *kernels_;
  Stream& s = stream();
  const DType dtype = params.dtype;
  const BlockParams p = block_params(k, s, params, config_, workspace_or_null("param32"));
  const BlockGrads g = block_grads(k, s, grads, config_, workspace_or_null("gradvec32"));
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = config_.hidden_size();
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  const GemmScratch scratch = gemm_scratch();
  float* dresidual = workspace("dresidual");
  float* dproj = workspace("dproj");
  float* dhidden = workspace("dhidden");
  float* dln = workspace("dln");
  float* datty = workspace("datty");

  const DropoutSite mlp_dropout = dropout_site(site + 3, config_.resid_pdrop);
  float* dfcproj = dresidual;
  if (mlp_dropout.active()) {
    k.dropout_backward(s, dproj, dresidual, B_, T_, C, mlp_dropout);
    dfcproj = dproj;
  }
  // dhidden = dfcproj · fcprojᵀ, the gradient of gelu(fch); fc's backward applies GELU's
  // (dhidden ⊙ gelu'(fch)) where it reads dhidden, which it may overwrite.
  k.linear_backward(s,
                    {dhidden,
                     {g.fcproj_weight, grads.dtype},
                     g.fcproj_bias,
                     dfcproj,
                     a.fch_gelu,
                     {p.fcproj_weight, dtype},
                     N,
                     H,
                     C},
                    scratch);
  k.linear_backward(s,
                    {dln,
                     {g.fc_weight, grads.dtype},
                     g.fc_bias,
                     dhidden,
                     a.ln2,
                     {p.fc_weight, dtype},
                     N,
                     C,
                     H,
                     a.fch},
                    scratch);
  k.layernorm_backward(s, dresidual, g.ln2_weight, g.ln2_bias, dln, a.residual2, p.ln2_weight,
                       a.ln2_mean, a.ln2_rstd, N, C);

  const DropoutSite attention_out_dropout = dropout_site(site + 2, config_.resid_pdrop);
  float* dattproj = dresidual;
  if (attention_out_dropout.active()) {
    k.dropout_backward(s, dproj, dresidual, B_, T_, C, attention_out_dropout);
    dattproj = dproj;
  }
  k.linear_backward(s,
                    {datty,
                     {g.attproj_weight, grads.dtype},
                     g.attproj_bias,
                     dattproj,
                     a.atty,
                     {p.attproj_weight, dtype},
                     N,
                     C,
                     C},
                    scratch);
  float* dqkv = workspace("dqkv");
  k.attention_backward(s, dqkv, workspace("datt"), datty, a.atty, a.qkv, a.att, B_, T_, C,
                       config_.n_head, dropout_site(site + 1, config_.attn_pdrop), dtype, scratch);
  k.linear_backward(s,
                    {dln,
                     {g.qkv_weight, grads.dtype},
                     g.qkv_bias,
                     dqkv,
                     a.ln1,
                     {p.qkv_weight, dtype},
                     N,
                     C,
                     3 * C},
                    scratch);
  k.layernorm_backward(s, dresidual, g.ln1_weight, g.ln1_bias, dln, block_input(layer),
                       p.ln1_weight, a.ln1_mean, a.ln1_rstd, N, C);
  finish_block_grads(k, s, grads, config_, workspace_or_null("gradvec32"));
}

void GPT2Compute::backward_embeddings(ConstUnitData params, UnitData grads) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_embeddings");
  check_grads(grads, "backward_embeddings");
  Kernels& k = *kernels_;
  Stream& s = stream();
  const std::int64_t C = config_.n_embd;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  if (grads.dtype == DType::kFloat32) {
    const EmbeddingTensors<float> g(static_cast<float*>(grads.data), config_);
    k.encoder_backward(s, g.wte, g.wpe, workspace("dresidual"), kernel_tokens(), tokens_.data(), B_,
                       T_, C, dropout);
  } else {
    // 16-bit: the batch's distinct wte rows and wpe[0, T) summed in fp32, then added once each.
    const EmbeddingTensors<std::uint16_t> g(static_cast<std::uint16_t*>(grads.data), config_);
    const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
    float* dwte = workspace("grad32");
    float* dwpe = dwte + U * C;
    k.zero(s, dwte, (U + T_) * C);
    k.encoder_backward(s, dwte, dwpe, workspace("dresidual"), kernel_slots(), token_slots_.data(),
                       B_, T_, C, dropout);
    k.accumulate_rows(s, g.wte, grads.dtype, dwte, unique_tokens_.data(), U, C);
    k.accumulate(s, g.wpe, grads.dtype, dwpe, T_ * C);
  }
  if (!on_host_) inputs_released_ = stream().record();
}

}  // namespace zero::gpt2
