// GPT2Compute: activation layout (one allocation, named views), per-unit forward and backward.
#include "zero/gpt2/compute.h"

#include <algorithm>
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

// Rows of wte whose gradient one staged GEMM computes when gradients are 16-bit.
constexpr std::int64_t kHeadGradRows = 2048;

// fp32 elements of a block's vectors (layer norms and biases), in BlockTensors order.
std::int64_t block_vector_elements(const GPT2Config& config) {
  return 9 * config.n_embd + config.hidden_size();
}

std::vector<TensorSpec> workspace_specs(const GPT2Config& config, std::int64_t B, std::int64_t T,
                                        const ComputeOptions& options) {
  const std::int64_t N = B * T, C = config.n_embd, H = config.hidden_size();
  std::vector<TensorSpec> specs = {{"proj", {N, C}},     {"dresidual", {N, C}},
                                   {"dproj", {N, C}},    {"dhidden", {N, H}},
                                   {"dln", {N, C}},      {"datty", {N, C}},
                                   {"dqkv", {N, 3 * C}}, {"datt", {B, config.n_head, T, T}}};
  if (options.param_dtype == DType::kFloat32) return specs;
  // 16-bit storage: bf16 copies of GEMM activations (two bf16 per fp32 element of the spec),
  // the unit's vectors (and the batch's wte rows and wpe) widened to fp32, and fp32 gradients
  // staged before they are added to 16-bit ones.
  const std::int64_t Vp = config.padded_vocab_size();
  const std::int64_t widest = std::max({Vp, H, 3 * C});
  const std::int64_t vectors = std::max(block_vector_elements(config), (N + T) * C);
  const std::int64_t staged = std::max({C * H, 3 * C * C, kHeadGradRows * C, (N + T) * C});
  specs.push_back({"act16_a", {(N * widest + 1) / 2}});
  specs.push_back({"act16_b", {(N * std::max(H, 3 * C) + 1) / 2}});
  specs.push_back({"param32", {vectors}});
  specs.push_back({"gradvec32", {block_vector_elements(config)}});
  specs.push_back({"grad32", {staged}});
  return specs;
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
  for (const TensorSpec& spec : workspace_specs(config, batch_size, seq_len, options))
    plan.workspace_bytes += spec.num_elements() * sizeof(float);
  return plan;
}

