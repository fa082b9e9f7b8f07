// GPT2Model: the world-size-1 driver over GPT2Compute, and the local AdamW used by the tests.
#include "zero/gpt2/model.h"

#include <cmath>
#include <cstring>

#include "zero/core/error.h"

namespace zero::gpt2 {

GPT2Model::GPT2Model(const GPT2Config& config, Allocator& allocator)
    : config_(config), units_(gpt2_units(config)) {
  for (const UnitSpec& unit : units_) {
    FlatLayout layout(unit.tensors, 1, 16);
    params_.emplace_back(layout, DType::kFloat32, allocator, MemoryCategory::kParams);
    grads_.emplace_back(std::move(layout), DType::kFloat32, allocator, MemoryCategory::kGrads);
  }
  if (allocator.planning()) return;  // recorded, not allocated: nothing to zero
  for (int u = 0; u < num_units(); ++u) {
    std::memset(params_[u].data(), 0, params_[u].size_bytes());
    std::memset(grads_[u].data(), 0, grads_[u].size_bytes());
  }
}

void GPT2Model::init(std::uint64_t seed) {
  for (int u = 0; u < num_units(); ++u)
    init_unit_range(config_, units_[u], seed, {0, params_[u].layout().padded_num_elements()},
                    param_data(u));
}

void GPT2Model::zero_grads() {
  for (FlatBuffer& grads : grads_) std::memset(grads.data(), 0, grads.size_bytes());
}

float GPT2Model::forward(GPT2Compute& compute, std::span<const int> tokens,
                         std::span<const int> targets, DropoutKey dropout) const {
  ZERO_CHECK(compute.config().n_layer == config_.n_layer &&
                 compute.config().n_embd == config_.n_embd &&
                 compute.config().vocab_size == config_.vocab_size,
             "GPT-2 forward: the compute was built for another config");
  compute.set_inputs(tokens, targets, dropout);
  compute.forward_embeddings(param_data(embeddings_unit()));
  for (int layer = 0; layer < config_.n_layer; ++layer)
    compute.forward_block(layer, param_data(block_unit(layer)));
  compute.forward_head(param_data(final_norm_unit(config_)), param_data(head_unit(config_)));
  return compute.loss();
}

void GPT2Model::backward(GPT2Compute& compute, float loss_scale) {
  const int norm = final_norm_unit(config_), head = head_unit(config_);
  const int embeddings = embeddings_unit();
  compute.backward_head(param_data(norm), param_data(head), grad_data(norm), grad_data(head),
                        loss_scale);
  for (int layer = static_cast<int>(config_.n_layer) - 1; layer >= 0; --layer)
    compute.backward_block(layer, param_data(block_unit(layer)), grad_data(block_unit(layer)));
  compute.backward_embeddings(param_data(embeddings), grad_data(embeddings));
}

}  // namespace zero::gpt2
