// GPT2Compute: activation layout (one allocation, named views), per-unit forward and backward.
#include "zero/gpt2/compute.h"

#include <cstring>

#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

constexpr const char* kRecomputePrefix = "recompute.";

// The block activation names, in layout order, with their row widths (elements per (b, t)).
struct BlockTensorShape {
  const char* name;
  std::int64_t per_row;
};
std::vector<BlockTensorShape> block_internal_shapes(const GPT2Config& config, std::int64_t T) {
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  return {
      {"ln_1", C}, {"ln_1.mean", 1}, {"ln_1.rstd", 1}, {"qkv", 3 * C},   {"att", config.n_head * T},
      {"atty", C}, {"residual2", C}, {"ln_2", C},      {"ln_2.mean", 1}, {"ln_2.rstd", 1},
      {"fch", H},  {"fch_gelu", H}};
}

// Activation tensors: "encoded", per block "h.l.<name>" (or one shared "recompute.<name>" set
// under checkpointing) and "h.l.residual3", then the head's "ln_f*", "logits", "losses",
// "logsumexp".
std::vector<TensorSpec> activation_specs(const GPT2Config& config, std::int64_t B, std::int64_t T,
                                         const ComputeOptions& options) {
  const std::int64_t N = B * T, C = config.n_embd;
  std::vector<TensorSpec> specs;
  specs.push_back({"encoded", {N, C}});
  for (int layer = 0; layer < config.n_layer; ++layer) {
    const std::string prefix = "h." + std::to_string(layer) + ".";
    if (!options.activation_checkpointing)
      for (const auto& shape : block_internal_shapes(config, T))
        specs.push_back({prefix + shape.name, {N, shape.per_row}});
    specs.push_back({prefix + "residual3", {N, C}});
  }
  if (options.activation_checkpointing)
    for (const auto& shape : block_internal_shapes(config, T))
      specs.push_back({std::string(kRecomputePrefix) + shape.name, {N, shape.per_row}});
  specs.push_back({"ln_f", {N, C}});
  specs.push_back({"ln_f.mean", {N}});
  specs.push_back({"ln_f.rstd", {N}});
  specs.push_back({"logits", {N, config.padded_vocab_size()}});
  specs.push_back({"losses", {N}});
  specs.push_back({"logsumexp", {N}});
  return specs;
}

std::vector<TensorSpec> workspace_specs(const GPT2Config& config, std::int64_t B, std::int64_t T) {
  const std::int64_t N = B * T, C = config.n_embd, H = config.hidden_size();
  return {{"proj", {N, C}},     {"dresidual", {N, C}},
          {"dproj", {N, C}},    {"dhidden", {N, H}},
          {"dln", {N, C}},      {"datty", {N, C}},
          {"dqkv", {N, 3 * C}}, {"datt", {B, config.n_head, T, T}}};
}

}  // namespace

std::size_t ActivationPlan::total_bytes() const {
  std::size_t total = recompute_bytes + workspace_bytes;
  for (std::size_t bytes : kept_bytes) total += bytes;
  return total;
}

ActivationPlan GPT2Compute::plan(const GPT2Config& config, std::int64_t batch_size,
                                 std::int64_t seq_len, ComputeOptions options) {
  ActivationPlan plan;
  plan.kept_bytes.assign(static_cast<std::size_t>(config.n_layer) + 2, 0);
  for (const TensorSpec& spec : activation_specs(config, batch_size, seq_len, options)) {
    const std::size_t bytes = spec.num_elements() * sizeof(float);
    if (spec.name == "encoded")
      plan.kept_bytes[embeddings_unit()] += bytes;
    else if (spec.name.starts_with(kRecomputePrefix))
      plan.recompute_bytes += bytes;
    else if (spec.name.starts_with("h."))
      plan.kept_bytes[block_unit(std::stoi(spec.name.substr(2)))] += bytes;
    else
      plan.kept_bytes[final_norm_unit(config)] += bytes;
  }
  for (const TensorSpec& spec : workspace_specs(config, batch_size, seq_len))
    plan.workspace_bytes += spec.num_elements() * sizeof(float);
  return plan;
}