GPT2Compute::GPT2Compute(const GPT2Config& config, std::int64_t batch_size, std::int64_t seq_len,
                         Allocator& allocator, ComputeOptions options)
    : config_(config),
      B_(batch_size),
      T_(seq_len),
      options_(options),
      planning_(allocator.planning()) {
  config_.validate();
  ZERO_CHECK(B_ > 0 && T_ > 0,
             "GPT-2 compute: batch size and sequence length must be positive, got B=", B_,
             " T=", T_);
  ZERO_CHECK(T_ <= config_.n_positions, "GPT-2 compute: sequence length ", T_,
             " exceeds n_positions ", config_.n_positions);
  activation_layout_ = FlatLayout(activation_specs(config_, B_, T_, options_), 1, 16);
  workspace_layout_ = FlatLayout(workspace_specs(config_, B_, T_, options_), 1, 16);
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
  if (planning_) return nullptr;  // planned buffers have no memory
  return activation_buffer_.data_as<float>() + activation_layout_.slot(name).offset_elements;
}
float* GPT2Compute::workspace(const std::string& name) const {
  if (planning_) return nullptr;
  return workspace_buffer_.data_as<float>() + workspace_layout_.slot(name).offset_elements;
}
float* GPT2Compute::workspace_or_null(const std::string& name) const {
  return options_.param_dtype == DType::kFloat32 ? nullptr : workspace(name);
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
  if (planning_) {  // the tokens are never read in a plan
    dropout_ = dropout;
    loss_ = 0.0f;
    counted_ = 0;
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    ZERO_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "GPT-2 inputs: token ", tokens[i],
               " at index ", i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  for (std::size_t i = 0; i < targets.size(); ++i)
    ZERO_CHECK(targets[i] < config_.vocab_size, "GPT-2 inputs: target ", targets[i], " at index ",
               i, " is outside the vocabulary [0, ", config_.vocab_size, ")");
  tokens_.assign(tokens.begin(), tokens.end());
  targets_.assign(targets.begin(), targets.end());
  unique_tokens_ = tokens_;
  std::sort(unique_tokens_.begin(), unique_tokens_.end());
  unique_tokens_.erase(std::unique(unique_tokens_.begin(), unique_tokens_.end()),
                       unique_tokens_.end());
  token_slots_.resize(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i)
    token_slots_[i] = static_cast<int>(
        std::lower_bound(unique_tokens_.begin(), unique_tokens_.end(), tokens_[i]) -
        unique_tokens_.begin());
  dropout_ = dropout;
  loss_ = 0.0f;
  counted_ = 0;
}

namespace {

// A block's vectors (layer norms, biases) as fp32 and its matrices in the unit's dtype.
struct BlockParams {
  const float *ln1_weight, *ln1_bias, *qkv_bias, *attproj_bias, *ln2_weight, *ln2_bias, *fc_bias,
      *fcproj_bias;
  const void *qkv_weight, *attproj_weight, *fc_weight, *fcproj_weight;
};
struct BlockGrads {
  float *ln1_weight, *ln1_bias, *qkv_bias, *attproj_bias, *ln2_weight, *ln2_bias, *fc_bias,
      *fcproj_bias;
  void *qkv_weight, *attproj_weight, *fc_weight, *fcproj_weight;
};

// fp32 units point into the unit; 16-bit ones have their vectors widened into `staging`
// (block_vector_elements floats) in BlockTensors order.
BlockParams block_params(const ConstUnitData& unit, const GPT2Config& config, float* staging) {
  if (unit.dtype == DType::kFloat32) {
    const BlockTensors<const float> p(static_cast<const float*>(unit.data), config);
    return {p.ln1_weight, p.ln1_bias,       p.qkv_bias,  p.attproj_bias,
            p.ln2_weight, p.ln2_bias,       p.fc_bias,   p.fcproj_bias,
            p.qkv_weight, p.attproj_weight, p.fc_weight, p.fcproj_weight};
  }
  const BlockTensors<const std::uint16_t> p(static_cast<const std::uint16_t*>(unit.data), config);
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  float* at = staging;
  auto vector = [&](const std::uint16_t* source, std::int64_t count) {
    cpu::widen(at, source, unit.dtype, count);
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
  return result;
}

// Gradient vectors of 16-bit units go to zeroed fp32 `staging`, added by finish_block_grads.
BlockGrads block_grads(const UnitData& unit, const GPT2Config& config, float* staging) {
  if (unit.dtype == DType::kFloat32) {
    const BlockTensors<float> g(static_cast<float*>(unit.data), config);
    return {g.ln1_weight, g.ln1_bias,       g.qkv_bias,  g.attproj_bias,
            g.ln2_weight, g.ln2_bias,       g.fc_bias,   g.fcproj_bias,
            g.qkv_weight, g.attproj_weight, g.fc_weight, g.fcproj_weight};
  }
  const BlockTensors<std::uint16_t> g(static_cast<std::uint16_t*>(unit.data), config);
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  std::memset(staging, 0, static_cast<std::size_t>(block_vector_elements(config)) * sizeof(float));
  return {staging,         staging + C,      staging + 2 * C, staging + 5 * C,
          staging + 6 * C, staging + 7 * C,  staging + 8 * C, staging + 8 * C + H,
          g.qkv_weight,    g.attproj_weight, g.fc_weight,     g.fcproj_weight};
}

void finish_block_grads(const UnitData& unit, const GPT2Config& config, const float* staging) {
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
  for (const auto& v : vectors) cpu::accumulate(v.to, unit.dtype, staging + v.offset, v.count);
}

}  // namespace

void GPT2Compute::check_params(const ConstUnitData& params, const char* what) const {
  ZERO_CHECK(params.data != nullptr, "GPT-2 ", what, ": null parameters");
  ZERO_CHECK(params.dtype == options_.param_dtype, "GPT-2 ", what, ": parameters are ",
             name_of(params.dtype), " but this GPT2Compute was built for ",
             name_of(options_.param_dtype), " (ComputeOptions::param_dtype)");
}

void GPT2Compute::check_grads(const UnitData& grads, const char* what) const {
  ZERO_CHECK(grads.data != nullptr, "GPT-2 ", what, ": null gradients");
  ZERO_CHECK(grads.dtype == DType::kFloat32 || grads.dtype == options_.param_dtype, "GPT-2 ", what,
             ": gradients are ", name_of(grads.dtype), "; expected fp32 or the parameters' ",
             name_of(options_.param_dtype));
}

void GPT2Compute::weight_gemm(bool trans_w, std::int64_t M, std::int64_t N, std::int64_t K,
                              const float* A, Matrix W, std::int64_t ldw, float beta, float* C) {
  if (W.dtype == DType::kFloat32) {
    cpu::gemm(false, trans_w, M, N, K, 1.0f, A, K, static_cast<const float*>(W.data), ldw, beta, C,
              N);
  } else if (W.dtype == DType::kBFloat16 && cpu::gemm_bf16_native()) {
    auto* a16 = reinterpret_cast<BFloat16*>(workspace("act16_a"));
    cpu::to_bf16(a16, A, M * K);
    cpu::gemm_bf16(false, trans_w, M, N, K, a16, K, static_cast<const BFloat16*>(W.data), ldw, beta,
                   C, N);
  } else {
    cpu::gemm_widen_b(false, trans_w, M, N, K, A, K, W.data, W.dtype, ldw, beta, C, N);
  }
}

void GPT2Compute::grad_gemm(std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                            std::int64_t lda, const float* B, GradMatrix G, bool a_is_staged) {
  // bf16 parameters with native kernels: both activations rounded to bf16 (as autocast does).
  const bool bf16 = options_.param_dtype == DType::kBFloat16 && cpu::gemm_bf16_native();
  BFloat16 *a16 = nullptr, *b16 = nullptr;
  if (bf16) {
    a16 = reinterpret_cast<BFloat16*>(workspace("act16_a"));
    b16 = reinterpret_cast<BFloat16*>(workspace("act16_b"));
    if (!a_is_staged) cpu::to_bf16(a16, A, K * lda);
    cpu::to_bf16(b16, B, K * N);
  }
  auto product = [&](std::int64_t m0, std::int64_t rows, float beta, float* C) {
    if (bf16)
      cpu::gemm_bf16(true, false, rows, N, K, a16 + m0, lda, b16, N, beta, C, N);
    else
      cpu::gemm(true, false, rows, N, K, 1.0f, A + m0, lda, B, N, beta, C, N);
  };
  if (G.dtype == DType::kFloat32) {
    product(0, M, 1.0f, static_cast<float*>(G.data));
    return;
  }
  // 16-bit gradients: fp32 products of a bounded number of rows, each added with one rounding.
  float* staged = workspace("grad32");
  const std::int64_t rows = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(workspace_layout_.slot("grad32").num_elements) / N);
  for (std::int64_t m0 = 0; m0 < M; m0 += rows) {
    const std::int64_t count = std::min(rows, M - m0);
    product(m0, count, 0.0f, staged);
    cpu::accumulate(static_cast<char*>(G.data) + m0 * N * std::int64_t(size_of(G.dtype)), G.dtype,
                    staged, count * N);
  }
}

void GPT2Compute::linear_forward(float* out, const float* inp, Matrix weight, const float* bias,
                                 std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (weight.dtype == DType::kFloat32) {
    cpu::matmul_forward(out, inp, static_cast<const float*>(weight.data), bias, N, C, OC);
    return;
  }
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < N; ++row)
      std::memcpy(out + row * OC, bias, OC * sizeof(float));
  }
  weight_gemm(false, N, OC, C, inp, weight, OC, bias != nullptr ? 1.0f : 0.0f, out);
}

