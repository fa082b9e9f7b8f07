// Decoder (decoder.h): the model's forward over new rows with a KV cache, through the kernel seam.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "compute_internal.h"
#include "zero/core/error.h"
#include "zero/gpt2/decoder.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

Decoder::Decoder(const GPT2Model& model, DeviceContext& context, std::int64_t max_positions,
                 DType param_dtype)
    : model_(model),
      context_(context),
      kernels_(make_kernels(context)),
      max_positions_(max_positions),
      param_dtype_(param_dtype),
      block_layout_(std::make_shared<BlockLayout>(block_layout(model.config()))) {
  const GPT2Config& config = model.config();
  ZERO_CHECK(max_positions >= 1 && max_positions <= config.n_positions, "decoder: a cache of ",
             max_positions, " positions, expected [1, n_positions = ", config.n_positions, "]");
  ZERO_CHECK(!context.planning(), "decoder: a planning context runs no kernels");
  if (param_dtype != DType::kFloat32 || !context.host_addressable(MemorySpace::kDevice))
    upload_params(param_dtype);
  allocate(param_dtype);
}

Decoder::~Decoder() {
  try {  // queued work may still read the parameters and the cache
    context_.compute_stream().synchronize();
  } catch (...) {
  }
}

// Each unit rounded on the host: into its device buffer where the host addresses it, else into
// one pinned buffer of the largest unit's size, copied and waited for unit by unit.
void Decoder::upload_params(DType param_dtype) {
  Allocator& device_memory = context_.allocator(MemorySpace::kDevice);
  const bool host_addressable = context_.host_addressable(MemorySpace::kDevice);
  std::size_t largest = 0;
  for (int unit = 0; unit < model_.num_units(); ++unit)
    largest = std::max(largest, model_.params(unit).layout().padded_num_elements());
  Buffer staging;
  if (!host_addressable)
    staging = context_.allocator(MemorySpace::kHostPinned)
                  .allocate(largest * size_of(param_dtype), MemoryCategory::kWorkspace);
  Stream& stream = context_.compute_stream();
  for (int unit = 0; unit < model_.num_units(); ++unit) {
    const FlatBuffer& host = model_.params(unit);
    FlatBuffer& device = device_params_.emplace_back(host.layout(), param_dtype, device_memory,
                                                     MemoryCategory::kParams);
    void* rounded = host_addressable ? device.data() : staging.data();
    convert(host.data(), DType::kFloat32, rounded, param_dtype,
            host.layout().padded_num_elements());
    if (host_addressable) continue;
    context_.copy(stream, rounded, device.data(), device.size_bytes());
    stream.synchronize();  // before the staging buffer takes the next unit
  }
}

ConstUnitData Decoder::unit_params(int unit) const {
  if (device_params_.empty()) return model_.param_data(unit);
  return {device_params_[unit].data(), device_params_[unit].dtype()};
}

// The cache, kChunkRows rows of each activation (views of one allocation, 64-byte aligned), the
// 16-bit GEMMs' operand staging, the rotary table, and the pinned logits row.
void Decoder::allocate(DType param_dtype) {
  const GPT2Config& config = model_.config();
  const BlockWidths widths = block_widths(config);
  const std::int64_t R = kChunkRows, C = config.n_embd, HS = config.head_size();
  const std::int64_t L = config.n_layer, KVH = config.kv_heads(), Vp = config.padded_vocab_size();
  Allocator& device = context_.allocator(MemorySpace::kDevice);
  cache_ =
      device.allocate(static_cast<std::size_t>(L * 2 * KVH * max_positions_ * HS) * sizeof(float),
                      MemoryCategory::kActivations);
  const bool rope = family_spec(config.family).positions == PositionKind::kRope;
  const std::int64_t vectors = std::max<std::int64_t>(block_vector_elements(config), 2 * C);
  const DType logits_type = logits_dtype(context_.device().kind, param_dtype);
  // (view, floats) in allocation order; logits last, in their own dtype.
  std::vector<std::pair<float**, std::int64_t>> views = {{&x_, R * C},
                                                         {&ln_, R * C},
                                                         {&mean_, R},
                                                         {&rstd_, R},
                                                         {&qkv_, R * widths.qkv},
                                                         {&kv_rows_, R * 2 * widths.kv},
                                                         {&atty_, R * widths.q},
                                                         {&proj_, R * C},
                                                         {&residual_, R * C},
                                                         {&fch_, R * widths.mlp_in},
                                                         {&act_, R * widths.mlp_hidden},
                                                         {&wpe_rows_, R * C},
                                                         {&ln_f_, C},
                                                         {&rope_, rope ? max_positions_ * HS : 0},
                                                         {&param32_, vectors}};
  auto aligned = [](std::int64_t floats) { return (floats + 15) / 16 * 16; };
  std::int64_t total = 0;
  for (const auto& view : views) total += aligned(view.second);
  const std::int64_t logits_floats = aligned((Vp * std::int64_t(size_of(logits_type)) + 3) / 4);
  activations_ = device.allocate(static_cast<std::size_t>(total + logits_floats) * sizeof(float),
                                 MemoryCategory::kActivations);
  float* next = activations_.data_as<float>();
  for (const auto& view : views) {
    *view.first = next;
    next += aligned(view.second);
  }
  logits_ = next;
  if (param_dtype != DType::kFloat32) {  // the widest GEMM operand of a chunk, twice
    const std::int64_t operand =
        R * std::max({C, widths.q, widths.qkv, widths.mlp_in, widths.mlp_hidden});
    staging_ = device.allocate(static_cast<std::size_t>(2 * operand) * size_of(param_dtype),
                               MemoryCategory::kWorkspace);
    scratch_.staged_a = staging_.data();
    scratch_.staged_b = static_cast<char*>(staging_.data()) + operand * size_of(param_dtype);
    scratch_.staged_a_elements = scratch_.staged_b_elements = operand;
  }
  if (rope)
    kernels_->rope_table(context_.compute_stream(), rope_,
                         {HS, config.rope_theta, config.rope_scaling}, max_positions_);
  last_row_ = context_.allocator(MemorySpace::kHostPinned)
                  .allocate(static_cast<std::size_t>(config.vocab_size) * size_of(logits_type),
                            MemoryCategory::kWorkspace);
}