GPT2Compute::GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
                         Allocator& allocator, ComputeOptions options)
    : config_(config), B_(batch_size), T_(seq_len), options_(options) {
  config_.validate();
  ZERO_CHECK(B_ > 0 && T_ > 0,
             "GPT-2 compute: batch size and sequence length must be positive, got B=", B_,
             " T=", T_);
  ZERO_CHECK(T_ <= config_.n_positions, "GPT-2 compute: sequence length ", T_,
             " exceeds n_positions ", config_.n_positions);
  activation_layout_ = FlatLayout(activation_specs(config_, B_, T_, options_), 1, 16);
  workspace_layout_ = FlatLayout(workspace_specs(config_, B_, T_), 1, 16);
  activation_buffer_ = allocator.allocate(activation_layout_.padded_num_elements() * sizeof(float),
                                          MemoryCategory::kActivations);
  workspace_buffer_ = allocator.allocate(workspace_layout_.padded_num_elements() * sizeof(float),
                                         MemoryCategory::kWorkspace);
  for (int layer = 0; layer < config_.n_layer; ++layer) {
    const std::string prefix = options_.activation_checkpointing
                                   ? std::string(kRecomputePrefix)
                                   : "h." + std::to_string(layer) + ".";
    auto get = [&](const char* name) { return activation(prefix + name); };
    blocks_.push_back({get("ln_1"), get("ln_1.mean"), get("ln_1.rstd"), get("qkv"), get("att"),
                       get("atty"), get("residual2"), get("ln_2"), get("ln_2.mean"),
                       get("ln_2.rstd"), get("fch"), get("fch_gelu"),
                       activation("h." + std::to_string(layer) + ".residual3")});
  }
}

float* GPT2Compute::activation(const std::string& name) const {
  return activation_buffer_.data_as<float>() + activation_layout_.slot(name).offset_elements;
}
float* GPT2Compute::workspace(const std::string& name) const {
  return workspace_buffer_.data_as<float>() + workspace_layout_.slot(name).offset_elements;
}
const float* GPT2Compute::logits() const { return activation("logits"); }
const float* GPT2Compute::losses() const { return activation("losses"); }

const float* GPT2Compute::block_input(int layer) const {
  return layer == 0 ? activation("encoded") : blocks_[layer - 1].residual3;
}

DropoutSite GPT2Compute::dropout_site(std::uint32_t site, double probability) const {
  DropoutSite result;
  result.probability = dropout_.training ? static_cast<float>(probability) : 0.0f;
  result.key = derive_key(derive_key(derive_key(dropout_.seed, dropout_.step), site), 0x5eed);
  result.sample_offset = dropout_.sample_offset;
  return result;
}

