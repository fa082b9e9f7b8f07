// DeepSpeed config -> EngineOptions: real configs map field for field; what the CPU engine cannot
// run is an error naming the JSON path.
#include "zero/engine/from_config.h"

#include <gtest/gtest.h>

#include "../common/test_data.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {
namespace {

EngineOptionsResult map_json(const std::string& json, config::TrainerValues trainer = {}) {
  return engine_options_from_config(config::resolve_config(json, trainer, "test.json").config);
}

TEST(EngineFromConfig, MapsZeroSectionOptimizerAndScheduler) {
  const auto result = map_json(R"({
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3, "gradient_clipping": 1.0,
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e5, "stage3_prefetch_bucket_size": 1000,
                          "stage3_param_persistence_threshold": 77, "stage3_max_live_parameters": 1e6},
    "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10, "total_num_steps": 100,
                                                      "warmup_max_lr": 3e-4, "warmup_type": "linear"}}})");
  const EngineOptions& options = result.options;
  EXPECT_EQ(options.stage, 3);
  EXPECT_EQ(options.gradient_accumulation_steps, 3);
  EXPECT_EQ(options.reduce_bucket_size, 500000);
  EXPECT_EQ(options.prefetch_bucket_size, 1000);
  EXPECT_EQ(options.param_persistence_threshold, 77);
  EXPECT_EQ(options.max_live_parameters, 1000000);
  EXPECT_TRUE(options.overlap_comm);  // DeepSpeed's stage-3 default
  EXPECT_EQ(options.gradient_clipping, 1.0);
  EXPECT_EQ(options.optimizer.type, config::OptimizerType::kAdamW);
  EXPECT_DOUBLE_EQ(options.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(options.optimizer.betas[1], 0.95);
  EXPECT_DOUBLE_EQ(options.optimizer.weight_decay, 0.1);
  EXPECT_EQ(options.scheduler.type, config::SchedulerType::kWarmupDecayLR);
  EXPECT_EQ(options.scheduler.total_num_steps, 100);
  EXPECT_EQ(options.scheduler.warmup_type, config::WarmupType::kLinear);
  EXPECT_TRUE(result.warnings.empty());
}

TEST(EngineFromConfig, DefaultOptimizerWhenConfigHasNone) {
  config::OptimizerConfig fallback{.type = config::OptimizerType::kSgd, .lr = 5e-5};
  const auto config = config::resolve_config(R"({"train_batch_size": 8})", {}, "t.json").config;
  const EngineOptions options = engine_options_from_config(config, fallback).options;
  EXPECT_EQ(options.optimizer.type, config::OptimizerType::kSgd);
  EXPECT_DOUBLE_EQ(options.optimizer.lr, 5e-5);
  EXPECT_EQ(engine_options_from_config(config).options.optimizer.type,
            config::OptimizerType::kAdamW);
  EXPECT_THROW(engine_options_from_config(config, config::OptimizerConfig{}), Error);
}

TEST(EngineFromConfig, OffloadSectionsReachTheEngine) {
  const auto nvme = map_json(R"({"train_batch_size": 8, "bf16": {"enabled": true},
                 "aio": {"block_size": 262144, "queue_depth": 16},
                 "zero_optimization": {"stage": 3, "sub_group_size": 5000,
                   "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp",
                                         "pipeline_read": true},
                   "offload_param": {"device": "nvme", "nvme_path": "/tmp",
                                     "max_in_cpu": 1000}}})");
  EXPECT_TRUE(nvme.warnings.empty());
  EXPECT_EQ(nvme.options.aio.block_size, 262144);
  EXPECT_EQ(nvme.options.aio.queue_depth, 16);
  EXPECT_EQ(nvme.options.sub_group_size, 5000);
  EXPECT_TRUE(nvme.options.offload_optimizer.pipeline_read);
  EXPECT_EQ(nvme.options.offload_param.max_in_cpu, 1000);
  const StatePolicy policy = state_policy(nvme.options);
  EXPECT_EQ(policy.optimizer_state_space, MemorySpace::kNvme);
  EXPECT_EQ(policy.params_space, MemorySpace::kNvme);
  EXPECT_TRUE(policy.host_step);

  const auto cpu = map_json(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2,
                                "offload_optimizer": {"device": "cpu", "pin_memory": true}}})");
  EXPECT_TRUE(cpu.warnings.empty());
  EXPECT_EQ(state_policy(cpu.options).optimizer_state_space, MemorySpace::kHostPinned);
  // offload_param below stage 3: ignored, with a warning naming the key.
  const auto param = map_json(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2,
                                  "offload_optimizer": {"device": "cpu"},
                                  "offload_param": {"device": "cpu"}}})");
  ASSERT_EQ(param.warnings.size(), 1u);
  EXPECT_NE(param.warnings[0].find("offload_param.device"), std::string::npos);
  EXPECT_EQ(state_policy(param.options).params_space, MemorySpace::kDevice);
  // Offload needs ZeRO (DeepSpeed): stage 0 is an error naming the key.
  try {
    map_json(R"({"train_batch_size": 8, "zero_optimization": {"stage": 0,
                 "offload_optimizer": {"device": "cpu"}}})");
    FAIL() << "accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("zero_optimization.offload_optimizer.device cpu needs ZeRO stage"),
              std::string::npos)
        << message;
  }
}

