// zero's loss scaling against DeepSpeed's own DynamicLossScaler
// (tests/golden/loss_scaler_reference.py runs deepspeed.runtime.fp16.loss_scaler): LossScaler
// over long overflow sequences, and the engine (fp16 GPT-2, overflows induced in one rank's
// gradients at chosen steps) whose scale after each boundary must equal DeepSpeed's for the
// overflow sequence the engine saw. Exact equality: both sides halve and double powers of two.
// Skips when ZERO_PYTHON cannot import torch and deepspeed (scripts/setup_venv.sh installs them).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "mixed_precision_runs.h"
#include "zero/engine/loss_scaler.h"

namespace zero::testing {
namespace {

struct Case {
  std::string name;
  int power = 8;
  int window = 3;
  int hysteresis = 2;
  bool consecutive = false;
  int min_scale = 1;
  bool raise_at_min = true;
  std::vector<bool> overflows;
};

// DeepSpeed's scales (and hysteresis) after each update of every case; null with `why` set.
std::unique_ptr<nlohmann::json> deepspeed_scales(const std::vector<Case>& cases, std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || source == nullptr) {
    why = "ZERO_PYTHON or ZERO_SOURCE_DIR is not set";
    return nullptr;
  }
  nlohmann::json input = {{"cases", nlohmann::json::array()}};
  for (const Case& c : cases)
    input["cases"].push_back({{"name", c.name},
                              {"initial_scale_power", c.power},
                              {"loss_scale_window", c.window},
                              {"hysteresis", c.hysteresis},
                              {"consecutive_hysteresis", c.consecutive},
                              {"min_loss_scale", c.min_scale},
                              {"raise_error_at_min_scale", c.raise_at_min},
                              {"overflows", c.overflows}});
  const auto stem =
      std::filesystem::temp_directory_path() / ("zero_loss_scaler_" + std::to_string(::getpid()));
  const std::string in = stem.string() + "_in.json", out = stem.string() + "_out.json";
  std::ofstream(in) << input.dump();
  const std::string command = std::string(python) + " " + source +
                              "/tests/golden/loss_scaler_reference.py " + in + " " + out;
  const int status = std::system(command.c_str());
  std::filesystem::remove(in);
  if (status != 0) {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 77)
        << "tests/golden/loss_scaler_reference.py failed (status " << status << ")";
    why = "tests/golden/loss_scaler_reference.py exited with status " +
          std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
          " (ZERO_PYTHON lacks torch or deepspeed?)";
    return nullptr;
  }
  std::ifstream file(out);
  auto json = std::make_unique<nlohmann::json>(nlohmann::json::parse(file));
  std::filesystem::remove(out);
  std::printf("DeepSpeed %s over torch %s\n", (*json)["deepspeed"].get<std::string>().c_str(),
              (*json)["torch"].get<std::string>().c_str());
  return json;
}

config::Fp16Config fp16_of(const Case& c) {
  config::Fp16Config options;
  options.enabled = true;
  options.initial_scale_power = c.power;
  options.loss_scale_window = c.window;
  options.hysteresis = c.hysteresis;
  options.consecutive_hysteresis = c.consecutive;
  options.min_loss_scale = c.min_scale;
  return options;
}

TEST(LossScalerGolden, LongOverflowSequencesMatchDeepSpeed) {
  std::vector<Case> cases;
  for (bool consecutive : {false, true})
    for (int hysteresis : {1, 2, 3})
      for (int window : {1, 4}) {
        Case c;
        c.name = "h" + std::to_string(hysteresis) + "w" + std::to_string(window) +
                 (consecutive ? "c" : "");
        c.power = 12;
        c.min_scale = 4;
        c.raise_at_min = false;  // clamped at the minimum, as both sides allow
        c.window = window;
        c.hysteresis = hysteresis;
        c.consecutive = consecutive;
        // Runs of overflows and of good steps of varied lengths (hashed, fixed).
        for (std::uint64_t i = 0; i < 300; ++i)
          c.overflows.push_back(hashed_uniform(i * 13 + static_cast<std::uint64_t>(window)) >
                                (i % 50 < 10 ? -0.2 : 0.6));
        cases.push_back(std::move(c));
      }
  std::string why;
  const auto json = deepspeed_scales(cases, why);
  if (!json) GTEST_SKIP() << why;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    LossScaler scaler(fp16_of(cases[k]), cases[k].raise_at_min);
    const auto& expected = (*json)["cases"][k];
    int halvings = 0;
    for (std::size_t i = 0; i < cases[k].overflows.size(); ++i) {
      const double before = scaler.scale();
      scaler.update(cases[k].overflows[i]);
      halvings += scaler.scale() < before;
      ASSERT_EQ(scaler.scale(), expected["scales"][i].get<double>())
          << cases[k].name << " update " << i;
      ASSERT_EQ(scaler.state().hysteresis, expected["hysteresis"][i].get<int>())
          << cases[k].name << " update " << i;
    }
    EXPECT_GT(halvings, 3) << cases[k].name;
    EXPECT_EQ(scaler.scale(), expected["scales"].back().get<double>());
  }
}

TEST(LossScalerGolden, EngineOverflowsMoveTheScaleAsDeepSpeed) {
  struct EngineCase {
    int stage, world;
    std::vector<int> inject;
    int hysteresis;
    bool consecutive;
  };
  const std::vector<EngineCase> engine_cases = {{0, 1, {2, 3, 4, 9}, 2, false},
                                                {1, 2, {1, 2, 5, 6, 7}, 2, true},
                                                {2, 2, {3, 4, 7}, 2, false},
                                                {3, 4, {0, 4, 5, 6, 10}, 3, false}};
  std::vector<Case> cases;
  std::vector<OverflowRun> runs;
  for (const EngineCase& e : engine_cases) {
    const OverflowRun run =
        run_with_overflows(e.stage, e.world, e.inject, 8, 3, e.hysteresis, e.consecutive, 12);
    EXPECT_EQ(run.skipped_steps, static_cast<std::int64_t>(e.inject.size()));
    EXPECT_TRUE(run.params_unchanged_on_skips);
    EXPECT_TRUE(run.lr_unchanged_on_skips);
    Case c;
    c.name = "stage " + std::to_string(e.stage) + " world " + std::to_string(e.world);
    c.power = 8;
    c.window = 3;
    c.hysteresis = e.hysteresis;
    c.consecutive = e.consecutive;
    c.overflows = run.overflows;
    cases.push_back(std::move(c));
    runs.push_back(run);
  }
  std::string why;
  const auto json = deepspeed_scales(cases, why);
  if (!json) GTEST_SKIP() << why;
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& expected = (*json)["cases"][k]["scales"];
    ASSERT_EQ(expected.size(), runs[k].scales.size());
    for (std::size_t i = 0; i < runs[k].scales.size(); ++i)
      EXPECT_EQ(runs[k].scales[i], expected[i].get<double>()) << cases[k].name << " step " << i;
  }
}

}  // namespace
}  // namespace zero::testing