void GPT2Compute::set_inputs(std::span<const int> tokens, std::span<const int> targets,
                             DropoutKey dropout) {
  const std::size_t count = static_cast<std::size_t>(B_ * T_);
  ZERO_CHECK(tokens.size() == count, "GPT-2 inputs: ", tokens.size(), " tokens for B=", B_,
             " T=", T_);
  ZERO_CHECK(targets.empty() || targets.size() == count, "GPT-2 inputs: ", targets.size(),
             " targets for B=", B_, " T=", T_);
  for (std::size_t i = 0; i < count; ++i)
    ZERO_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "GPT-2 inputs: token ", tokens[i],
               " at index ", i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  for (std::size_t i = 0; i < targets.size(); ++i)
    ZERO_CHECK(targets[i] < config_.vocab_size, "GPT-2 inputs: target ", targets[i], " at index ",
               i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  dropout_ = dropout;
  loss_ = 0.0f;
  counted_ = 0;
}

void GPT2Compute::forward_embeddings(const float* params) {
  ZERO_CHECK(!tokens_.empty(), "GPT-2 forward: set_inputs was not called");
  const EmbeddingTensors<const float> p(params, config_);
  cpu::encoder_forward(activation("encoded"), tokens_.data(), p.wte, p.wpe, B_, T_, config_.n_embd,
                       dropout_site(0, config_.embd_pdrop));
}

void GPT2Compute::forward_block(int layer, const float* params) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 forward: no block ", layer);
  const BlockTensors<const float> p(params, config_);
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = config_.hidden_size();
  const float epsilon = static_cast<float>(config_.layer_norm_epsilon);
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  float* proj = workspace("proj");
  cpu::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, block_input(layer), p.ln1_weight,
                         p.ln1_bias, N, C, epsilon);
  cpu::matmul_forward(a.qkv, a.ln1, p.qkv_weight, p.qkv_bias, N, C, 3 * C);
  cpu::attention_forward(a.atty, a.att, a.qkv, B_, T_, C, config_.n_head,
                         dropout_site(site + 1, config_.attn_pdrop));
  cpu::matmul_forward(proj, a.atty, p.attproj_weight, p.attproj_bias, N, C, C);
  cpu::residual_dropout_forward(a.residual2, block_input(layer), proj, B_, T_, C,
                                dropout_site(site + 2, config_.resid_pdrop));
  cpu::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2_weight, p.ln2_bias, N, C,
                         epsilon);
  cpu::matmul_forward(a.fch, a.ln2, p.fc_weight, p.fc_bias, N, C, H);
  cpu::gelu_forward(a.fch_gelu, a.fch, N * H);
  cpu::matmul_forward(proj, a.fch_gelu, p.fcproj_weight, p.fcproj_bias, N, H, C);
  cpu::residual_dropout_forward(a.residual3, a.residual2, proj, B_, T_, C,
                                dropout_site(site + 3, config_.resid_pdrop));
}

