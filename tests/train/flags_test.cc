// The flag table (zero/train/flags.h): every row complete, names unique with their aliases, and
// Hugging Face's recorded defaults equal to zero's where Hugging Face has a value.
#include "zero/train/flags.h"

#include <gtest/gtest.h>

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
      EXPECT_EQ(name_of(type_of(flag.field)), name_of(flag.type)) << "field and type disagree";
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
    // Where Hugging Face has a value (not None, not required), zero's default is that value.
    for (std::string_view value : {hf.transformers_4_46, hf.transformers_5})
      if (value != kAbsent && value != kRequired && value != "None" &&
          flag.disposition == Disposition::kImplemented) {
        EXPECT_EQ(default_text(flag), value);
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
