// Issue 23: the config precedence rule (zero/train/config_precedence.h) and Hugging Face's process
// flags (zero/train/launch_flags.h), each with a value that changes something observable.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "train_test_util.h"
#include "zero/train/config_precedence.h"
#include "zero/train/launch_flags.h"
#include "zero/train/plan.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;

class ConfigPrecedence : public ::testing::Test {
 protected:
  // Arguments as `zero train` makes them: Hugging Face's defaults, `given` on the command line.
  TrainingArguments arguments(const std::string& json, std::vector<std::string> given = {}) {
    const fs::path file = folder_.path() / ("ds" + std::to_string(files_++) + ".json");
    std::ofstream(file) << json;
    TrainingArguments a;
    a.deepspeed = file.string();
    a.given_flags = std::move(given);
    a.dry_run = true;
    a.config_overrides = "n_embd=32,n_layer=1,n_head=2,n_positions=32";
    a.block_size = 32;
    return a;
  }
  std::string error_of(TrainingArguments a, std::int64_t world = 1) {
    try {
      apply_config_precedence(a, world);
      plan_setup(a, static_cast<int>(world));
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  }

  zero::testing::TempFolder folder_{"hf_flags_test"};
  int files_ = 0;
};

// accelerate's zero_stage1_config.json-style precision without --fp16: the file's fp16 wins.
TEST_F(ConfigPrecedence, AWrittenPrecisionWinsOverAFlagNotGiven) {
  TrainingArguments a = arguments(R"({"fp16": {"enabled": true}, "train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 1})");
  const std::vector<std::string> lines = apply_config_precedence(a, 1);
  EXPECT_TRUE(a.fp16);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.back().find("--fp16 True (fp16.enabled in "), std::string::npos) << lines.back();
  const PlanSetup setup = plan_setup(a, 1);
  EXPECT_EQ(setup.batch_size, 8) << "\"auto\" still takes HF's default";
}

// A DeepSpeed-native train_batch_size of 24 without a batch flag: DeepSpeed's rule sets the
// micro-batch (24 at world 1, 12 at world 2; with a micro-batch of 4, 6 accumulation steps).
TEST_F(ConfigPrecedence, AWrittenTrainBatchSizeWinsOverTheDefaultBatchFlags) {
  TrainingArguments one = arguments(R"({"train_batch_size": 24})");
  const std::vector<std::string> lines = apply_config_precedence(one, 1);
  EXPECT_EQ(one.per_device_train_batch_size, 24);
  EXPECT_EQ(one.gradient_accumulation_steps, 1);
  EXPECT_EQ(lines.front(),
            "--per_device_train_batch_size 24 (train_batch_size in " + one.deepspeed + ")");
  EXPECT_EQ(plan_setup(one, 1).batch_size, 24);

  TrainingArguments two = arguments(R"({"train_batch_size": 24})");
  apply_config_precedence(two, 2);
  EXPECT_EQ(two.per_device_train_batch_size, 12);

  TrainingArguments micro =
      arguments(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4})");
  apply_config_precedence(micro, 1);
  EXPECT_EQ(micro.per_device_train_batch_size, 4);
  EXPECT_EQ(micro.gradient_accumulation_steps, 6);
  EXPECT_EQ(plan_setup(micro, 1).engine.gradient_accumulation_steps, 6);
}

// The issue's second example: two errors before, none now (--dry_run plans it).
TEST_F(ConfigPrecedence, MicroBatchAndBf16FromTheFileDryRun) {
  TrainingArguments a = arguments(
      R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
          "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5}}})");
  EXPECT_EQ(error_of(a), "");
  apply_config_precedence(a, 1);
  EXPECT_EQ(a.per_device_train_batch_size, 1);
  EXPECT_TRUE(a.bf16);
  EXPECT_DOUBLE_EQ(a.learning_rate, 1e-4);
  EXPECT_EQ(a.warmup_steps, 5);
}

// A given flag that contradicts a value written in the file is the error, naming both.
TEST_F(ConfigPrecedence, AGivenFlagThatContradictsTheFileIsTheError) {
  const std::string batch =
      error_of(arguments(R"({"train_batch_size": 24})", {"per_device_train_batch_size"}));
  EXPECT_NE(batch.find("train_batch_size: 24 in the config contradicts "
                       "--per_device_train_batch_size 8"),
            std::string::npos)
      << batch;
  TrainingArguments lr = arguments(
      R"({"train_micro_batch_size_per_gpu": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})",
      {"learning_rate"});
  lr.learning_rate = 3e-4;
  const std::string message = error_of(lr);
  EXPECT_NE(message.find("optimizer.params.lr: 0.0001 in the config contradicts --learning_rate "
                         "0.0003 given on the command line"),
            std::string::npos)
      << message;
  TrainingArguments fp16 = arguments(R"({"fp16": {"enabled": false}})", {"fp16"});
  fp16.fp16 = true;
  EXPECT_NE(error_of(fp16).find("fp16.enabled: false in the config contradicts --fp16 true"),
            std::string::npos);
  // Library callers (no given_flags): every value counts as given, the HF Trainer's rule.
  TrainingArguments library = arguments(R"({"fp16": {"enabled": true}})");
  library.given_flags.reset();
  EXPECT_NE(error_of(library).find("fp16.enabled: true in the config contradicts --fp16 false"),
            std::string::npos);
}

// A file without any batch key takes the batch flag (given or HF's default).
TEST_F(ConfigPrecedence, AFileWithoutBatchKeysTakesTheBatchFlag) {
  TrainingArguments a =
      arguments(R"({"zero_optimization": {"stage": 1}})", {"per_device_train_batch_size"});
  a.per_device_train_batch_size = 3;
  EXPECT_EQ(error_of(a), "");
  EXPECT_EQ(plan_setup(a, 1).batch_size, 3);
}