void GPT2Compute::forward_head(const float* final_norm_params, const float* embedding_params) {
  const FinalNormTensors<const float> norm(final_norm_params, config_);
  const EmbeddingTensors<const float> embeddings(embedding_params, config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  float* ln_f = activation("ln_f");
  float* logits = activation("logits");
  cpu::layernorm_forward(ln_f, activation("ln_f.mean"), activation("ln_f.rstd"),
                         blocks_.back().residual3, norm.weight, norm.bias, N, C,
                         static_cast<float>(config_.layer_norm_epsilon));
  // logits (N, Vp) = ln_f (N, C) · wteᵀ
  cpu::gemm(false, true, N, Vp, C, 1.0f, ln_f, C, embeddings.wte, C, 0.0f, logits, Vp);
  loss_ = 0.0f;
  counted_ = 0;
  if (targets_.empty()) return;
  float* losses = activation("losses");
  counted_ = cpu::crossentropy_forward(losses, activation("logsumexp"), logits, targets_.data(), N,
                                       config_.vocab_size, Vp);
  double sum = 0.0;
  for (std::int64_t row = 0; row < N; ++row) sum += losses[row];
  loss_ = counted_ > 0 ? static_cast<float>(sum / static_cast<double>(counted_)) : 0.0f;
}

void GPT2Compute::backward_head(const float* final_norm_params, const float* embedding_params,
                                float* final_norm_grads, float* embedding_grads, float loss_scale) {
  ZERO_CHECK(!targets_.empty(), "GPT-2 backward: no targets were given to set_inputs");
  const FinalNormTensors<const float> norm(final_norm_params, config_);
  const EmbeddingTensors<const float> embeddings(embedding_params, config_);
  const FinalNormTensors<float> norm_grads(final_norm_grads, config_);
  const EmbeddingTensors<float> embedding_grad(embedding_grads, config_);
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  const float scale =
      loss_scale >= 0.0f ? loss_scale : (counted_ > 0 ? 1.0f / static_cast<float>(counted_) : 0.0f);
  float* dlogits = activation("logits");
  cpu::crossentropy_backward(dlogits, activation("logsumexp"), targets_.data(), N,
                             config_.vocab_size, Vp, scale);
  float* dln = workspace("dln");
  float* dresidual = workspace("dresidual");
  cpu::gemm(false, false, N, C, Vp, 1.0f, dlogits, Vp, embeddings.wte, C, 0.0f, dln, C);
  cpu::gemm(true, false, Vp, C, N, 1.0f, dlogits, Vp, activation("ln_f"), C, 1.0f,
            embedding_grad.wte, C);
  std::memset(dresidual, 0, static_cast<std::size_t>(N * C) * sizeof(float));
  cpu::layernorm_backward(dresidual, norm_grads.weight, norm_grads.bias, dln,
                          blocks_.back().residual3, norm.weight, activation("ln_f.mean"),
                          activation("ln_f.rstd"), N, C);
}

void GPT2Compute::backward_block(int layer, const float* params, float* grads) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 backward: no block ", layer);
  if (options_.activation_checkpointing) forward_block(layer, params);
  const BlockTensors<const float> p(params, config_);
  const BlockTensors<float> g(grads, config_);
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = config_.hidden_size();
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  float* dresidual = workspace("dresidual");
  float* dproj = workspace("dproj");
  float* dhidden = workspace("dhidden");
  float* dln = workspace("dln");
  float* datty = workspace("datty");

  const DropoutSite mlp_dropout = dropout_site(site + 3, config_.resid_pdrop);
  const float* dfcproj = dresidual;
  if (mlp_dropout.active()) {
    cpu::dropout_backward(dproj, dresidual, B_, T_, C, mlp_dropout);
    dfcproj = dproj;
  }
  cpu::matmul_backward(dhidden, g.fcproj_weight, g.fcproj_bias, dfcproj, a.fch_gelu,
                       p.fcproj_weight, N, H, C);
  cpu::gelu_backward(dhidden, a.fch, dhidden, N * H);
  cpu::matmul_backward(dln, g.fc_weight, g.fc_bias, dhidden, a.ln2, p.fc_weight, N, C, H);
  cpu::layernorm_backward(dresidual, g.ln2_weight, g.ln2_bias, dln, a.residual2, p.ln2_weight,
                          a.ln2_mean, a.ln2_rstd, N, C);

  const DropoutSite attention_out_dropout = dropout_site(site + 2, config_.resid_pdrop);
  const float* dattproj = dresidual;
  if (attention_out_dropout.active()) {
    cpu::dropout_backward(dproj, dresidual, B_, T_, C, attention_out_dropout);
    dattproj = dproj;
  }
  cpu::matmul_backward(datty, g.attproj_weight, g.attproj_bias, dattproj, a.atty, p.attproj_weight,
                       N, C, C);
  float* dqkv = workspace("dqkv");
  cpu::attention_backward(dqkv, workspace("datt"), datty, a.qkv, a.att, B_, T_, C, config_.n_head,
                          dropout_site(site + 1, config_.attn_pdrop));
  cpu::matmul_backward(dln, g.qkv_weight, g.qkv_bias, dqkv, a.ln1, p.qkv_weight, N, C, 3 * C);
  cpu::layernorm_backward(dresidual, g.ln1_weight, g.ln1_bias, dln, block_input(layer),
                          p.ln1_weight, a.ln1_mean, a.ln1_rstd, N, C);
}

void GPT2Compute::backward_embeddings(const float* params, float* grads) {
  const EmbeddingTensors<float> g(grads, config_);
  cpu::encoder_backward(g.wte, g.wpe, workspace("dresidual"), tokens_.data(), B_, T_,
                        config_.n_embd, dropout_site(0, config_.embd_pdrop));
}

}  // namespace zero::gpt2
