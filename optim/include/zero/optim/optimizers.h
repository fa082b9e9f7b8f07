// Adam/AdamW, SGD and Lamb as zero::Optimizer implementations over the engine's shard chunks.
#pragma once

#include <memory>

#include "zero/config/ds_config.h"
#include "zero/engine/optimizer.h"
#include "zero/optim/kernels.h"

namespace zero::optim {

// Adam (adam_w_mode false: L2 in the gradient) or AdamW (decoupled decay). State: exp_avg,
// exp_avg_sq.
class Adam final : public Optimizer {
 public:
  explicit Adam(const config::OptimizerConfig& options);
  std::string_view name() const override { return adam_w_mode_ ? "AdamW" : "Adam"; }
  int states_per_element() const override { return 2; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  double lr() const override { return options_.lr; }
  double beta1() const override { return options_.betas[0]; }
  std::optional<OptimizerRule> rule() const override {
    OptimizerRule rule;
    rule.kind = OptimizerRule::Kind::kAdam;
    rule.beta2 = options_.betas[1];
    rule.eps = options_.eps;
    rule.weight_decay = options_.weight_decay;
    rule.adam_w_mode = adam_w_mode_;
    rule.bias_correction = options_.bias_correction;
    return rule;
  }
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;

 private:
  config::OptimizerConfig options_;
  bool adam_w_mode_;
};

// SGD with optional momentum (torch.optim.SGD). State: momentum_buffer when momentum != 0.
class Sgd final : public Optimizer {
 public:
  explicit Sgd(const config::OptimizerConfig& options);
  std::string_view name() const override { return "SGD"; }
  int states_per_element() const override { return options_.momentum != 0.0 ? 1 : 0; }
  std::vector<std::string> state_names() const override;
  double lr() const override { return options_.lr; }
  double beta1() const override { return 0.0; }
  std::optional<OptimizerRule> rule() const override {
    OptimizerRule rule;
    rule.kind = OptimizerRule::Kind::kSgd;
    rule.weight_decay = options_.weight_decay;
    rule.momentum = options_.momentum;
    rule.dampening = options_.dampening;
    rule.nesterov = options_.nesterov;
    return rule;
  }
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;

 private:
  config::OptimizerConfig options_;
};

// Lamb (DeepSpeed FusedLamb). Per-tensor norms are summed over each rank's pieces of a tensor
// and all-reduced (OptimizerStep::all_reduce_sum) before the trust ratios are applied.
class Lamb final : public Optimizer {
 public:
  explicit Lamb(const config::OptimizerConfig& options);
  std::string_view name() const override { return "Lamb"; }
  int states_per_element() const override { return 2; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  double lr() const override { return options_.lr; }
  double beta1() const override { return options_.betas[0]; }
  std::optional<OptimizerRule> rule() const override {
    OptimizerRule rule;
    rule.kind = OptimizerRule::Kind::kLamb;
    rule.beta2 = options_.betas[1];
    rule.eps = options_.eps;
    rule.weight_decay = options_.weight_decay;
    rule.bias_correction = options_.bias_correction;
    rule.max_coeff = options_.max_coeff;
    rule.min_coeff = options_.min_coeff;
    return rule;
  }
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;

 private:
  config::OptimizerConfig options_;
};

// Adam, AdamW, SGD or Lamb as `options.type` says (config::optimizer_type_from_name() reads a
// name, case-insensitively); throws zero::Error naming the known types for kNone.
std::unique_ptr<Optimizer> make_optimizer(const config::OptimizerConfig& options);

}  // namespace zero::optim
