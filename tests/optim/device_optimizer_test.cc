// DeviceContext::optimizer_step on the CPU backend (the optional 16-bit gradient and parameter
// copy fields included) against Optimizer::step, and Optimizer::rule(), the description a device
// backend runs as its own kernel.
#include <gtest/gtest.h>

#include "device_optimizer_checks.h"
#include "zero/core/error.h"
#include "zero/optim/optimizers.h"

namespace zero {
namespace {

TEST(DeviceOptimizer, CpuContextMatchesTheOptimizer) {
  auto context = make_cpu_context(StreamStress{});
  testing::check_device_optimizers(*context);
}

TEST(DeviceOptimizer, CpuContextRefusesAmbiguousGradients) {
  auto context = make_cpu_context(StreamStress{});
  config::OptimizerConfig options;
  options.type = config::OptimizerType::kAdamW;
  auto optimizer = optim::make_optimizer(options);
  std::vector<float> params(4), grads(4), state(8);
  std::vector<std::uint16_t> grads16(4);
  std::vector<ShardChunk> chunks(1);
  chunks[0].params = params.data();
  chunks[0].grads = grads.data();
  chunks[0].grads_16bit = grads16.data();
  chunks[0].state = state.data();
  chunks[0].num_elements = 4;
  OptimizerStep step;
  EXPECT_THROW(context->optimizer_step(context->compute_stream(), *optimizer, chunks, step), Error);
  chunks[0].grads_16bit = nullptr;
  chunks[0].params_16bit = grads16.data();
  chunks[0].params_16bit_dtype = DType::kFloat32;
  EXPECT_THROW(context->optimizer_step(context->compute_stream(), *optimizer, chunks, step), Error);
}

TEST(DeviceOptimizer, RuleDescribesTheConfiguredOptimizer) {
  config::OptimizerConfig adamw;
  adamw.type = config::OptimizerType::kAdamW;
  adamw.adam_w_mode = false;  // AdamW's type wins, as in Adam's constructor
  adamw.betas = {0.8, 0.95};
  adamw.eps = 1e-6;
  adamw.weight_decay = 0.1;
  adamw.bias_correction = false;
  auto rule = optim::make_optimizer(adamw)->rule();
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->kind, OptimizerRule::Kind::kAdam);
  EXPECT_TRUE(rule->adam_w_mode);
  EXPECT_EQ(rule->beta2, 0.95);
  EXPECT_EQ(rule->eps, 1e-6);
  EXPECT_EQ(rule->weight_decay, 0.1);
  EXPECT_FALSE(rule->bias_correction);

  config::OptimizerConfig adam = adamw;
  adam.type = config::OptimizerType::kAdam;
  EXPECT_FALSE(optim::make_optimizer(adam)->rule()->adam_w_mode);

  config::OptimizerConfig sgd;
  sgd.type = config::OptimizerType::kSgd;
  sgd.momentum = 0.9;
  sgd.nesterov = true;
  sgd.weight_decay = 0.01;
  rule = optim::make_optimizer(sgd)->rule();
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->kind, OptimizerRule::Kind::kSgd);
  EXPECT_EQ(rule->momentum, 0.9);
  EXPECT_EQ(rule->dampening, 0.0);
  EXPECT_TRUE(rule->nesterov);
  EXPECT_EQ(rule->weight_decay, 0.01);

  config::OptimizerConfig lamb;
  lamb.type = config::OptimizerType::kLamb;
  lamb.max_coeff = 5.0;
  lamb.min_coeff = 0.1;
  rule = optim::make_optimizer(lamb)->rule();
  ASSERT_TRUE(rule.has_value());
  EXPECT_EQ(rule->kind, OptimizerRule::Kind::kLamb);
  EXPECT_EQ(rule->max_coeff, 5.0);
  EXPECT_EQ(rule->min_coeff, 0.1);
}

}  // namespace
}  // namespace zero
