// `zero config` as a user runs it: JSON on stdout and exit 0, or every error and exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "../common/test_data.h"

namespace {

struct CommandResult {
  int exit_code;
  std::string output;
};

// Runs the built `zero` with `arguments`, capturing stdout (and stderr when `with_stderr`).
CommandResult run_zero(const std::string& arguments, bool with_stderr) {
  const std::string command =
      std::string(ZERO_CLI_PATH) + " " + arguments + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  char buffer[4096];
  while (std::size_t count = std::fread(buffer, 1, sizeof(buffer), pipe))
    output.append(buffer, count);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class ZeroConfigCommand : public ::testing::Test {
 protected:
  void SetUp() override { folder_ = zero::testing::scratch_dir("config_cli"); }
  void TearDown() override { std::filesystem::remove_all(folder_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(folder_ / name) << text;
    return (folder_ / name).string();
  }
  std::filesystem::path folder_;
};

TEST_F(ZeroConfigCommand, PrintsTheResolvedConfigAndExitsZero) {
  const std::string file = write("good.json", R"({"train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto",
      "zero_optimization": {"stage": 3, "cpu_offload": true},
      "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})");
  const CommandResult run = run_zero(
      "config " + file + " --world_size 2 --per_device_train_batch_size 4 --learning_rate 3e-5",
      /*with_stderr=*/false);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"train_batch_size\": 8"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("\"overlap_comm\": true"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("\"lr\": 3e-05"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("warning"), std::string::npos) << "warnings belong on stderr";
  const CommandResult with_warnings = run_zero("config " + file +
                                                   " --per_device_train_batch_size 4 "
                                                   "--learning_rate 3e-5",
                                               /*with_stderr=*/true);
  EXPECT_NE(with_warnings.output.find("warning: zero_optimization.cpu_offload: deprecated"),
            std::string::npos)
      << with_warnings.output;
}

TEST_F(ZeroConfigCommand, ListsEveryErrorAndExitsTwo) {
  const std::string file = write("bad.json", R"({"train_batch_size": "auto",
      "zero_optimization": {"stage": 3, "stage3_param_persitence_threshold": 1e5}})");
  const CommandResult run = run_zero("config " + file + " --no_defaults", /*with_stderr=*/true);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("2 errors in the DeepSpeed config"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("did you mean 'stage3_param_persistence_threshold'?"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("pass --per_device_train_batch_size"), std::string::npos) << run.output;
}

// Flags not given take Hugging Face's TrainingArguments defaults (zero::train's), listed on stderr.
TEST_F(ZeroConfigCommand, FillsAutoFromHuggingFaceDefaultsAndSaysWhich) {
  const std::string file = write("auto.json", R"({"train_batch_size": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}}})");
  const CommandResult run = run_zero("config " + file + " --learning_rate 3e-4", true);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"train_batch_size\": 8"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("\"lr\": 0.0003"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Hugging Face's defaults: --per_device_train_batch_size 8 "
                            "--gradient_accumulation_steps 1"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("--learning_rate 5e-05"), std::string::npos) << "given, not defaulted";
  EXPECT_NE(run.output.find("--weight_decay 0"), std::string::npos) << run.output;
}

// Issue 23's rule: a value the file writes wins over a flag not given (named on stderr); a given
// flag that contradicts it is the error, naming both.
TEST_F(ZeroConfigCommand, AValueTheFileWritesWinsOverAFlagNotGiven) {
  const std::string file = write("native.json", R"({"train_batch_size": 24,
      "fp16": {"enabled": true}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})");
  const CommandResult run = run_zero("config " + file, true);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("\"train_micro_batch_size_per_gpu\": 24"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("take the values the file writes: --per_device_train_batch_size "
                            "--learning_rate"),
            std::string::npos)
      << run.output;
  const CommandResult given = run_zero("config " + file + " --per_device_train_batch_size 8", true);
  EXPECT_EQ(given.exit_code, 2);
  EXPECT_NE(given.output.find("train_batch_size: 24 in the config contradicts "
                              "--per_device_train_batch_size 8"),
            std::string::npos)
      << given.output;
}

// Every real config of the shared data: with no flags no value is a contradiction (errors left
// are the file's own, or "auto" with nothing to fill it).
TEST_F(ZeroConfigCommand, RealConfigsWithoutFlagsHaveNoContradiction) {
  const std::filesystem::path folder = zero::testing::shared_data_dir() / "ds_configs";
  if (zero::testing::shared_data_dir().empty() || !std::filesystem::is_directory(folder))
    GTEST_SKIP() << "no ZERO_SHARED_DATA/ds_configs";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    const CommandResult run = run_zero("config " + entry.path().string(), true);
    EXPECT_EQ(run.output.find("contradicts"), std::string::npos) << run.output;
  }
  EXPECT_GT(files, 0);
}

TEST_F(ZeroConfigCommand, MissingFileAndBadFlagsExitTwo) {
  EXPECT_EQ(run_zero("config " + (folder_ / "absent.json").string(), true).exit_code, 2);
  const CommandResult typo = run_zero("config x.json --learning_rat 1", true);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("did you mean --learning_rate?"), std::string::npos) << typo.output;
  EXPECT_EQ(run_zero("config", true).exit_code, 2);
}

}  // namespace
