// The 15 real DeepSpeed configs in the shared data folder: the expected outcome of each, and why.
#include <functional>

#include "../common/test_data.h"
#include "config_test_util.h"

namespace zero::config::testing {
namespace {

// The trainer flags a Hugging Face run would pass (world 2, GPT-2 small's hidden size).
TrainerValues trainer_flags() {
  TrainerValues trainer;
  trainer.world_size = 2;
  trainer.per_device_train_batch_size = 4;
  trainer.gradient_accumulation_steps = 1;
  trainer.learning_rate = 3e-5;
  trainer.adam_beta1 = 0.9;
  trainer.adam_beta2 = 0.999;
  trainer.adam_epsilon = 1e-8;
  trainer.weight_decay = 0.0;
  trainer.warmup_steps = 10;
  trainer.total_steps = 1000;
  trainer.max_grad_norm = 1.0;
  trainer.hidden_size = 768;
  return trainer;
}

struct RealConfig {
  const char* file;
  // Without flags (world size 1): the expected error substring, or nullptr when it resolves.
  const char* error_without_flags;
  // With trainer_flags(): the expected error substring, or nullptr when it resolves.
  const char* error_with_flags;
  const char* why;
  // Checks on the config resolved without flags (or with, when only that resolves).
  std::function<void(const DeepSpeedConfig&)> check;
};

const RealConfig kRealConfigs[] = {
    {"deepspeedai__DeepSpeedExamples__Megatron-LM-v1.1.5-ZeRO3__examples__ds_zero_stage_infinity_"
     "config.json",
     "zero_optimization.stage3_param_persitence_threshold: unknown key (value 1e+05); did you mean "
     "'stage3_param_persistence_threshold'?",
     "stage3_param_persitence_threshold: unknown key",
     "published with a misspelled key inside zero_optimization, which DeepSpeed's pydantic model "
     "rejects (extra=forbid)",
     nullptr},
    {"deepspeedai__DeepSpeedExamples__QANet-Pytorch__ds_bsz512_1cycle.json", nullptr,
     "train_micro_batch_size_per_gpu: 32 in the config contradicts --per_device_train_batch_size 4",
     "train 512 / micro 32: DeepSpeed derives 16 accumulation steps at world 1; OneCycle with "
     "every param; no ZeRO section (stage 0); with the flags, micro 32 contradicts --per_device "
     "(Hugging Face's mismatch rule)",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.gradient_accumulation_steps, 16);
       EXPECT_EQ(c.zero_optimization.stage, 0);
       EXPECT_EQ(c.optimizer.type, OptimizerType::kAdam);
       EXPECT_TRUE(c.optimizer.adam_w_mode);  // DeepSpeed's Adam decouples weight decay
       EXPECT_EQ(c.optimizer.betas[0], 0.8);
       EXPECT_EQ(c.scheduler.type, SchedulerType::kOneCycle);
       EXPECT_EQ(c.scheduler.cycle_max_lr, 0.015);
       EXPECT_EQ(c.scheduler.cycle_second_step_size, 100);
       EXPECT_EQ(c.scheduler.decay_lr_rate, 0.01);
     }},
    {"deepspeedai__DeepSpeedExamples__inference__sglang__ds_offload_nvme_aio.json", nullptr,
     "train_micro_batch_size_per_gpu: must be at least 1, got 0",
     "ZeRO-3 nvme param offload; unfilled \"auto\" stage-3 knobs take DeepSpeed's defaults (with "
     "--hidden_size the prefetch size and threshold come from it); train_batch_size 1 cannot be "
     "split over 2 ranks, as DeepSpeed's assertion says",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_batch_size, 1);
       EXPECT_EQ(c.zero_optimization.stage, 3);
       EXPECT_EQ(c.zero_optimization.offload_param.device, OffloadDevice::kNvme);
       EXPECT_EQ(c.zero_optimization.offload_param.nvme_path, "/local_nvme/sglang");
       EXPECT_EQ(c.zero_optimization.offload_param.buffer_count, 5);
       EXPECT_EQ(c.zero_optimization.offload_param.buffer_size, 100'000'000);
       EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 50'000'000);
       EXPECT_EQ(c.zero_optimization.max_live_parameters, 1'000'000'000);
       EXPECT_EQ(c.aio.block_size, 8'388'608);
       EXPECT_EQ(c.aio.queue_depth, 32);
       EXPECT_EQ(c.aio.intra_op_parallelism, 8);
     }},
    {"deepspeedai__DeepSpeedExamples__training__DeepSpeed-ZenFlow__finetuning__zf_config.json",
     nullptr, "optimizer.params.lr: 2e-05 in the config contradicts --learning_rate 3e-05",
     "ZeRO-2 cpu offload, bf16; the zenflow sub-section is known to DeepSpeed but not implemented "
     "(warning); with the flags, the concrete lr and weight_decay contradict them",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
       EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::kCpu);
       EXPECT_TRUE(c.zero_optimization.offload_optimizer.pin_memory);
       EXPECT_TRUE(c.bf16.enabled);
       EXPECT_EQ(c.gradient_clipping, 1.0);
     }},
    {"deepspeedai__DeepSpeedExamples__training__bf16_master_weight__configs__bf16_full.json",
     nullptr, "optimizer.params.lr: 0.0001 in the config contradicts --learning_rate 3e-05",
     "ZeRO-3 with the bf16 master-weight keys (valid at stage 3); torch_autocast is ignored with a "
     "warning; with the flags, lr 1e-4 contradicts --learning_rate",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_batch_size, 4);
       EXPECT_TRUE(c.bf16.bf16_master_weights_and_grads);
       EXPECT_TRUE(c.bf16.bf16_optimizer_states);
       EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 50'000'000);
       EXPECT_EQ(c.zero_optimization.param_persistence_threshold, 0);
       EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
       EXPECT_EQ(c.steps_per_print, 100);
     }},
    {"deepspeedai__DeepSpeedExamples__training__bing_bert__deepspeed_bsz64k_lamb_config_seq128."
     "json",
     nullptr, "train_batch_size: 65536 in the config contradicts",
     "Lamb with max/min coeff; 65536 / 64 gives 1024 accumulation steps at world 1; "
     "sparse_attention is ignored with a warning",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.gradient_accumulation_steps, 1024);
       EXPECT_EQ(c.optimizer.type, OptimizerType::kLamb);
       EXPECT_FALSE(c.optimizer.bias_correction);
       EXPECT_EQ(c.optimizer.max_coeff, 0.3);
       EXPECT_EQ(c.optimizer.lr, 11e-3);
       EXPECT_TRUE(c.fp16.enabled);
       EXPECT_EQ(c.fp16.loss_scale, 0.0);
     }},
    {"deepspeedai__DeepSpeedExamples__training__pipeline_parallelism__ds_config.json", nullptr,
     "train_batch_size: 256 in the config contradicts",
     "minimal: 256 / 8 gives 32 accumulation steps; Adam; stage 0",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.gradient_accumulation_steps, 32);
       EXPECT_EQ(c.optimizer.eps, 1e-8);
       EXPECT_EQ(c.optimizer.weight_decay, 0.0);
       EXPECT_FALSE(c.fp16.enabled);
     }},
    {"deepspeedai__DeepSpeed__deepspeed__autotuning__config_templates__template_zero3.json",
     "train_batch_size: no batch size given", "no batch size given",
     "only a zero_optimization section: DeepSpeed asserts 'Either train_batch_size or "
     "train_micro_batch_size_per_gpu needs to be provided' (flags fill \"auto\" only)",
     nullptr},
    {"deepspeedai__DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero0_gas3.json",
     nullptr, "train_micro_batch_size_per_gpu: 8 in the config contradicts",
     "micro 8 × accumulation 3 → train 24 at world 1; stage 0 with bucket sizes",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_batch_size, 24);
       EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 7'000'000);
       EXPECT_TRUE(c.activation_checkpointing.partition_activations);
       EXPECT_EQ(c.fp16.loss_scale_window, 1000);
     }},
    {"deepspeedai__DeepSpeed__tests__model__Megatron_GPT2__ds_config_func_bs8_zero2_offload.json",
     nullptr, nullptr,
     "the deprecated \"cpu_offload\": true becomes offload_optimizer on cpu (warning); at world 2 "
     "train 8 splits as micro 4 × 1, agreeing with the flags",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
       EXPECT_EQ(c.zero_optimization.stage, 2);
       EXPECT_EQ(c.zero_optimization.offload_optimizer.device, OffloadDevice::kCpu);
       EXPECT_FALSE(c.zero_optimization.overlap_comm);
     }},
    {"deepspeedai__DeepSpeed__tests__torch_compile__ds_config_z3.json", nullptr,
     "optimizer.params.lr: 0.001 in the config contradicts --learning_rate 3e-05",
     "ZeRO-3 bf16 with Adam and WarmupLR; train 8 splits as 8 × 1; overlap_comm false given "
     "explicitly; with the flags, its concrete Adam and WarmupLR values contradict them",
     [](const DeepSpeedConfig& c) {
       EXPECT_EQ(c.train_micro_batch_size_per_gpu, 8);
       EXPECT_FALSE(c.zero_optimization.overlap_comm);
       EXPECT_FALSE(c.zero_optimization.contiguous_gradients);
       EXPECT_EQ(c.scheduler.type, SchedulerType::kWarmupLR);
       EXPECT_EQ(c.scheduler.warmup_num_steps, 1000);
       EXPECT_EQ(c.scheduler.warmup_max_lr, 0.001);
     }},
    {"huggingface__accelerate__examples__deepspeed_config_templates__zero_stage1_config.json",
     "optimizer.params.lr: \"auto\" but no trainer value fills it; pass --learning_rate", nullptr,
     "all-\"auto\" batch, clipping, AdamW and WarmupDecayLR params: errors naming the flags; with "
     "them it resolves",
     nullptr},
    {"huggingface__accelerate__examples__deepspeed_config_templates__zero_stage3_offload_config."
     "json",
     "train_micro_batch_size_per_gpu: \"auto\" but no trainer value fills it", nullptr,
     "as the stage-1 template, plus \"auto\" stage-3 knobs filled from --hidden_size", nullptr},
    {"huggingface__transformers__tests__deepspeed__ds_config_zero2.json",
     "optimizer.params.betas: \"auto\" but no trainer value fills it", nullptr,
     "every Hugging Face \"auto\" key; fp16/bf16 \"auto\" default to false with a warning",
     nullptr},
    {"huggingface__transformers__tests__deepspeed__ds_config_zero3.json",
     "train_batch_size: no batch size given", "no batch size given",
     "no batch size at all: DeepSpeed asserts, and flags fill only \"auto\" keys", nullptr},
};