// Mixed precision runs: the sections and data_types.grad_accum_dtype reach the engine, whose
// state policy picks the dtypes (bf16 accumulates in fp32 unless told, fp16 in fp16).
TEST(EngineFromConfig, MixedPrecisionSectionsAndAccumulationDtype) {
  const EngineOptions bf16 =
      map_json(R"({"train_batch_size": 8, "bf16": {"enabled": true}})").options;
  EXPECT_TRUE(bf16.bf16.enabled);
  EXPECT_EQ(state_policy(bf16).compute, DType::kBFloat16);
  EXPECT_EQ(state_policy(bf16).accumulate, DType::kFloat32);
  const EngineOptions bf16_accumulating = map_json(
                                              R"({"train_batch_size": 8, "bf16": {"enabled": true},
          "data_types": {"grad_accum_dtype": "bf16"}})")
                                              .options;
  EXPECT_EQ(state_policy(bf16_accumulating).accumulate, DType::kBFloat16);
  const EngineOptions fp16 =
      map_json(R"({"train_batch_size": 8, "fp16": {"enabled": true, "loss_scale_window": 100}})")
          .options;
  EXPECT_EQ(state_policy(fp16).compute, DType::kFloat16);
  EXPECT_EQ(state_policy(fp16).accumulate, DType::kFloat16);
  EXPECT_EQ(fp16.fp16.loss_scale_window, 100);
  EXPECT_EQ(state_policy(EngineOptions{}).compute, DType::kFloat32);
  // communication_data_type: the reductions use the gradients' dtype; another one is a warning.
  const auto fp32_comm = map_json(R"({"train_batch_size": 8, "fp16": {"enabled": true},
                                      "communication_data_type": "fp32"})");
  ASSERT_EQ(fp32_comm.warnings.size(), 1u);
  EXPECT_NE(fp32_comm.warnings[0].find("communication_data_type"), std::string::npos);
  EXPECT_TRUE(map_json(R"({"train_batch_size": 8, "fp16": {"enabled": true},
                           "communication_data_type": "fp16"})")
                  .warnings.empty());
  // What is not built is named.
  for (
      const char* text :
      {R"({"train_batch_size": 8, "bf16": {"enabled": true},
            "data_types": {"grad_accum_dtype": "fp16"}})",
       R"({"train_batch_size": 8, "data_types": {"grad_accum_dtype": "bf16"}})",
       R"({"train_batch_size": 8, "fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})"}) {
    try {
      map_json(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_TRUE(message.find("grad_accum_dtype") != std::string::npos ||
                  message.find("fp16_master_weights_and_grads") != std::string::npos)
          << message;
    }
  }
}

TEST(EngineFromConfig, ZeroBucketSizeMeansPerUnitReduction) {
  const EngineOptions options =
      map_json(
          R"({"train_batch_size": 4, "zero_optimization": {"stage": 2, "reduce_bucket_size": 0}})")
          .options;
  EXPECT_EQ(options.reduce_bucket_size, 0);  // as the config says
  // The engine's smallest bucket: one world × alignment quantum, so each unit flushes alone.
  const std::vector<std::size_t> sizes = {1000, 1000};
  EXPECT_EQ(reduce_bucket_elements(options, sizes, 2).bucket_elements,
            2 * options.alignment_elements);
}

TEST(EngineFromConfig, RealMegatronZero2OffloadConfig) {
  ZERO_REQUIRE_SHARED_DATA("ds_configs");
  const auto path =
      testing::shared_data_dir() / "ds_configs" /
      "deepspeedai__DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2_offload.json";
  auto resolved = config::load_config_file(path, {});
  const auto result = engine_options_from_config(resolved.config);
  EXPECT_TRUE(result.options.fp16.enabled);  // fp16 with the config's dynamic loss scaler
  EXPECT_EQ(result.options.stage, 2);
  EXPECT_EQ(result.options.reduce_bucket_size,
            resolved.config.zero_optimization.reduce_bucket_size);
  // No "optimizer" section: the trainer's default optimizer applies.
  EXPECT_EQ(resolved.config.optimizer.type, config::OptimizerType::kNone);
  EXPECT_EQ(result.options.optimizer.type, EngineOptions{}.optimizer.type);
  // cpu_offload -> offload_optimizer.device = cpu: accepted, the optimizer runs on the host.
  EXPECT_TRUE(result.warnings.empty());
  EXPECT_EQ(result.options.offload_optimizer.device, config::OffloadDevice::kCpu);
  EXPECT_TRUE(state_policy(result.options).host_step);
}

}  // namespace
}  // namespace zero