void GPT2Compute::linear_backward(float* dinp, GradMatrix dweight, float* dbias, const float* dout,
                                  const float* inp, Matrix weight, std::int64_t N, std::int64_t C,
                                  std::int64_t OC) {
  if (weight.dtype == DType::kFloat32 && dweight.dtype == DType::kFloat32) {
    cpu::matmul_backward(dinp, static_cast<float*>(dweight.data), dbias, dout, inp,
                         static_cast<const float*>(weight.data), N, C, OC);
    return;
  }
  if (dinp != nullptr) weight_gemm(true, N, C, OC, dout, weight, OC, 0.0f, dinp);
  grad_gemm(C, OC, N, inp, C, dout, dweight);
  if (dbias != nullptr) cpu::bias_backward(dbias, dout, N, OC);
}

void GPT2Compute::forward_embeddings(ConstUnitData params) {
  if (planning_) return;  // a plan has no memory to compute in
  ZERO_CHECK(!tokens_.empty(), "GPT-2 forward: set_inputs was not called");
  check_params(params, "forward_embeddings");
  const std::int64_t C = config_.n_embd;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  if (params.dtype == DType::kFloat32) {
    const EmbeddingTensors<const float> p(static_cast<const float*>(params.data), config_);
    cpu::encoder_forward(activation("encoded"), tokens_.data(), p.wte, p.wpe, B_, T_, C, dropout);
    return;
  }
  // The batch's distinct wte rows and wpe[0, T) widened to fp32; rows addressed by slot.
  const EmbeddingTensors<const std::uint16_t> p(static_cast<const std::uint16_t*>(params.data),
                                                config_);
  const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
  float* wte = workspace("param32");
  float* wpe = wte + U * C;
#pragma omp parallel for schedule(static)
  for (std::int64_t slot = 0; slot < U; ++slot)
    cpu::widen(wte + slot * C, p.wte + std::int64_t(unique_tokens_[slot]) * C, params.dtype, C);
  cpu::widen(wpe, p.wpe, params.dtype, T_ * C);
  cpu::encoder_forward(activation("encoded"), token_slots_.data(), wte, wpe, B_, T_, C, dropout);
}

