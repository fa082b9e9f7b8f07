// Optimizer::step_on on the CPU backend (the optional 16-bit gradient and parameter copy fields
// included) against Optimizer::step, and the optimizers' hyperparams(), what their kernels (the
// CPU ones and the CUDA ones) are handed for a step.
#include <gtest/gtest.h>

#include <random>
#include <vector>

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
  EXPECT_THROW(optimizer->step_on(*context, context->compute_stream(), chunks, step), Error);
  chunks[0].grads_16bit = nullptr;
  chunks[0].params_16bit = grads16.data();
  chunks[0].params_16bit_dtype = DType::kFloat32;
  EXPECT_THROW(optimizer->step_on(*context, context->compute_stream(), chunks, step), Error);
}

// The engine steps 16-bit accumulated gradients one unit at a time (each converted to fp32 into
// one workspace, engine_step.cc): every optimizer, stepped chunk by chunk (no tensor spanning
// two), must give the numbers of one call over all chunks, bit for bit, with a stand-in
// all-reduce (Lamb's per-tensor sums) that is not the identity.
TEST(DeviceOptimizer, ChunkByChunkStepsEqualOneCallOverEveryChunk) {
  auto context = make_cpu_context(StreamStress{});
  std::mt19937 random(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<std::size_t> counts = {37, 5, 1023};
  for (const testing::DeviceOptimizerCase& row : testing::device_optimizer_cases()) {
    SCOPED_TRACE(row.name);
    auto whole = optim::make_optimizer(row.options);
    auto by_chunk = optim::make_optimizer(row.options);
    const auto states = static_cast<std::size_t>(whole->states_per_element());
    // Two copies of each chunk's params and state (one per way of stepping), one of its grads.
    std::vector<std::vector<float>> params[2], state[2], grads;
    std::vector<ShardChunk> chunks[2];
    int tensor = 0;
    for (std::size_t count : counts) {
      std::vector<float> p(count), m(states * count), g(count);
      for (float& value : p) value = normal(random);
      for (float& value : m) value = 0.01f * std::fabs(normal(random));
      for (int way = 0; way < 2; ++way) {
        params[way].push_back(p);
        state[way].push_back(m);
      }
      grads.push_back(g);
      for (int way = 0; way < 2; ++way) {  // two tensors a chunk, one element of padding
        ShardChunk chunk;
        chunk.num_elements = count;
        chunk.segments = {{0, count / 2, tensor}};
        if (count - 1 > count / 2)
          chunk.segments.push_back({count / 2, count - 1 - count / 2, tensor + 1});
        chunks[way].push_back(chunk);
      }
      tensor += 2;
    }
    for (int way = 0; way < 2; ++way)
      for (std::size_t c = 0; c < counts.size(); ++c) {
        chunks[way][c].params = params[way][c].data();
        chunks[way][c].grads = grads[c].data();
        chunks[way][c].state = states > 0 ? state[way][c].data() : nullptr;
      }
    for (int step = 1; step <= 3; ++step) {
      for (std::vector<float>& g : grads)
        for (float& value : g) value = normal(random);
      OptimizerStep args;
      args.step = step;
      args.lr = row.options.lr;
      args.beta1 = row.options.betas[0];
      args.grad_scale = 0.5;
      args.num_tensors = tensor;
      args.all_reduce_sum = [](float* values, std::size_t count) {
        for (std::size_t i = 0; i < count; ++i) values[i] *= 2.0f;
      };
      whole->step_on(*context, context->compute_stream(), chunks[0], args);
      for (ShardChunk& chunk : chunks[1])
        by_chunk->step_on(*context, context->compute_stream(), {&chunk, 1}, args);
      context->compute_stream().synchronize();
      for (std::size_t c = 0; c < counts.size(); ++c) {
        for (std::size_t i = 0; i < counts[c]; ++i)
          ASSERT_EQ(params[1][c][i], params[0][c][i])
              << "step " << step << " chunk " << c << " " << i;
        for (std::size_t i = 0; i < state[0][c].size(); ++i)
          ASSERT_EQ(state[1][c][i], state[0][c][i])
              << "step " << step << " chunk " << c << " " << i;
      }
    }
  }
}

TEST(DeviceOptimizer, HyperparamsAreTheConfiguredOnesWithTheStepsValues) {
  OptimizerStep step;
  step.step = 3;
  step.lr = 0.25;
  step.beta1 = 0.7;  // a cycled beta1 wins over the configured one
  step.grad_scale = 0.125;
  config::OptimizerConfig adamw;
  adamw.type = config::OptimizerType::kAdamW;
  adamw.adam_w_mode = false;  // AdamW's type wins, as in Adam's constructor
  adamw.betas = {0.8, 0.95};
  adamw.eps = 1e-6;
  adamw.weight_decay = 0.1;
  adamw.bias_correction = false;
  const optim::AdamHyperparams adam = optim::Adam(adamw).hyperparams(step);
  EXPECT_TRUE(adam.adam_w_mode);
  EXPECT_EQ(adam.lr, 0.25);
  EXPECT_EQ(adam.beta1, 0.7);
  EXPECT_EQ(adam.beta2, 0.95);
  EXPECT_EQ(adam.eps, 1e-6);
  EXPECT_EQ(adam.weight_decay, 0.1);
  EXPECT_FALSE(adam.bias_correction);
  EXPECT_EQ(adam.step, 3);
  EXPECT_EQ(adam.grad_scale, 0.125);
  EXPECT_EQ(adam.threads, 0);
  config::OptimizerConfig plain_adam = adamw;
  plain_adam.type = config::OptimizerType::kAdam;
  EXPECT_FALSE(optim::Adam(plain_adam).hyperparams(step).adam_w_mode);

  config::OptimizerConfig sgd_options;
  sgd_options.type = config::OptimizerType::kSgd;
  sgd_options.momentum = 0.9;
  sgd_options.nesterov = true;
  sgd_options.weight_decay = 0.01;
  const optim::Sgd sgd(sgd_options);
  const optim::SgdHyperparams later = sgd.hyperparams(step);
  EXPECT_EQ(later.lr, 0.25);
  EXPECT_EQ(later.momentum, 0.9);
  EXPECT_EQ(later.dampening, 0.0);
  EXPECT_TRUE(later.nesterov);
  EXPECT_EQ(later.weight_decay, 0.01);
  EXPECT_EQ(later.grad_scale, 0.125);
  EXPECT_FALSE(later.first_step);
  step.step = 1;
  EXPECT_TRUE(sgd.hyperparams(step).first_step);

  config::OptimizerConfig lamb_options;
  lamb_options.type = config::OptimizerType::kLamb;
  lamb_options.betas = {0.85, 0.98};
  lamb_options.max_coeff = 5.0;
  lamb_options.min_coeff = 0.1;
  const optim::LambHyperparams lamb = optim::Lamb(lamb_options).hyperparams(step);
  EXPECT_EQ(lamb.beta1, 0.7);
  EXPECT_EQ(lamb.beta2, 0.98);
  EXPECT_EQ(lamb.step, 1);
  EXPECT_EQ(lamb.max_coeff, 5.0);
  EXPECT_EQ(lamb.min_coeff, 0.1);
}

}  // namespace
}  // namespace zero
