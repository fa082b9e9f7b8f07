// The flag table's Hugging Face defaults against transformers itself (flags_golden_test: 4.46
// through ZERO_PYTHON; flags_golden_tf5_test: 5.x through ZERO_PYTHON_TF5):
// tests/golden/training_arguments_defaults.py reads them from the Python's transformers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "zero/train/flags.h"

namespace zero::train::testing {

// transformers' defaults through the Python named by `python_variable`, or an empty object
// with `why` set when it is not there.
inline nlohmann::json reference_defaults(const char* python_variable, std::string& why) {
  const char* python = std::getenv(python_variable);
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || *python == '\0' || source == nullptr) {
    why = std::string(python_variable) + "/ZERO_SOURCE_DIR unset";
    return {};
  }
  const auto out = std::filesystem::temp_directory_path() /
                   ("zero_training_arguments_" + std::to_string(::getpid()) + ".json");
  const std::string command = std::string(python) + " " + source +
                              "/tests/golden/training_arguments_defaults.py " + out.string();
  if (std::system(command.c_str()) != 0) {
    why = std::string(python_variable) + " cannot import transformers";
    return {};
  }
  std::ifstream file(out);
  nlohmann::json reference = nlohmann::json::parse(file);
  std::filesystem::remove(out);
  return reference;
}

// Every TrainingArguments row against `reference` (version and defaults); returns the rows
// compared.
inline int compare_with(const nlohmann::json& reference, bool v4_46) {
  const std::string version = reference["version"];
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
    if (!defaults.contains(name)) {
      ADD_FAILURE() << "--" << name << " is no field of " << version;
      continue;
    }
    // 5.x's optim default is adamw_torch_fused with torch >= 2.8 installed, else adamw_torch.
    if (!v4_46 && name == "optim" && defaults[name] == "'adamw_torch'") continue;
    EXPECT_EQ(defaults[name].get<std::string>(), recorded) << "--" << name << " in " << version;
    ++compared;
  }
  // Every field the parser offers (init fields; _n_gpu is none) is a row or an alias: accepted,
  // with the row's disposition.
  for (const auto& [name, value] : defaults.items()) {
    if (name.starts_with("_")) continue;
    const Flag* flag = find_flag(name);
    if (flag == nullptr) {
      ADD_FAILURE() << "--" << name << " of transformers " << version << " is no flag";
      continue;
    }
    EXPECT_TRUE(flag->commands.has(Command::kTrain)) << "--" << name;
    if (flag->disposition != Disposition::kImplemented) {
      EXPECT_FALSE(flag->reason.empty()) << "--" << name;
    }
  }
  return compared;
}

}  // namespace zero::train::testing