// --optim: the optimizer when the config has none; contradicting the config's is an error.
TEST_F(ConfigPrecedence, OptimChoosesTheOptimizer) {
  TrainingArguments sgd = arguments(R"({"train_micro_batch_size_per_gpu": 2})", {"optim"});
  sgd.optim = "sgd";
  EXPECT_EQ(plan_setup(sgd, 1).engine.optimizer.type, config::OptimizerType::kSgd);
  TrainingArguments adamw = arguments(R"({"train_micro_batch_size_per_gpu": 2})");
  EXPECT_EQ(plan_setup(adamw, 1).engine.optimizer.type, config::OptimizerType::kAdamW);
  TrainingArguments contradicting = arguments(
      R"({"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW"}})", {"optim"});
  contradicting.optim = "sgd";
  EXPECT_NE(error_of(contradicting).find("--optim sgd contradicts the optimizer"),
            std::string::npos);
}

// --local_rank, --ddp_backend, --ddp_timeout and the log levels as the environment.
TEST(ProcessFlags, BecomeTheEnvironmentAndTheTimeout) {
  TrainingArguments a;
  a.given_flags = std::vector<std::string>{"local_rank", "log_level", "log_level_replica"};
  a.local_rank = 1;
  a.ddp_backend = "gloo";
  a.ddp_timeout = 90;
  a.log_level = "error";
  a.log_level_replica = "info";
  const ProcessSettings main = process_settings(a, {}, 0);
  EXPECT_EQ(main.environment.at("LOCAL_RANK"), "1");
  EXPECT_EQ(main.environment.at("ZERO_COMM_BACKEND"), "gloo");
  EXPECT_EQ(main.environment.at("ZERO_LOG_LEVEL"), "error");
  EXPECT_EQ(main.timeout, std::chrono::milliseconds(90'000));
  const ProcessSettings replica = process_settings(a, {}, 1);
  EXPECT_EQ(replica.environment.at("ZERO_LOG_LEVEL"), "info");
  EXPECT_EQ(replica.environment.at("ZERO_LOG_ALL_RANKS"), "1");
  EXPECT_FALSE(process_settings(a, {{"ZERO_COMM_TIMEOUT_S", "5"}}, 0).timeout)
      << "the environment's timeout wins";
  const TrainingArguments defaults;
  EXPECT_EQ(process_settings(defaults, {}, 0).timeout, std::chrono::milliseconds(1'800'000));
  try {
    process_settings(a, {{"LOCAL_RANK", "0"}}, 0);
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(), "--local_rank 1 contradicts LOCAL_RANK=0 in the environment");
  }
  EXPECT_THROW(process_settings(a, {{"ZERO_COMM_BACKEND", "mpi"}}, 0), InputError);
}

TEST(ProcessFlags, DataloaderNumWorkersSetsTheTokenizerThreads) {
  TrainingArguments a;
  a.given_flags = std::vector<std::string>{"dataloader_num_workers"};
  a.dataloader_num_workers = 3;
  EXPECT_EQ(apply_flag_equivalents(a).size(), 1u);
  EXPECT_EQ(a.preprocessing_num_workers, 3);
  TrainingArguments both = a;
  both.given_flags->push_back("preprocessing_num_workers");
  both.preprocessing_num_workers = 2;
  apply_flag_equivalents(both);
  EXPECT_EQ(both.preprocessing_num_workers, 2) << "the flag given for it wins";
}

// `accelerate launch --no_python zero train`: accelerate's variables as the matching flags.
TEST(AccelerateEnvironment, BecomesTheMatchingFlags) {
  TrainingArguments a;
  a.given_flags = std::vector<std::string>{};
  const std::vector<std::string> notes =
      apply_accelerate_environment(a, {{"ACCELERATE_MIXED_PRECISION", "bf16"},
                                       {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "/x/ds.json"},
                                       {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"},
                                       {"ACCELERATE_GRADIENT_CLIPPING", "0.5"},
                                       {"ACCELERATE_USE_CPU", "True"}});
  EXPECT_TRUE(a.bf16);
  EXPECT_FALSE(a.fp16);
  EXPECT_EQ(a.deepspeed, "/x/ds.json");
  EXPECT_EQ(a.gradient_accumulation_steps, 4);
  EXPECT_DOUBLE_EQ(a.max_grad_norm, 0.5);
  EXPECT_TRUE(a.use_cpu);
  EXPECT_EQ(notes.size(), 5u);
  EXPECT_TRUE(a.was_given("bf16")) << "checked against the DeepSpeed file as a given flag";
  EXPECT_EQ(notes[0], "--bf16 from accelerate's ACCELERATE_MIXED_PRECISION=bf16");

  TrainingArguments given;
  given.given_flags = std::vector<std::string>{"gradient_accumulation_steps"};
  given.gradient_accumulation_steps = 2;
  try {
    apply_accelerate_environment(given, {{"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_STREQ(error.what(),
                 "--gradient_accumulation_steps 2 contradicts "
                 "ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4 (accelerate's launch config)");
  }
  TrainingArguments fp8;
  EXPECT_THROW(apply_accelerate_environment(fp8, {{"ACCELERATE_MIXED_PRECISION", "fp8"}}),
               InputError);
  TrainingArguments plugin;
  EXPECT_THROW(apply_accelerate_environment(plugin, {{"ACCELERATE_DEEPSPEED_ZERO_STAGE", "2"}}),
               InputError);
  TrainingArguments none;
  EXPECT_TRUE(apply_accelerate_environment(none, {{"ACCELERATE_MIXED_PRECISION", "no"}}).empty());
}

}  // namespace
}  // namespace zero::train
