// state_policy() (zero/engine/state_policy.h): the stage table (what each ZeRO stage shards), the
// precision's dtypes and offload's memory spaces.
#include "zero/engine/state_policy.h"

#include <gtest/gtest.h>

#include <string>

#include "zero/core/error.h"

namespace zero {
namespace {

TEST(StatePolicy, EachStageShardsWhatTheZeroPaperSays) {
  struct Row {
    bool full_params, param_shard, full_grads, grad_shard, partitioned, gather_after_step;
  };
  const Row rows[4] = {{true, false, true, false, false, false},
                       {true, false, true, false, true, true},
                       {true, false, false, true, true, true},
                       {false, true, false, true, true, false}};
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const StatePolicy policy = state_policy(stage, DType::kFloat32, DType::kFloat32);
    const Row& row = rows[stage];
    EXPECT_EQ(policy.stage, stage);
    EXPECT_EQ(policy.full_params, row.full_params);
    EXPECT_EQ(policy.param_shard, row.param_shard);
    EXPECT_EQ(policy.full_grads, row.full_grads);
    EXPECT_EQ(policy.grad_shard, row.grad_shard);
    EXPECT_EQ(policy.partitioned, row.partitioned);
    EXPECT_EQ(policy.gather_after_step, row.gather_after_step);
    EXPECT_FALSE(policy.master_weights);  // fp32 compute: the shard is the master
    EXPECT_FALSE(policy.host_step);
    EXPECT_EQ(policy.master_space, MemorySpace::kDevice);
  }
  EXPECT_THROW(state_policy(4, DType::kFloat32, DType::kFloat32), Error);
}

TEST(StatePolicy, SixteenBitComputeKeepsAnFp32MasterAndModelGradsFollowTheStage) {
  const StatePolicy stage1 = state_policy(1, DType::kBFloat16, DType::kFloat32);
  EXPECT_TRUE(stage1.master_weights);
  EXPECT_EQ(stage1.model_grads, DType::kFloat32);  // backward adds into the full fp32 grads
  const StatePolicy stage2 = state_policy(2, DType::kBFloat16, DType::kFloat32);
  EXPECT_EQ(stage2.model_grads, DType::kBFloat16);  // a per-micro-step buffer in compute dtype
  EXPECT_EQ(stage2.grad_shard_dtype, DType::kFloat32);
  EXPECT_TRUE(stage2.fp32_grads_for_step());
}

TEST(StatePolicy, OffloadPutsEachStateInItsSpace) {
  EngineOptions options;
  options.stage = 3;
  options.bf16.enabled = true;
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  options.offload_optimizer.pin_memory = true;
  options.offload_param.device = config::OffloadDevice::kNvme;
  const StatePolicy policy = state_policy(options);
  EXPECT_EQ(policy.compute, DType::kBFloat16);
  EXPECT_EQ(policy.accumulate, DType::kFloat32);
  EXPECT_TRUE(policy.host_step);
  EXPECT_EQ(policy.master_space, MemorySpace::kHostPinned);
  EXPECT_EQ(policy.optimizer_state_space, MemorySpace::kHostPinned);
  EXPECT_EQ(policy.grad_shard_space, MemorySpace::kHostPinned);
  EXPECT_EQ(policy.params_space, MemorySpace::kNvme);
  EXPECT_EQ(policy.param_cache_space, MemorySpace::kHost);
  EXPECT_TRUE(policy.swap_params());
  EXPECT_TRUE(policy.offload_params());
  EXPECT_FALSE(policy.swap_optimizer());
  // offload_param below stage 3 changes nothing.
  options.stage = 2;
  EXPECT_EQ(state_policy(options).params_space, MemorySpace::kDevice);
}

// The swapped gradient partition holds the reduced 16-bit values only where each element is
// reduced once a step: stages 2-3, one micro-step, 16-bit model gradients; else fp32.
TEST(StatePolicy, SwappedGradientsAreSixteenBitOnlyWithoutAccumulation) {
  EngineOptions options;
  options.stage = 3;
  options.bf16.enabled = true;
  options.offload_optimizer.device = config::OffloadDevice::kNvme;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kBFloat16);
  options.stage = 2;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kBFloat16);
  options.stage = 1;  // the accumulated full gradients are reduced (fp32 with bf16)
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kFloat32);
  options.stage = 3;
  options.gradient_accumulation_steps = 2;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kFloat32);
  options.gradient_accumulation_steps = 1;
  options.bf16.enabled = false;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kFloat32);
  options.fp16.enabled = true;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kFloat16);
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  EXPECT_EQ(state_policy(options).grad_swap_dtype, DType::kFloat32);
}

}  // namespace
}  // namespace zero
