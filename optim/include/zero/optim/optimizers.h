// Adam/AdamW, SGD and Lamb as zero::Optimizer implementations over the engine's shard chunks: on
// the host and on a CPU context through the CPU kernels (kernels.h), on a CUDA context through
// their fused kernels (optim/src/cuda/, in a build with CUDA), on the context's stream.
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
  // This step's hyperparameters for the kernels (adam_step, the CUDA ones): the configured ones
  // with the step's lr, beta1, step count and gradient scale (threads 0: the default).
  AdamHyperparams hyperparams(const OptimizerStep& step) const;
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;
  void step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
               const OptimizerStep& step) override;

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
  // This step's hyperparameters for the kernels (sgd_step, the CUDA ones): the configured ones
  // with the step's lr and gradient scale, first_step on step 1 (threads 0: the default).
  SgdHyperparams hyperparams(const OptimizerStep& step) const;
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;
  void step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
               const OptimizerStep& step) override;

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
  // This step's hyperparameters for the kernels (lamb_moments and lamb_apply, the CUDA ones): the
  // configured ones with the step's lr, beta1, step count and gradient scale (threads 0).
  LambHyperparams hyperparams(const OptimizerStep& step) const;
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override;
  void step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
               const OptimizerStep& step) override;

 private:
  config::OptimizerConfig options_;
};

// Adam, AdamW, SGD or Lamb as `options.type` says (config::optimizer_type_from_name() reads a
// name, case-insensitively); throws zero::Error naming the known types for kNone.
std::unique_ptr<Optimizer> make_optimizer(const config::OptimizerConfig& options);

}  // namespace zero::optim