void GPT2Compute::forward_block(int layer, ConstUnitData params) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 forward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "forward_block");
  forward_block_impl(layer, params);
}

void GPT2Compute::forward_block_impl(int layer, const ConstUnitData& params) {
  const DType dtype = params.dtype;
  const BlockParams p = block_params(params, config_, workspace_or_null("param32"));
  const BlockActivations& a = blocks_[layer];
  const std::int64_t N = B_ * T_, C = config_.n_embd, H = config_.hidden_size();
  const float epsilon = static_cast<float>(config_.layer_norm_epsilon);
  const std::uint32_t site = 3 * static_cast<std::uint32_t>(layer);
  float* proj = workspace("proj");
  cpu::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, block_input(layer), p.ln1_weight,
                         p.ln1_bias, N, C, epsilon);
  linear_forward(a.qkv, a.ln1, {p.qkv_weight, dtype}, p.qkv_bias, N, C, 3 * C);
  cpu::attention_forward(a.atty, a.att, a.qkv, B_, T_, C, config_.n_head,
                         dropout_site(site + 1, config_.attn_pdrop));
  linear_forward(proj, a.atty, {p.attproj_weight, dtype}, p.attproj_bias, N, C, C);
  cpu::residual_dropout_forward(a.residual2, block_input(layer), proj, B_, T_, C,
                                dropout_site(site + 2, config_.resid_pdrop));
  cpu::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, p.ln2_weight, p.ln2_bias, N, C,
                         epsilon);
  linear_forward(a.fch, a.ln2, {p.fc_weight, dtype}, p.fc_bias, N, C, H);
  cpu::gelu_forward(a.fch_gelu, a.fch, N * H);
  linear_forward(proj, a.fch_gelu, {p.fcproj_weight, dtype}, p.fcproj_bias, N, H, C);
  cpu::residual_dropout_forward(a.residual3, a.residual2, proj, B_, T_, C,
                                dropout_site(site + 3, config_.resid_pdrop));
}

