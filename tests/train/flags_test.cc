// The flag table (zero/train/flags.h): every row complete, names unique with their aliases, and
// Hugging Face's recorded defaults equal to zero's where Hugging Face has a value.
#include "zero/train/flags.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

namespace zero::train {
namespace {

bool is_command_line_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  return true;
}

TEST(FlagTable, EveryFlagHasATypeADefaultADispositionAndACommand) {
  ASSERT_FALSE(flag_table().empty());
  for (const Flag& flag : flag_table()) {
    SCOPED_TRACE(std::string(flag.name));
    EXPECT_TRUE(is_command_line_name(flag.name));
    EXPECT_NE(flag.commands.bits, 0) << "taken by no command";
    EXPECT_FALSE(default_text(flag).empty());
    if (!std::holds_alternative<std::monostate>(flag.field)) {
      // A str | bool row's field is the string.
      const FlagType type = flag.type == FlagType::kBoolOrString ? FlagType::kString : flag.type;
      EXPECT_EQ(name_of(type_of(flag.field)), name_of(type)) << "field and type disagree";
    }
    if (flag.disposition == Disposition::kImplemented) {
      EXPECT_FALSE(std::holds_alternative<std::monostate>(flag.field))
          << "an implemented flag has a field its value lands in";
    } else {
      EXPECT_FALSE(flag.reason.empty()) << name_of(flag.disposition) << " needs a reason";
    }
    if (!flag.estimate_help.empty()) {
      EXPECT_TRUE(flag.commands.has(Command::kEstimate)) << "estimate help for a flag it lacks";
    }
    if (!flag.config_help.empty()) {
      EXPECT_TRUE(flag.commands.has(Command::kConfig)) << "config help for a flag it lacks";
    }
  }
}

TEST(FlagTable, NamesAreUniqueIncludingAliases) {
  std::set<std::string_view> names;
  for (const Flag& flag : flag_table()) {
    EXPECT_TRUE(names.insert(flag.name).second) << "--" << flag.name << " twice";
    for (std::string_view alias : flag.aliases) {
      if (alias.empty()) continue;
      EXPECT_TRUE(is_command_line_name(alias)) << alias;
      EXPECT_TRUE(names.insert(alias).second) << "--" << alias << " twice";
    }
  }
  EXPECT_EQ(find_flag("evaluation_strategy"), find_flag("eval_strategy"));
  EXPECT_EQ(find_flag("no_such_flag"), nullptr);
}

TEST(FlagTable, HuggingFaceFlagsRecordHuggingFacesDefaultsAndZeroKeepsThem) {
  for (const Flag& flag : flag_table()) {
    SCOPED_TRACE(std::string(flag.name));
    const HfDefaults& hf = flag.hf_default;
    const bool from_hugging_face =
        flag.origin != Origin::kZero && flag.origin != Origin::kDeepSpeedLauncher;
    EXPECT_EQ(from_hugging_face, hf.transformers_4_46 != kAbsent || hf.transformers_5 != kAbsent);
    // Where Hugging Face has a value (not None, not required), zero's default is that value: the
    // newest version's where they differ (numbers by value: 0 is 0.0).
    const std::string_view value =
        hf.transformers_5 != kAbsent ? hf.transformers_5 : hf.transformers_4_46;
    if (value != kAbsent && value != kRequired && value != "None" &&
        flag.disposition == Disposition::kImplemented) {
      const std::string ours = default_text(flag);
      char* end = nullptr;
      const double number = std::strtod(std::string(value).c_str(), &end);
      if (*end == '\0' && !value.empty()) {
        EXPECT_EQ(std::strtod(ours.c_str(), nullptr), number) << ours << " vs " << value;
      } else {
        EXPECT_EQ(ours, value);
      }
    }
  }
}

TEST(FlagTable, DefaultsReadAsPythonWritesThem) {
  EXPECT_EQ(default_text(*find_flag("learning_rate")), "5e-05");
  EXPECT_EQ(default_text(*find_flag("num_train_epochs")), "3.0");
  EXPECT_EQ(default_text(*find_flag("per_device_train_batch_size")), "8");
  EXPECT_EQ(default_text(*find_flag("bf16")), "False");
  EXPECT_EQ(default_text(*find_flag("lr_scheduler_type")), "'linear'");
  EXPECT_EQ(default_text(*find_flag("save_strategy")), "'steps'");
  EXPECT_EQ(default_text(*find_flag("train_file")), "[]");
  EXPECT_EQ(default_text(*find_flag("gpu_memory")), "'80GiB'");
}

// Issue 23: run_clm's 24 and run_classification's model/data arguments, TrainingArguments' 4.46 and
// 5.x fields (deprecated spellings as aliases) and torch.distributed.launch's --local-rank.
TEST(FlagTable, HuggingFacesCommandLinesAreRows) {
  for (const char* name : {"model_name_or_path",
                           "model_type",
                           "config_overrides",
                           "config_name",
                           "tokenizer_name",
                           "cache_dir",
                           "use_fast_tokenizer",
                           "model_revision",
                           "token",
                           "trust_remote_code",
                           "torch_dtype",
                           "low_cpu_mem_usage",
                           "dataset_name",
                           "dataset_config_name",
                           "train_file",
                           "validation_file",
                           "max_train_samples",
                           "max_eval_samples",
                           "streaming",
                           "block_size",
                           "overwrite_cache",
                           "validation_split_percentage",
                           "preprocessing_num_workers",
                           "keep_linebreaks",
                           "ignore_mismatched_sizes",
                           "do_regression",
                           "text_column_names",
                           "text_column_delimiter",
                           "train_split_name",
                           "validation_split_name",
                           "test_split_name",
                           "remove_splits",
                           "remove_columns",
                           "label_column_name",
                           "max_seq_length",
                           "pad_to_max_length",
                           "shuffle_train_dataset",
                           "shuffle_seed",
                           "max_predict_samples",
                           "metric_name",
                           "test_file",

                           "local_rank",
                           "no_cuda",
                           "fp16_backend",
                           "per_gpu_train_batch_size",
                           "per_gpu_eval_batch_size",
                           "evaluation_strategy",
                           "hub_revision",
                           "project",
                           "trackio_space_id",
                           "parallelism_config"}) {
    EXPECT_NE(find_flag(name), nullptr) << "--" << name;
  }
}

TEST(FlagTable, AcceptsComparesAsPythonWritesValues) {
  const Flag& push = *find_flag("push_to_hub");
  EXPECT_TRUE(accepts_value(push, "False"));
  EXPECT_FALSE(accepts_value(push, "True"));
  const Flag& fsdp = *find_flag("fsdp_min_num_params");
  EXPECT_TRUE(accepts_value(fsdp, "0"));
  EXPECT_TRUE(accepts_value(fsdp, "0.0"));
  EXPECT_FALSE(accepts_value(fsdp, "5"));
  EXPECT_TRUE(accepts_value(*find_flag("include_num_input_tokens_seen"), "'non_padding'"));
  EXPECT_FALSE(accepts_value(*find_flag("include_num_input_tokens_seen"), "'some'"));
  EXPECT_FALSE(accepts_value(*find_flag("neftune_noise_alpha"), "5"))
      << "refused with no accepted value";
  EXPECT_TRUE(accepts_value(*find_flag("learning_rate"), "1"));
  EXPECT_TRUE(accepts_value(*find_flag("optim"), "'sgd'"));
  EXPECT_FALSE(accepts_value(*find_flag("optim"), "'adafactor'"));
}

TEST(FlagTable, HelpInACommandFallsBackToTheFlagsHelp) {
  const Flag& block_size = *find_flag("block_size");
  EXPECT_EQ(help_in(block_size, Command::kTrain), block_size.help);
  EXPECT_EQ(help_in(block_size, Command::kEstimate), block_size.estimate_help);
  const Flag& learning_rate = *find_flag("learning_rate");
  EXPECT_EQ(help_in(learning_rate, Command::kTrain), "");
  EXPECT_NE(help_in(learning_rate, Command::kConfig).find("\"auto\""), std::string_view::npos);
}

}  // namespace
}  // namespace zero::train
