// "auto": filled from trainer flags (Hugging Face's table), unfilled, and contradicted.
#include "config_test_util.h"

namespace zero::config::testing {
namespace {

constexpr const char* kAllAuto = R"({
  "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
  "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                            "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupDecayLR",
                "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                           "warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                        "stage3_prefetch_bucket_size": "auto",
                        "stage3_param_persistence_threshold": "auto"}})";

TrainerValues all_flags() {
  TrainerValues trainer;
  trainer.world_size = 2;
  trainer.per_device_train_batch_size = 4;
  trainer.gradient_accumulation_steps = 3;
  trainer.learning_rate = 3e-5;
  trainer.adam_beta1 = 0.8;
  trainer.adam_beta2 = 0.95;
  trainer.adam_epsilon = 1e-6;
  trainer.weight_decay = 0.1;
  trainer.warmup_steps = 100;
  trainer.total_steps = 1000;
  trainer.max_grad_norm = 0.5;
  trainer.bf16 = true;
  trainer.hidden_size = 768;
  return trainer;
}

TEST(Auto, EveryKeyOfTheTableIsFilledFromItsFlag) {
  const ConfigResult result = resolve(kAllAuto, all_flags());
  const DeepSpeedConfig& config = result.config;
  EXPECT_EQ(config.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(config.gradient_accumulation_steps, 3);
  EXPECT_EQ(config.train_batch_size, 24);  // world 2 × 4 × 3
  EXPECT_EQ(config.gradient_clipping, 0.5);
  EXPECT_EQ(config.optimizer.lr, 3e-5);
  EXPECT_EQ(config.optimizer.betas[0], 0.8);
  EXPECT_EQ(config.optimizer.betas[1], 0.95);
  EXPECT_EQ(config.optimizer.eps, 1e-6);
  EXPECT_EQ(config.optimizer.weight_decay, 0.1);
  EXPECT_EQ(config.scheduler.warmup_min_lr, 0.0);  // always 0: no trainer flag
  EXPECT_EQ(config.scheduler.warmup_max_lr, 3e-5);
  EXPECT_EQ(config.scheduler.warmup_num_steps, 100);
  EXPECT_EQ(config.scheduler.total_num_steps, 1000);
  EXPECT_TRUE(config.bf16.enabled);
  EXPECT_FALSE(config.fp16.enabled);
  EXPECT_EQ(config.zero_optimization.reduce_bucket_size, 768 * 768);
  EXPECT_EQ(config.zero_optimization.prefetch_bucket_size, 530841);  // int(0.9 × 768²)
  EXPECT_EQ(config.zero_optimization.param_persistence_threshold, 7680);
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
}

TEST(Auto, HiddenSizeKeysBelowStage3FillOnlyTheReduceBucket) {
  TrainerValues trainer;
  trainer.hidden_size = 1024;
  const ConfigResult result = resolve(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
      "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}})",
                                      trainer);
  EXPECT_EQ(result.config.zero_optimization.reduce_bucket_size, 1024 * 1024);
  EXPECT_EQ(result.config.zero_optimization.prefetch_bucket_size, 50'000'000);
  EXPECT_TRUE(any_contains(result.warnings, "stage3_prefetch_bucket_size: \"auto\""));
}

TEST(Auto, UnfilledInStrictSectionsTakesTheDefaultWithAWarning) {
  const ConfigResult result = resolve(R"({"train_batch_size": 1, "fp16": {"enabled": "auto"},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
        "stage3_max_live_parameters": "auto",
        "offload_param": {"device": "cpu", "buffer_size": "auto"}}})");
  const DeepSpeedConfig& config = result.config;
  EXPECT_FALSE(config.fp16.enabled);
  EXPECT_EQ(config.zero_optimization.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(config.zero_optimization.max_live_parameters, 1'000'000'000);
  EXPECT_EQ(config.zero_optimization.offload_param.buffer_size, 100'000'000);
  EXPECT_TRUE(any_contains(result.warnings,
                           "fp16.enabled: \"auto\" and no trainer value fills it; "
                           "DeepSpeed's default false applies (pass --fp16"));
  EXPECT_TRUE(any_contains(result.warnings,
                           "zero_optimization.reduce_bucket_size: \"auto\" and no "
                           "trainer value fills it; DeepSpeed's default 500000000 "
                           "applies (pass --hidden_size"));
  EXPECT_TRUE(
      any_contains(result.warnings, "zero_optimization.offload_param.buffer_size: \"auto\""));
}

TEST(Auto, UnfilledElsewhereIsAnErrorNamingTheFlag) {
  const std::string message = error_of(kAllAuto);
  EXPECT_CONTAINS(message,
                  "train_batch_size: \"auto\" but no trainer value fills it; pass "
                  "--per_device_train_batch_size");
  EXPECT_CONTAINS(message,
                  "train_micro_batch_size_per_gpu: \"auto\" but no trainer value fills it; "
                  "pass --per_device_train_batch_size");
  EXPECT_CONTAINS(message,
                  "gradient_accumulation_steps: \"auto\" but no trainer value fills it; pass "
                  "--gradient_accumulation_steps");
  EXPECT_CONTAINS(
      message, "gradient_clipping: \"auto\" but no trainer value fills it; pass --max_grad_norm");
  EXPECT_CONTAINS(
      message, "optimizer.params.lr: \"auto\" but no trainer value fills it; pass --learning_rate");
  EXPECT_CONTAINS(message,
                  "optimizer.params.betas: \"auto\" but no trainer value fills it; pass "
                  "--adam_beta1 and --adam_beta2");
  EXPECT_CONTAINS(
      message, "optimizer.params.eps: \"auto\" but no trainer value fills it; pass --adam_epsilon");
  EXPECT_CONTAINS(message,
                  "optimizer.params.weight_decay: \"auto\" but no trainer value fills it; "
                  "pass --weight_decay");
  EXPECT_CONTAINS(message,
                  "scheduler.params.warmup_max_lr: \"auto\" but no trainer value fills it; "
                  "pass --learning_rate");
  EXPECT_CONTAINS(message,
                  "scheduler.params.warmup_num_steps: \"auto\" but no trainer value fills "
                  "it; pass --warmup_steps");
  EXPECT_CONTAINS(message,
                  "scheduler.params.total_num_steps: \"auto\" but no trainer value fills it; "
                  "pass --max_steps");
  EXPECT_EQ(message.find("warmup_min_lr"), std::string::npos);  // always filled with 0
}

TEST(Auto, KeysNoTrainerFlagFillsRejectAuto) {
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "steps_per_print": "auto"})"),
                  "steps_per_print: \"auto\" is not supported here (no trainer flag fills it)");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW",
                              "params": {"torch_adam": "auto"}}})"),
                  "optimizer.params.torch_adam: \"auto\" is not supported here");
}

