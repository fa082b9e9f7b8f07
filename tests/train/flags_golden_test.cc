// The flag table's Hugging Face defaults against transformers itself: for each TrainingArguments
// row, the default recorded for the installed version (4.46.x or 5.x) is the dataclass field's
// default as Python writes it, and a row recorded as absent in that version is no field of it;
// then every field of the installed TrainingArguments is a row (or an alias) of `zero train`.
// tests/golden/training_arguments_defaults.py reads them; skips when ZERO_PYTHON lacks
// transformers or has another version.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "zero/train/flags.h"

namespace zero::train {
namespace {

TEST(FlagTableGolden, TrainingArgumentsDefaultsMatchTransformers) {
  const char* python = std::getenv("ZERO_PYTHON");
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || source == nullptr) GTEST_SKIP() << "ZERO_PYTHON/ZERO_SOURCE_DIR unset";
  const auto out = std::filesystem::temp_directory_path() /
                   ("zero_training_arguments_" + std::to_string(::getpid()) + ".json");
  const std::string command = std::string(python) + " " + source +
                              "/tests/golden/training_arguments_defaults.py " + out.string();
  if (std::system(command.c_str()) != 0) GTEST_SKIP() << "ZERO_PYTHON cannot import transformers";
  std::ifstream file(out);
  const nlohmann::json reference = nlohmann::json::parse(file);
  std::filesystem::remove(out);
  const std::string version = reference["version"];
  const bool v4_46 = version.starts_with("4.46.");
  if (!v4_46 && !version.starts_with("5.")) GTEST_SKIP() << "transformers " << version;
  const nlohmann::json& defaults = reference["defaults"];
  int compared = 0;
  for (const Flag& flag : flag_table()) {
    if (flag.origin != Origin::kTrainingArguments) continue;
    const std::string_view recorded =
        v4_46 ? flag.hf_default.transformers_4_46 : flag.hf_default.transformers_5;
    const std::string name(flag.name);
    if (recorded == kAbsent) {
      EXPECT_FALSE(defaults.contains(name)) << "--" << name << " is a field of " << version;
      continue;
    }
    ASSERT_TRUE(defaults.contains(name)) << "--" << name << " is no field of " << version;
    EXPECT_EQ(defaults[name].get<std::string>(), recorded) << "--" << name << " in " << version;
    ++compared;
  }
  EXPECT_GT(compared, 20);
  // Every field the parser offers (init fields; _n_gpu is none) is a row or an alias: accepted,
  // with the row's disposition.
  int walked = 0;
  for (const auto& [name, value] : defaults.items()) {
    if (name.starts_with("_")) continue;
    const Flag* flag = find_flag(name);
    ASSERT_NE(flag, nullptr) << "--" << name << " of transformers " << version << " is no flag";
    EXPECT_TRUE(flag->commands.has(Command::kTrain)) << "--" << name;
    if (flag->disposition != Disposition::kImplemented) {
      EXPECT_FALSE(flag->reason.empty()) << "--" << name;
    }
    ++walked;
  }
  EXPECT_GE(walked, 131);
}

}  // namespace
}  // namespace zero::train
