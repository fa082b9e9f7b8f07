// Parsing: numbers and strings, duplicate keys, non-JSON and files, unknown keys, error lists.
#include <filesystem>
#include <fstream>

#include "../common/test_data.h"
#include "config_test_util.h"

namespace zero::config::testing {
namespace {

std::string with_zero(const std::string& zero_body) {
  return R"({"train_batch_size": 1, "zero_optimization": {)" + zero_body + "}}";
}

TEST(Numbers, IntegralFloatsAreAcceptedWhereIntegersAreMeant) {
  const DeepSpeedConfig config = resolve(with_zero(R"("stage": 3.0, "reduce_bucket_size": 5e8,
      "sub_group_size": 1e14, "stage3_max_live_parameters": 1E9)"))
                                     .config;
  EXPECT_EQ(config.zero_optimization.stage, 3);
  EXPECT_EQ(config.zero_optimization.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(config.zero_optimization.sub_group_size, 100'000'000'000'000);
  EXPECT_EQ(config.zero_optimization.max_live_parameters, 1'000'000'000);
}

TEST(Numbers, FractionsAreRejectedForIntegers) {
  EXPECT_CONTAINS(error_of(with_zero(R"("reduce_bucket_size": 2.5)")),
                  "zero_optimization.reduce_bucket_size: expected an integer >= 0, got 2.5, which "
                  "has a fractional part");
}

TEST(Numbers, StringsOtherThanAutoAreRejected) {
  EXPECT_CONTAINS(error_of(with_zero(R"("reduce_bucket_size": "5e8")")),
                  "got the string \"5e8\" (the only string accepted here is \"auto\")");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "gradient_clipping": "1.0"})"),
                  "gradient_clipping: expected a number >= 0, got the string \"1.0\"");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": "8"})"),
                  "train_batch_size: expected an integer");
}

TEST(Numbers, BooleansAndNumbersDoNotStandInForEachOther) {
  EXPECT_CONTAINS(error_of(with_zero(R"("overlap_comm": 1)")),
                  "zero_optimization.overlap_comm: expected true or false, got 1");
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": true)")),
                  "zero_optimization.stage: expected an integer");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "fp16": {"enabled": "true"}})"),
                  "fp16.enabled: expected true or false, got the string \"true\"");
}

TEST(Numbers, RangesAreChecked) {
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": 4)")),
                  "zero_optimization.stage: expected an integer in [0, 3], got 4");
  EXPECT_CONTAINS(error_of(with_zero(R"("allgather_bucket_size": -1)")),
                  "expected an integer >= 0, got -1");
  EXPECT_CONTAINS(error_of(with_zero(R"("sub_group_size": 1e19)")),
                  "sub_group_size: expected an integer");
  EXPECT_CONTAINS(error_of(with_zero(R"("sub_group_size": 18446744073709551615)")),
                  "sub_group_size: expected an integer");
  EXPECT_CONTAINS(error_of(with_zero(R"("offload_optimizer": {"ratio": 1.5})")),
                  "offload_optimizer.ratio: expected a number in [0, 1], got 1.5");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "fp16": {"loss_scale": -1}})"),
                  "fp16.loss_scale: expected a number >= 0, got -1");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "gradient_clipping": 1e400})"),
                  "test.json: not valid JSON: number overflow parsing '1e400'");
}

TEST(Numbers, IntegersAreAcceptedWhereFloatsAreMeant) {
  const DeepSpeedConfig config =
      resolve(R"({"train_batch_size": 1, "gradient_clipping": 1, "fp16": {"loss_scale": 128}})")
          .config;
  EXPECT_EQ(config.gradient_clipping, 1.0);
  EXPECT_EQ(config.fp16.loss_scale, 128.0);
}

TEST(DuplicateKeys, AreErrorsNamingTheirPath) {
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "train_batch_size": 2})"),
                  "- train_batch_size: given more than once");
  const std::string nested = error_of(R"({"train_batch_size": 1,
      "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "device": "nvme"},
                            "stage": 3}})");
  EXPECT_CONTAINS(nested, "zero_optimization.offload_optimizer.device: given more than once");
  EXPECT_CONTAINS(nested, "zero_optimization.stage: given more than once");
  // The same key in sibling objects is not a duplicate.
  EXPECT_EQ(error_of(R"({"train_batch_size": 1, "fp16": {"enabled": false},
                         "bf16": {"enabled": false}})"),
            "");
}