class RealConfigs : public ::testing::TestWithParam<RealConfig> {};

TEST_P(RealConfigs, ResolveOrFailAsDeepSpeed) {
  const RealConfig& c = GetParam();
  const std::string relative = std::string("ds_configs/") + c.file;
  ZERO_REQUIRE_SHARED_DATA(relative);
  const auto path = zero::testing::shared_data_dir() / relative;
  SCOPED_TRACE(c.why);
  for (const bool with_flags : {false, true}) {
    const TrainerValues trainer = with_flags ? trainer_flags() : TrainerValues{};
    const char* expected_error = with_flags ? c.error_with_flags : c.error_without_flags;
    if (expected_error != nullptr) {
      try {
        load_config_file(path, trainer);
        ADD_FAILURE() << c.file << " resolved " << (with_flags ? "with" : "without") << " flags";
      } catch (const zero::Error& error) {
        EXPECT_CONTAINS(error.what(), expected_error);
      }
      continue;
    }
    const ConfigResult result = load_config_file(path, trainer);
    EXPECT_EQ(result.config.world_size, with_flags ? 2 : 1);
    if (c.check && !with_flags) c.check(result.config);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedData, RealConfigs, ::testing::ValuesIn(kRealConfigs),
                         [](const ::testing::TestParamInfo<RealConfig>& param) {
                           return "config" + std::to_string(param.index);
                         });

TEST(RealConfigsWithFlags, AutoConfigsResolveToTheFlagValues) {
  const std::string relative =
      "ds_configs/"
      "huggingface__accelerate__examples__deepspeed_config_templates__zero_stage3_offload_config."
      "json";
  ZERO_REQUIRE_SHARED_DATA(relative);
  const ConfigResult result =
      load_config_file(zero::testing::shared_data_dir() / relative, trainer_flags());
  const DeepSpeedConfig& c = result.config;
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.optimizer.lr, 3e-5);
  EXPECT_EQ(c.scheduler.type, SchedulerType::kWarmupDecayLR);
  EXPECT_EQ(c.scheduler.total_num_steps, 1000);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 589'824);
  EXPECT_EQ(c.zero_optimization.prefetch_bucket_size, 530'841);
  EXPECT_EQ(c.zero_optimization.param_persistence_threshold, 7'680);
  EXPECT_FALSE(c.zero_optimization.gather_16bit_weights_on_model_save);
  EXPECT_TRUE(any_contains(result.warnings, "stage3_gather_16bit_weights_on_model_save: \"auto\""));
}

TEST(RealConfigsWithFlags, Zero2TakesPrecisionFromTheFlags) {
  const std::string relative =
      "ds_configs/huggingface__transformers__tests__deepspeed__ds_config_zero2.json";
  ZERO_REQUIRE_SHARED_DATA(relative);
  TrainerValues trainer = trainer_flags();
  trainer.fp16 = true;
  const ConfigResult result =
      load_config_file(zero::testing::shared_data_dir() / relative, trainer);
  EXPECT_TRUE(result.config.fp16.enabled);
  EXPECT_FALSE(result.config.bf16.enabled);
  EXPECT_EQ(result.config.zero_optimization.reduce_bucket_size, 200'000'000);  // concrete 2e8 kept
  EXPECT_TRUE(result.warnings.empty());
}

TEST(RealConfigsWithFlags, NvmeInferenceConfigTakesStage3KnobsFromTheHiddenSize) {
  const std::string relative =
      "ds_configs/deepspeedai__DeepSpeedExamples__inference__sglang__ds_offload_nvme_aio.json";
  ZERO_REQUIRE_SHARED_DATA(relative);
  TrainerValues trainer;
  trainer.hidden_size = 4096;
  const ConfigResult result =
      load_config_file(zero::testing::shared_data_dir() / relative, trainer);
  EXPECT_EQ(result.config.zero_optimization.prefetch_bucket_size, 15'099'494);  // int(0.9 × 4096²)
  EXPECT_EQ(result.config.zero_optimization.param_persistence_threshold, 40'960);
  // No trainer flag fills these two: DeepSpeed's defaults, with a warning each.
  EXPECT_EQ(result.warnings.size(), 2u);
  EXPECT_TRUE(any_contains(result.warnings, "stage3_max_live_parameters: \"auto\""));
  EXPECT_TRUE(any_contains(result.warnings, "offload_param.buffer_size: \"auto\""));
}

}  // namespace
}  // namespace zero::config::testing