void GPT2Compute::forward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(final_norm_params, "forward_head (final norm)");
  check_params(embedding_params, "forward_head (embeddings)");
  const std::int64_t N = B_ * T_, C = config_.n_embd, Vp = config_.padded_vocab_size();
  const float *weight, *bias;
  if (final_norm_params.dtype == DType::kFloat32) {
    const FinalNormTensors<const float> norm(static_cast<const float*>(final_norm_params.data),
                                             config_);
    weight = norm.weight;
    bias = norm.bias;
  } else {
    float* staged = workspace("param32");
    cpu::widen(staged, final_norm_params.data, final_norm_params.dtype, 2 * C);
    weight = staged;
    bias = staged + C;
  }
  float* ln_f = activation("ln_f");
  float* logits = activation("logits");
  cpu::layernorm_forward(ln_f, activation("ln_f.mean"), activation("ln_f.rstd"),
                         blocks_.back().residual3, weight, bias, N, C,
                         static_cast<float>(config_.layer_norm_epsilon));
  // logits (N, Vp) = ln_f (N, C) · wteᵀ (wte is the unit's first tensor)
  weight_gemm(true, N, Vp, C, ln_f, {embedding_params.data, embedding_params.dtype}, C, 0.0f,
              logits);
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

void GPT2Compute::backward_head(ConstUnitData final_norm_params, ConstUnitData embedding_params,
                                UnitData final_norm_grads, UnitData embedding_grads,
                                float loss_scale) {
  if (planning_) return;  // a plan has no memory to compute in
  ZERO_CHECK(!targets_.empty(), "GPT-2 backward: no targets were given to set_inputs");
  check_params(final_norm_params, "backward_head (final norm)");
  check_params(embedding_params, "backward_head (embeddings)");
  check_grads(final_norm_grads, "backward_head (final norm)");
  check_grads(embedding_grads, "backward_head (embeddings)");
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
    cpu::widen(staged, final_norm_params.data, final_norm_params.dtype, C);
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
    std::memset(dweight, 0, static_cast<std::size_t>(2 * C) * sizeof(float));
  }
  float* dlogits = activation("logits");
  cpu::crossentropy_backward(dlogits, activation("logsumexp"), targets_.data(), N,
                             config_.vocab_size, Vp, scale);
  float* dln = workspace("dln");
  float* dresidual = workspace("dresidual");
  // dln (N, C) = dlogits (N, Vp) · wte (Vp, C); dwte (Vp, C) += dlogitsᵀ · ln_f
  weight_gemm(false, N, C, Vp, dlogits, {embedding_params.data, embedding_params.dtype}, C, 0.0f,
              dln);
  // dlogits (N, Vp) is contiguous: the bf16 copy weight_gemm just made is grad_gemm's A.
  grad_gemm(Vp, C, N, dlogits, Vp, activation("ln_f"),
            {embedding_grads.data, embedding_grads.dtype}, /*a_is_staged=*/true);
  std::memset(dresidual, 0, static_cast<std::size_t>(N * C) * sizeof(float));
  cpu::layernorm_backward(dresidual, dweight, dbias, dln, blocks_.back().residual3, weight,
                          activation("ln_f.mean"), activation("ln_f.rstd"), N, C);
  if (final_norm_grads.dtype != DType::kFloat32)
    cpu::accumulate(final_norm_grads.data, final_norm_grads.dtype, dweight, 2 * C);
}