TEST(Auto, OneBetaFlagAloneDoesNotFillBetas) {
  TrainerValues trainer;
  trainer.adam_beta1 = 0.9;
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "optimizer": {"type": "Adam",
                              "params": {"betas": "auto"}}})",
                           trainer),
                  "pass --adam_beta1 and --adam_beta2");
}

TEST(Auto, ConcreteValuesContradictingGivenFlagsAreListedTogether) {
  TrainerValues trainer;
  trainer.learning_rate = 3e-5;
  trainer.adam_beta2 = 0.95;
  trainer.max_grad_norm = 1.0;
  trainer.per_device_train_batch_size = 4;
  trainer.gradient_accumulation_steps = 1;
  trainer.fp16 = true;
  const std::string message =
      error_of(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 8,
      "gradient_accumulation_steps": 1, "gradient_clipping": 0.5, "fp16": {"enabled": false},
      "optimizer": {"type": "Adam", "params": {"lr": 0.001, "betas": [0.9, 0.999]}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 3e-5}}})",
               trainer);
  EXPECT_CONTAINS(message,
                  "train_micro_batch_size_per_gpu: 8 in the config contradicts "
                  "--per_device_train_batch_size 4");
  EXPECT_CONTAINS(message,
                  "train_batch_size: 32 in the config contradicts --per_device_train_batch_size "
                  "4 × gradient_accumulation_steps 1 × world_size 1 = 4");
  EXPECT_CONTAINS(message, "gradient_clipping: 0.5 in the config contradicts --max_grad_norm 1");
  EXPECT_CONTAINS(message,
                  "optimizer.params.lr: 0.001 in the config contradicts --learning_rate 3e-05");
  EXPECT_CONTAINS(message,
                  "optimizer.params.betas[1]: 0.999 in the config contradicts --adam_beta2 0.95");
  EXPECT_CONTAINS(message, "fp16.enabled: false in the config contradicts --fp16 true");
  EXPECT_EQ(message.find("warmup_max_lr"), std::string::npos);  // agrees with the flag
  EXPECT_EQ(message.find("betas[0]"), std::string::npos);       // --adam_beta1 not given
}

TEST(Auto, FlagsLeftUnsetNeverContradict) {
  const ConfigResult result =
      resolve(R"({"train_micro_batch_size_per_gpu": 8, "gradient_clipping": 0.5,
      "optimizer": {"type": "Adam", "params": {"lr": 0.001}}})",
              TrainerValues{});
  EXPECT_EQ(result.config.optimizer.lr, 0.001);
  EXPECT_EQ(result.config.gradient_clipping, 0.5);
}

TEST(Auto, TrainBatchSizeUsesTheAccumulationFlagWhenTheConfigHasNone) {
  TrainerValues trainer;
  trainer.world_size = 2;
  trainer.per_device_train_batch_size = 4;
  trainer.gradient_accumulation_steps = 8;
  const DeepSpeedConfig config = resolve(R"({"train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto"})",
                                         trainer)
                                     .config;
  EXPECT_EQ(config.train_batch_size, 64);
  EXPECT_EQ(config.gradient_accumulation_steps, 8);  // derived by DeepSpeed's rule
}

TEST(Auto, TrainBatchSizeIsComputedFromConfigValuesWhenFlagsAreMissing) {
  TrainerValues trainer;
  trainer.world_size = 4;
  const DeepSpeedConfig config = resolve(R"({"train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3})",
                                         trainer)
                                     .config;
  EXPECT_EQ(config.train_batch_size, 24);
}

}  // namespace
}  // namespace zero::config::testing