TEST(NotJson, IsAnErrorWithLineAndColumn) {
  EXPECT_CONTAINS(error_of("{\n  \"train_batch_size\": 1,\n}"),
                  "test.json: not valid JSON: parse error at line 3, column 1");
  EXPECT_CONTAINS(error_of("train_batch_size = 1"),
                  "not valid JSON: parse error at line 1, column 3");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1} // comment)"), "not valid JSON");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1)"), "not valid JSON");
  EXPECT_CONTAINS(error_of("[1, 2]"), "expected a JSON object at the top level, got array");
  EXPECT_CONTAINS(error_of("\"auto\""), "expected a JSON object at the top level, got string");
}

TEST(NotJson, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = R"({"train_batch_size": 1, "x": )" + std::string(100'000, '[') +
                           std::string(100'000, ']') + "}";
  EXPECT_CONTAINS(error_of(deep), "test.json: nested deeper than 64 levels");
}

TEST(NotJson, EmptyTextIsAnError) {
  EXPECT_CONTAINS(error_of(""), "test.json: the config is empty");
  EXPECT_CONTAINS(error_of(" \n\t "), "the config is empty");
}

TEST(Files, MissingEmptyAndDirectoryAreClearErrors) {
  const auto folder = zero::testing::scratch_dir("config_files");
  auto load_error = [](const std::filesystem::path& path) -> std::string {
    try {
      load_config_file(path, {});
    } catch (const zero::Error& error) {
      return error.what();
    }
    return "";
  };
  EXPECT_CONTAINS(load_error(folder / "absent.json"), "absent.json: no such DeepSpeed config file");
  EXPECT_CONTAINS(load_error(folder), "is a directory");
  std::ofstream(folder / "empty.json").close();
  EXPECT_CONTAINS(load_error(folder / "empty.json"), "empty.json: the config is empty");
  std::ofstream(folder / "good.json") << R"({"train_batch_size": 4})";
  EXPECT_EQ(load_config_file(folder / "good.json", {}).config.train_micro_batch_size_per_gpu, 4);
  std::filesystem::remove_all(folder);
}

TEST(UnknownKeys, InStrictSectionsAreErrorsWithTheNearestKey) {
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": 3, "stage3_param_persitence_threshold": 1e5)")),
                  "zero_optimization.stage3_param_persitence_threshold: unknown key (value 1e+05); "
                  "did you mean 'stage3_param_persistence_threshold'?");
  EXPECT_CONTAINS(error_of(with_zero(R"("offload_param": {"pin_memroy": true})")),
                  "zero_optimization.offload_param.pin_memroy: unknown key (value true); did you "
                  "mean 'pin_memory'?");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "fp16": {"loss_scale_windw": 10}})"),
                  "did you mean 'loss_scale_window'?");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "tensorboard": {"enable": true}})"),
                  "tensorboard.enable: unknown key");
}

TEST(UnknownKeys, AtTheTopLevelAreWarningsWithTheNearestKey) {
  const ConfigResult result = resolve(R"({"train_batch_size": 1, "gradient_clippping": 1.0})");
  EXPECT_TRUE(any_contains(result.warnings,
                           "gradient_clippping: unknown key (value 1), ignored; "
                           "did you mean 'gradient_clipping'?"));
  EXPECT_EQ(result.config.gradient_clipping, 0.0);
}

TEST(UnknownKeys, UnimplementedSectionsAreWarnedAboutUnlessDisabled) {
  const ConfigResult result =
      resolve(R"({"train_batch_size": 1, "sparse_attention": {"mode": "fixed"},
      "flops_profiler": {"enabled": false}, "pipeline": {"stages": 2}})");
  EXPECT_TRUE(any_contains(result.warnings, "sparse_attention: not implemented by zero"));
  EXPECT_TRUE(any_contains(result.warnings, "pipeline: not implemented by zero"));
  EXPECT_FALSE(any_contains(result.warnings, "flops_profiler"));
}