float* Decoder::cache_half(int layer, int half) const {
  const GPT2Config& config = model_.config();
  const std::int64_t half_elements = config.kv_heads() * max_positions_ * config.head_size();
  return cache_.data_as<float>() + (2 * layer + half) * half_elements;
}

std::vector<float> Decoder::append(std::span<const int> tokens) {
  const GPT2Config& config = model_.config();
  ZERO_CHECK(!tokens.empty(), "decoder: append of no tokens");
  const std::int64_t count = std::ssize(tokens);
  ZERO_CHECK(positions_ + count <= max_positions_, "decoder: ", count, " tokens after ", positions_,
             " cached positions overflow the cache of ", max_positions_);
  for (const int token : tokens)
    ZERO_CHECK(token >= 0 && token < config.vocab_size, "decoder: token id ", token,
               " out of range [0, ", config.vocab_size, ")");
  for (std::int64_t first = 0; first < count; first += kChunkRows) {
    const std::int64_t rows = std::min(kChunkRows, count - first);
    forward_rows(tokens.subspan(first, rows), first + rows == count);
    positions_ += rows;
  }
  const DType dtype = logits_dtype(context_.device().kind, param_dtype_);
  Stream& stream = context_.compute_stream();
  context_.copy(stream, logits_, last_row_.data(),
                static_cast<std::size_t>(config.vocab_size) * size_of(dtype));
  stream.synchronize();
  std::vector<float> row(static_cast<std::size_t>(config.vocab_size));
  convert(last_row_.data(), dtype, row.data(), DType::kFloat32, row.size());
  return row;
}

// The embeddings of the chunk's rows (wte rows, plus wpe at their positions), every block, and
// the head on the last row when this is the append's last chunk. The host row indices must stay
// as they are until the stream has run the chunk's calls that read them (the CPU's asynchronous
// mode reads them there): off the host, a chunk with another after it is waited for.
void Decoder::forward_rows(std::span<const int> tokens, bool last) {
  const GPT2Config& config = model_.config();
  Kernels& k = *kernels_;
  Stream& s = context_.compute_stream();
  const std::int64_t rows = std::ssize(tokens), C = config.n_embd;
  const std::int64_t NH = config.n_head, KVH = config.kv_heads();
  token_rows_.assign(tokens.begin(), tokens.end());
  gather_rows_.clear();
  scatter_rows_.clear();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < 2 * KVH; ++j) {
      gather_rows_.push_back(r * (NH + 2 * KVH) + NH + j);  // qkv's row r as HS-wide rows
      scatter_rows_.push_back(j * max_positions_ + positions_ + r);
    }
  const ConstUnitData embeddings = unit_params(embeddings_unit());
  const bool learned = family_spec(config.family).positions == PositionKind::kLearned;
  k.widen_rows(s, learned ? proj_ : x_, embeddings.data, embeddings.dtype, token_rows_.data(), rows,
               C);
  if (learned) {  // x = wte[token] + wpe[position], encoder_forward's sum
    const std::int64_t wpe = (config.padded_vocab_size() + positions_) * C;
    const auto* base = static_cast<const char*>(embeddings.data);
    k.widen(s, wpe_rows_, base + wpe * std::int64_t(size_of(embeddings.dtype)), embeddings.dtype,
            rows * C);
    k.residual_forward(s, x_, proj_, wpe_rows_, 1, rows, C, {});
  }
  for (int layer = 0; layer < config.n_layer; ++layer) forward_block(layer, rows);
  if (last) forward_head(rows);
  if (!last && !context_.model_runs_on_host()) s.synchronize();
}

