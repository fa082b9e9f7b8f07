// The DeepSpeed configs shipped in configs/ resolve with `zero train`'s flags into what their
// names promise (stage, offload, precision).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "zero/config/ds_config.h"

namespace zero::config {
namespace {

TrainerValues train_flags() {
  TrainerValues trainer;
  trainer.world_size = 4;
  trainer.per_device_train_batch_size = 8;
  trainer.gradient_accumulation_steps = 2;
  trainer.learning_rate = 6e-4;
  trainer.adam_beta1 = 0.9;
  trainer.adam_beta2 = 0.95;
  trainer.adam_epsilon = 1e-8;
  trainer.weight_decay = 0.1;
  trainer.warmup_steps = 100;
  trainer.total_steps = 5000;
  trainer.max_grad_norm = 1.0;
  trainer.hidden_size = 768;
  return trainer;
}

struct Shipped {
  const char* file;
  int stage;
  OffloadDevice offload;  // both optimizer and parameters (stage 3) or neither
  bool fp16;
  bool bf16;
};

constexpr Shipped kShipped[] = {
    {"ds_zero1.json", 1, OffloadDevice::kNone, false, false},
    {"ds_zero2.json", 2, OffloadDevice::kNone, false, false},
    {"ds_zero3.json", 3, OffloadDevice::kNone, false, false},
    {"ds_zero3_offload.json", 3, OffloadDevice::kCpu, false, false},
    {"ds_zero3_nvme.json", 3, OffloadDevice::kNvme, false, false},
    {"ds_bf16.json", 2, OffloadDevice::kNone, false, true},
    {"ds_fp16.json", 2, OffloadDevice::kNone, true, false},
    {"ds_zero3_demo.json", 3, OffloadDevice::kNone, false, false},
};

class ShippedConfigs : public ::testing::TestWithParam<Shipped> {};

TEST_P(ShippedConfigs, ResolveWithTheTrainFlags) {
  const Shipped& s = GetParam();
  const auto path = std::filesystem::path(ZERO_CONFIGS_DIR) / s.file;
  const ConfigResult result = load_config_file(path, train_flags());
  const DeepSpeedConfig& c = result.config;
  // The only warning allowed: precision "auto" (the trainer's seed config, ds_zero3.json) with
  // neither --fp16 nor --bf16 given resolves to fp32.
  for (const std::string& warning : result.warnings) {
    EXPECT_TRUE(warning.starts_with("fp16.enabled: \"auto\"") ||
                warning.starts_with("bf16.enabled: \"auto\""))
        << s.file << ": " << warning;
  }
  EXPECT_EQ(c.zero_optimization.stage, s.stage);
  EXPECT_EQ(c.train_batch_size, 8 * 2 * 4);
  EXPECT_EQ(c.optimizer.lr, 6e-4);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_EQ(c.fp16.enabled, s.fp16);
  EXPECT_EQ(c.bf16.enabled, s.bf16);
  EXPECT_EQ(c.zero_optimization.offload_optimizer.device, s.offload);
  if (s.stage == 3) {
    EXPECT_EQ(c.zero_optimization.offload_param.device, s.offload);
    // "auto" from the hidden size, int(0.9 × 768²), except the demo's concrete 500000.
    EXPECT_EQ(c.zero_optimization.prefetch_bucket_size,
              std::string(s.file) == "ds_zero3_demo.json" ? 500'000 : 530'841);
  }
  if (s.offload == OffloadDevice::kNvme) {
    EXPECT_EQ(c.zero_optimization.offload_param.nvme_path, "/local_nvme");
    EXPECT_EQ(c.zero_optimization.offload_optimizer.nvme_path, "/local_nvme");
  }
  if (s.fp16) EXPECT_EQ(c.fp16.loss_scale, 0.0);  // dynamic
}

INSTANTIATE_TEST_SUITE_P(Configs, ShippedConfigs, ::testing::ValuesIn(kShipped),
                         [](const ::testing::TestParamInfo<Shipped>& param) {
                           std::string name = param.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

// Every JSON file in configs/ is one of the above: a new config gets its check.
TEST(ShippedConfigs, EveryFileIsChecked) {
  for (const auto& entry : std::filesystem::directory_iterator(ZERO_CONFIGS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    const std::string name = entry.path().filename().string();
    bool listed = false;
    for (const Shipped& s : kShipped) listed = listed || name == s.file;
    EXPECT_TRUE(listed) << name << " is not in kShipped";
  }
}

}  // namespace
}  // namespace zero::config