TEST(UnknownKeys, OptimizerAndSchedulerParamsAreKeywordArguments) {
  EXPECT_CONTAINS(
      error_of(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW",
                              "params": {"lr": 0.1, "weight_decy": 0.1}}})"),
      "optimizer.params.weight_decy: unknown key (value 0.1); did you mean 'weight_decay'?");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "optimizer": {"type": "AdamW",
                              "params": {"max_grad_norm": 1.0}}})"),
                  "use the top-level \"gradient_clipping\"");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "optimizer": {"type": "Adan"}})"),
                  "optimizer.type: \"Adan\" is not an optimizer zero knows; expected one of Adam, "
                  "AdamW, SGD, Lamb; did you mean 'Adam'?");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "optimizer": {"type": "OneBitAdam"}})"),
                  "a DeepSpeed optimizer that zero does not implement");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "scheduler": {"type": "WarmupDecayLR",
                              "params": {"warmup_max_lr": 0.1}}})"),
                  "scheduler.params.total_num_steps: required by WarmupDecayLR but missing");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "scheduler": {"type": "WarmupLr"}})"),
                  "did you mean 'WarmupLR'?");
}

TEST(Errors, EveryErrorIsListedInOneMessage) {
  const std::string message = error_of(R"({"train_batch_size": 1,
      "zero_optimization": {"stage": 5, "reduce_bucket_size": 2.5, "overlap_com": true},
      "fp16": {"enabled": true}, "bf16": {"enabled": true},
      "optimizer": {"type": "AdamW", "params": {"lr": "fast"}}})");
  EXPECT_CONTAINS(message, "test.json: 5 errors in the DeepSpeed config:");
  EXPECT_CONTAINS(message, "zero_optimization.stage: expected an integer in [0, 3], got 5");
  EXPECT_CONTAINS(message, "zero_optimization.reduce_bucket_size");
  EXPECT_CONTAINS(
      message,
      "zero_optimization.overlap_com: unknown key (value true); did you mean 'overlap_comm'?");
  EXPECT_CONTAINS(message, "fp16 and bf16 cannot both be enabled");
  EXPECT_CONTAINS(message, "optimizer.params.lr: expected a number >= 0, got the string \"fast\"");
}

TEST(Errors, CrossSectionRulesAreChecked) {
  EXPECT_CONTAINS(error_of(with_zero(R"("stage": 3, "offload_param": {"device": "nvme"})")),
                  "zero_optimization.offload_param.nvme_path: required when device is \"nvme\"");
  EXPECT_CONTAINS(error_of(with_zero(R"("offload_optimizer": {"device": "gpu"})")),
                  "expected \"none\", \"cpu\" or \"nvme\", got \"gpu\"");
  EXPECT_CONTAINS(
      error_of(with_zero(R"("stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5})")),
      "partial offload (ratio < 1) needs stage 3");
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 1, "bf16": {"enabled": true,
                              "bf16_optimizer_states": true}})"),
                  "bf16.bf16_optimizer_states: needs ZeRO stage 1, 2 or 3");
  const ConfigResult result =
      resolve(with_zero(R"("stage": 2, "offload_param": {"device": "cpu"})"));
  EXPECT_TRUE(any_contains(result.warnings, "parameter offload applies to stage 3 only"));
}

TEST(Output, ResolvedJsonResolvesToItself) {
  const std::string json = R"({"train_batch_size": 16, "gradient_clipping": 1.0,
      "optimizer": {"type": "Adam", "params": {"lr": 0.001}},
      "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1}},
      "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/x"}},
      "communication_data_type": "BF16", "data_types": {"grad_accum_dtype": "torch.float32"}})";
  TrainerValues trainer;
  trainer.world_size = 4;
  const std::string first = to_json(resolve(json, trainer).config);
  const ConfigResult again = resolve(first, trainer);
  EXPECT_EQ(to_json(again.config), first);
  EXPECT_TRUE(again.warnings.empty());
  EXPECT_EQ(again.config.communication_data_type, DType::kBFloat16);
  EXPECT_EQ(again.config.grad_accum_dtype, DType::kFloat32);
  EXPECT_EQ(again.config.scheduler.cycle_second_step_size, 2000);
}

}  // namespace
}  // namespace zero::config::testing