void GPT2Compute::backward_block(int layer, ConstUnitData params, UnitData grads) {
  ZERO_CHECK(layer >= 0 && layer < config_.n_layer, "GPT-2 backward: no block ", layer);
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_block");
  check_grads(grads, "backward_block");
  if (options_.activation_checkpointing) forward_block_impl(layer, params);
  const DType dtype = params.dtype;
  const BlockParams p = block_params(params, config_, workspace_or_null("param32"));
  const BlockGrads g = block_grads(grads, config_, workspace_or_null("gradvec32"));
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
  linear_backward(dhidden, {g.fcproj_weight, grads.dtype}, g.fcproj_bias, dfcproj, a.fch_gelu,
                  {p.fcproj_weight, dtype}, N, H, C);
  cpu::gelu_backward(dhidden, a.fch, dhidden, N * H);
  linear_backward(dln, {g.fc_weight, grads.dtype}, g.fc_bias, dhidden, a.ln2, {p.fc_weight, dtype},
                  N, C, H);
  cpu::layernorm_backward(dresidual, g.ln2_weight, g.ln2_bias, dln, a.residual2, p.ln2_weight,
                          a.ln2_mean, a.ln2_rstd, N, C);

  const DropoutSite attention_out_dropout = dropout_site(site + 2, config_.resid_pdrop);
  const float* dattproj = dresidual;
  if (attention_out_dropout.active()) {
    cpu::dropout_backward(dproj, dresidual, B_, T_, C, attention_out_dropout);
    dattproj = dproj;
  }
  linear_backward(datty, {g.attproj_weight, grads.dtype}, g.attproj_bias, dattproj, a.atty,
                  {p.attproj_weight, dtype}, N, C, C);
  float* dqkv = workspace("dqkv");
  cpu::attention_backward(dqkv, workspace("datt"), datty, a.qkv, a.att, B_, T_, C, config_.n_head,
                          dropout_site(site + 1, config_.attn_pdrop));
  linear_backward(dln, {g.qkv_weight, grads.dtype}, g.qkv_bias, dqkv, a.ln1, {p.qkv_weight, dtype},
                  N, C, 3 * C);
  cpu::layernorm_backward(dresidual, g.ln1_weight, g.ln1_bias, dln, block_input(layer),
                          p.ln1_weight, a.ln1_mean, a.ln1_rstd, N, C);
  finish_block_grads(grads, config_, workspace_or_null("gradvec32"));
}

void GPT2Compute::backward_embeddings(ConstUnitData params, UnitData grads) {
  if (planning_) return;  // a plan has no memory to compute in
  check_params(params, "backward_embeddings");
  check_grads(grads, "backward_embeddings");
  const std::int64_t C = config_.n_embd;
  const DropoutSite dropout = dropout_site(0, config_.embd_pdrop);
  if (grads.dtype == DType::kFloat32) {
    const EmbeddingTensors<float> g(static_cast<float*>(grads.data), config_);
    cpu::encoder_backward(g.wte, g.wpe, workspace("dresidual"), tokens_.data(), B_, T_, C, dropout);
    return;
  }
  // 16-bit: the batch's distinct wte rows and wpe[0, T) summed in fp32, then added once each.
  const EmbeddingTensors<std::uint16_t> g(static_cast<std::uint16_t*>(grads.data), config_);
  const std::int64_t U = static_cast<std::int64_t>(unique_tokens_.size());
  float* dwte = workspace("grad32");
  float* dwpe = dwte + U * C;
  std::memset(dwte, 0, static_cast<std::size_t>((U + T_) * C) * sizeof(float));
  cpu::encoder_backward(dwte, dwpe, workspace("dresidual"), token_slots_.data(), B_, T_, C,
                        dropout);
#pragma omp parallel for schedule(static)
  for (std::int64_t slot = 0; slot < U; ++slot)
    cpu::accumulate(g.wte + std::int64_t(unique_tokens_[slot]) * C, grads.dtype, dwte + slot * C,
                    C);
  cpu::accumulate(g.wpe, grads.dtype, dwpe, T_ * C);
}

}  // namespace zero::gpt2