// norm → q/k/v → RoPE at the rows' positions → k/v into the cache → attention over the cache →
// out projection → residual + norm → MLP → residual, each choice the family's (family.h), as
// GPT2Compute's forward_block_impl without dropout.
void Decoder::forward_block(int layer, std::int64_t rows) {
  const GPT2Config& config = model_.config();
  Kernels& k = *kernels_;
  Stream& s = context_.compute_stream();
  const ConstUnitData unit = unit_params(block_unit(layer));
  const DType dtype = unit.dtype;
  const BlockParams p = block_params(k, s, unit, config, *block_layout_, param32_);
  const FamilySpec& family = family_spec(config.family);
  const BlockWidths widths = block_widths(config);
  const std::int64_t C = config.n_embd, HS = config.head_size(), H = widths.mlp_hidden;
  const std::int64_t NH = config.n_head, KVH = config.kv_heads();
  const WeightLayout weights = family.linear_layout;
  const bool layer_norm = family.norm == NormKind::kLayerNorm;
  const NormStatistics statistics{layer_norm ? mean_ : nullptr, rstd_};
  k.norm_forward(s, ln_, statistics, x_, p.norm1, rows, C);
  k.linear_forward(s,
                   {qkv_,
                    nullptr,
                    ln_,
                    {p.qkv_weight, dtype},
                    p.qkv_bias,
                    rows,
                    C,
                    widths.qkv,
                    p.qkv_stored_bias,
                    weights},
                   scratch_);
  if (family.positions == PositionKind::kRope)
    k.rope_forward(s, qkv_, rope_, max_positions_, {1, rows, NH + KVH, HS, widths.qkv, positions_});
  k.copy_rows(s, kv_rows_, qkv_, gather_rows_.data(), rows * 2 * KVH, HS, false);
  k.copy_rows(s, cache_half(layer, 0), kv_rows_, scatter_rows_.data(), rows * 2 * KVH, HS, true);
  k.cached_attention_forward(
      s, {atty_, qkv_, widths.qkv, cache_half(layer, 0), cache_half(layer, 1), rows, positions_,
          max_positions_, NH, KVH, HS});
  k.linear_forward(s,
                   {proj_,
                    nullptr,
                    atty_,
                    {p.out_weight, dtype},
                    p.out_bias,
                    rows,
                    widths.q,
                    C,
                    nullptr,
                    weights},
                   scratch_);
  k.residual_norm_forward(s, residual_, ln_, statistics, x_, proj_, p.norm2, 1, rows, C, {});
  const bool gelu = family.mlp == MlpKind::kGelu;
  k.linear_forward(s,
                   {fch_,
                    gelu ? ActivationOut{act_} : ActivationOut{},
                    ln_,
                    {p.mlp_in_weight, dtype},
                    p.mlp_in_bias,
                    rows,
                    C,
                    widths.mlp_in,
                    nullptr,
                    weights},
                   scratch_);
  if (!gelu) k.swiglu_forward(s, act_, fch_, rows, H);
  k.linear_forward(s,
                   {proj_,
                    nullptr,
                    act_,
                    {p.mlp_out_weight, dtype},
                    p.mlp_out_bias,
                    rows,
                    H,
                    C,
                    nullptr,
                    weights},
                   scratch_);
  k.residual_forward(s, x_, residual_, proj_, 1, rows, C, {});
}

// The final norm and the LM head on the chunk's last row: logits (1, Vp).
void Decoder::forward_head(std::int64_t rows) {
  const GPT2Config& config = model_.config();
  Kernels& k = *kernels_;
  Stream& s = context_.compute_stream();
  const std::int64_t C = config.n_embd;
  const NormKind kind = family_spec(config.family).norm;
  const ConstUnitData final_unit = unit_params(final_norm_unit(config));
  const float* weight = static_cast<const float*>(final_unit.data);
  if (final_unit.dtype != DType::kFloat32) {
    k.widen(s, param32_, final_unit.data, final_unit.dtype,
            kind == NormKind::kLayerNorm ? 2 * C : C);
    weight = param32_;
  }
  const bool layer_norm = kind == NormKind::kLayerNorm;
  const Norm norm{kind, weight, layer_norm ? weight + C : nullptr,
                  static_cast<float>(config.layer_norm_epsilon)};
  k.norm_forward(s, ln_f_, {layer_norm ? mean_ : nullptr, rstd_}, x_ + (rows - 1) * C, norm, 1, C);
  // The head's weight: wte leading the embeddings (tied), or lm_head.weight after the final
  // norm's weight (untied).
  const ConstUnitData head = unit_params(head_unit(config));
  const void* head_weight = config.tie_word_embeddings ? head.data
                                                       : static_cast<const char*>(head.data) +
                                                             C * std::int64_t(size_of(head.dtype));
  LogitsForward call;
  call.logits = logits_;
  call.logits_dtype = logits_dtype(context_.device().kind, param_dtype_);
  call.ln_f = ln_f_;
  call.wte = {head_weight, head.dtype};
  call.N = 1;
  call.V = config.vocab_size;
  call.Vp = config.padded_vocab_size();
  call.C = C;
  k.logits_forward(s, call, scratch_);
}

}  // namespace zero::gpt2
