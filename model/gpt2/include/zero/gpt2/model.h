// GPT2Model: the standalone driver that owns every unit's parameters and gradients (world size
// 1) and runs GPT2Compute over them; what the tests, the benchmark and sampling use. The engine
// replaces it, owning the (sharded) unit buffers and calling GPT2Compute itself.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/flat_buffer.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {

class GPT2Model {
 public:
  // Parameters (kParams) and gradients (kGrads) of each unit, fp32, world-size-1 layouts.
  // Parameters start as zeros; call init() or load a checkpoint. The allocator must outlive it.
  GPT2Model(const GPT2Config& config, Allocator& allocator);

  const GPT2Config& config() const { return config_; }
  const std::vector<UnitSpec>& units() const { return units_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  FlatBuffer& params(int unit) { return params_[unit]; }
  const FlatBuffer& params(int unit) const { return params_[unit]; }
  FlatBuffer& grads(int unit) { return grads_[unit]; }
  const FlatBuffer& grads(int unit) const { return grads_[unit]; }
  float* param_data(int unit) const { return static_cast<float*>(params_[unit].data()); }
  float* grad_data(int unit) const { return static_cast<float*>(grads_[unit].data()); }

  // GPT-2 initialisation from `seed` (init_unit_range over each whole unit).
  void init(std::uint64_t seed);
  void zero_grads();

  // One forward over all units; returns the loss (0 without targets). See GPT2Compute::set_inputs.
  float forward(GPT2Compute& compute, std::span<const int> tokens,
                std::span<const int> targets = {}, DropoutKey dropout = {}) const;
  // Backward after forward with targets: accumulates into grads().
  void backward(GPT2Compute& compute, float loss_scale = -1.0f);

 private:
  GPT2Config config_;
  std::vector<UnitSpec> units_;
  std::vector<FlatBuffer> params_, grads_;
};

}  // namespace zero::gpt2
