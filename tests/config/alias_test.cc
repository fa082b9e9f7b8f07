// Deprecated aliases and alternative spellings, mapped as DeepSpeed maps them, with warnings.
#include "config_test_util.h"

namespace zero::config::testing {
namespace {

constexpr const char* kBatch = R"("train_micro_batch_size_per_gpu": 1)";

std::string with_zero(const std::string& zero_body) {
  return std::string("{") + kBatch + R"(, "zero_optimization": {)" + zero_body + "}}";
}

TEST(Alias, CpuOffloadTurnsOnOptimizerOffloadToCpu) {
  const ConfigResult result = resolve(with_zero(R"("stage": 2, "cpu_offload": true)"));
  EXPECT_EQ(result.config.zero_optimization.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_TRUE(any_contains(result.warnings, "zero_optimization.cpu_offload: deprecated"));
  const ConfigResult off = resolve(with_zero(R"("stage": 2, "cpu_offload": false)"));
  EXPECT_EQ(off.config.zero_optimization.offload_optimizer.device, OffloadDevice::kNone);
}

TEST(Alias, CpuOffloadWithItsReplacementIsAnError) {
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": 2, "cpu_offload": true,
                                        "offload_optimizer": {"device": "cpu"})")),
                  "zero_optimization.cpu_offload: deprecated, and cannot be given together");
}

TEST(Alias, CpuOffloadParamTurnsOnParamOffloadToCpu) {
  const ConfigResult result = resolve(with_zero(R"("stage": 3, "cpu_offload_param": true)"));
  EXPECT_EQ(result.config.zero_optimization.offload_param.device, OffloadDevice::kCpu);
  EXPECT_TRUE(any_contains(result.warnings, "cpu_offload_param: deprecated"));
}

TEST(Alias, CpuOffloadUsePinMemoryWarnsAndChangesNothing) {
  const ConfigResult result =
      resolve(with_zero(R"("stage": 2, "cpu_offload": true, "cpu_offload_use_pin_memory": true)"));
  EXPECT_FALSE(result.config.zero_optimization.offload_optimizer.pin_memory);
  EXPECT_TRUE(any_contains(result.warnings, "cpu_offload_use_pin_memory: deprecated"));
}

TEST(Alias, Stage3GatherFp16WeightsMapsTo16Bit) {
  const ConfigResult result =
      resolve(with_zero(R"("stage": 3, "stage3_gather_fp16_weights_on_model_save": true)"));
  EXPECT_TRUE(result.config.zero_optimization.gather_16bit_weights_on_model_save);
  EXPECT_TRUE(
      any_contains(result.warnings, "stage3_gather_fp16_weights_on_model_save: deprecated"));
  EXPECT_CONTAINS(
      error_of(with_zero(R"("stage": 3, "stage3_gather_fp16_weights_on_model_save": true,
                                        "stage3_gather_16bit_weights_on_model_save": false)")),
      "cannot be given together");
}

TEST(Alias, BooleanZeroOptimizationMeansStageOneOrZero) {
  ConfigResult result =
      resolve(std::string("{") + kBatch + R"(, "zero_optimization": true, "allgather_size": 1e6})");
  EXPECT_EQ(result.config.zero_optimization.stage, 1);
  EXPECT_EQ(result.config.zero_optimization.allgather_bucket_size, 1'000'000);
  EXPECT_TRUE(any_contains(result.warnings, "zero_optimization: the boolean form is deprecated"));
  result = resolve(std::string("{") + kBatch + R"(, "zero_optimization": false})");
  EXPECT_EQ(result.config.zero_optimization.stage, 0);
  EXPECT_TRUE(any_contains(result.warnings, "deprecated"));
}

TEST(Alias, EveryStage3KnobAcceptsItsShortName) {
  const DeepSpeedConfig config = resolve(with_zero(R"("stage": 3, "prefetch_bucket_size": 11,
      "param_persistence_threshold": 12, "model_persistence_threshold": 13,
      "max_live_parameters": 14, "max_reuse_distance": 15,
      "gather_16bit_weights_on_model_save": true)"))
                                     .config;
  const ZeroOptimizationConfig& zero = config.zero_optimization;
  EXPECT_EQ(zero.prefetch_bucket_size, 11);
  EXPECT_EQ(zero.param_persistence_threshold, 12);
  EXPECT_EQ(zero.model_persistence_threshold, 13);
  EXPECT_EQ(zero.max_live_parameters, 14);
  EXPECT_EQ(zero.max_reuse_distance, 15);
  EXPECT_TRUE(zero.gather_16bit_weights_on_model_save);
  const DeepSpeedConfig long_names = resolve(with_zero(R"("stage": 3,
      "stage3_prefetch_bucket_size": 21, "stage3_param_persistence_threshold": 22,
      "stage3_model_persistence_threshold": 23, "stage3_max_live_parameters": 24,
      "stage3_max_reuse_distance": 25, "stage3_gather_16bit_weights_on_model_save": true)"))
                                         .config;
  EXPECT_EQ(long_names.zero_optimization.prefetch_bucket_size, 21);
  EXPECT_EQ(long_names.zero_optimization.param_persistence_threshold, 22);
  EXPECT_EQ(long_names.zero_optimization.model_persistence_threshold, 23);
  EXPECT_EQ(long_names.zero_optimization.max_live_parameters, 24);
  EXPECT_EQ(long_names.zero_optimization.max_reuse_distance, 25);
}

TEST(Alias, BothSpellingsOfOneKnobIsAnError) {
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": 3, "stage3_max_live_parameters": 1,
                                        "max_live_parameters": 2)")),
                  "zero_optimization.stage3_max_live_parameters: given twice");
}

TEST(Alias, Bfloat16IsTheOldNameOfBf16) {
  ConfigResult result = resolve(std::string("{") + kBatch + R"(, "bfloat16": {"enabled": true}})");
  EXPECT_TRUE(result.config.bf16.enabled);
  EXPECT_TRUE(any_contains(result.warnings, "bfloat16: the old name"));
  result = resolve(std::string("{") + kBatch +
                   R"(, "bf16": {"enabled": false}, "bfloat16": {"enabled": true}})");
  EXPECT_FALSE(result.config.bf16.enabled);
  EXPECT_TRUE(any_contains(result.warnings, "bfloat16: ignored because \"bf16\" is given"));
}

TEST(Alias, AioThreadCountIsTheOldNameOfIntraOpParallelism) {
  ConfigResult result = resolve(std::string("{") + kBatch + R"(, "aio": {"thread_count": 4}})");
  EXPECT_EQ(result.config.aio.intra_op_parallelism, 4);
  EXPECT_TRUE(any_contains(result.warnings, "aio.thread_count: the old name"));
  result = resolve(std::string("{") + kBatch +
                   R"(, "aio": {"thread_count": 4, "intra_op_parallelism": 2}})");
  EXPECT_EQ(result.config.aio.intra_op_parallelism, 2);
}

TEST(Alias, OverlapCommDefaultDependsOnTheStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    const DeepSpeedConfig config = resolve(with_zero("\"stage\": " + std::to_string(stage))).config;
    EXPECT_EQ(config.zero_optimization.overlap_comm, stage == 3) << "stage " << stage;
  }
  EXPECT_TRUE(resolve(with_zero(R"("stage": 3, "overlap_comm": null)"))
                  .config.zero_optimization.overlap_comm);
  EXPECT_FALSE(resolve(with_zero(R"("stage": 3, "overlap_comm": false)"))
                   .config.zero_optimization.overlap_comm);
  EXPECT_TRUE(resolve(with_zero(R"("stage": 1, "overlap_comm": true)"))
                  .config.zero_optimization.overlap_comm);
}

TEST(Alias, AdamDecouplesWeightDecayUnlessAdamWModeIsFalse) {
  auto optimizer = [](const std::string& type_and_params) {
    return resolve(std::string("{") + kBatch + R"(, "optimizer": )" + type_and_params + "}")
        .config.optimizer;
  };
  EXPECT_TRUE(optimizer(R"({"type": "Adam", "params": {"lr": 0.1}})").adam_w_mode);
  EXPECT_FALSE(optimizer(R"({"type": "Adam", "params": {"adam_w_mode": false}})").adam_w_mode);
  EXPECT_TRUE(optimizer(R"({"type": "AdamW", "params": {"adam_w_mode": false}})").adam_w_mode);
  EXPECT_EQ(optimizer(R"({"type": "adamw"})").type, OptimizerType::kAdamW);
  EXPECT_EQ(optimizer(R"({"type": "adamw"})").weight_decay, 0.0);  // FusedAdam's default
  EXPECT_EQ(optimizer(R"({"type": "AdamW", "params": {"torch_adam": true}})").weight_decay, 0.01);
  EXPECT_CONTAINS(error_of(std::string("{") + kBatch + R"(, "optimizer": {"type": "Adam",
                              "params": {"torch_adam": true, "bias_correction": false}}})"),
                  "optimizer.params.bias_correction: not an argument of torch.optim.Adam/AdamW");
  EXPECT_EQ(optimizer(R"({"type": "LAMB"})").type, OptimizerType::kLamb);
}

}  // namespace
}  // namespace zero::config::testing
