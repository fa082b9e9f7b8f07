// zero::optim's LR schedules against DeepSpeed's own code: tests/golden/lr_schedules_reference.py
// builds each case's schedule from deepspeed.runtime.lr_schedules over a torch AdamW, steps it as
// DeepSpeed's engine does, and records the lr (and betas) every optimizer step runs with, over at
// least twice each schedule's length. Here the same "scheduler" sections go through zero's config
// parser (resolve_config) and make_lr_schedule, and every lr must agree to 1e-12 relative (both
// sides evaluate the same closed forms in double; only the operation order may differ).
// Skips when ZERO_PYTHON cannot import torch and deepspeed (scripts/setup_venv.sh installs them).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "zero/config/ds_config.h"
#include "zero/optim/lr_schedules.h"

namespace zero::optim {
namespace {

// The reference's output, or null with `why` set.
const nlohmann::json* reference(std::string& why) {
  static std::string reason;
  static const nlohmann::json* loaded = []() -> const nlohmann::json* {
    const char* python = std::getenv("ZERO_PYTHON");
    const char* source = std::getenv("ZERO_SOURCE_DIR");
    if (python == nullptr || source == nullptr) {
      reason = "ZERO_PYTHON or ZERO_SOURCE_DIR is not set";
      return nullptr;
    }
    const auto out = std::filesystem::temp_directory_path() /
                     ("zero_lr_schedules_" + std::to_string(::getpid()) + ".json");
    const std::string command = std::string(python) + " " + source +
                                "/tests/golden/lr_schedules_reference.py " + out.string();
    const int status = std::system(command.c_str());
    if (status != 0) {
      reason = "tests/golden/lr_schedules_reference.py exited with status " +
               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
               " (ZERO_PYTHON lacks torch or deepspeed?)";
      return nullptr;
    }
    std::ifstream file(out);
    auto* json = new nlohmann::json(nlohmann::json::parse(file));
    std::filesystem::remove(out);
    return json;
  }();
  why = reason;
  return loaded;
}

// The case's scheduler and optimizer lr as zero's config parser resolves them.
config::DeepSpeedConfig resolve(const nlohmann::json& entry) {
  const nlohmann::json text = {
      {"train_batch_size", 1},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", entry["lr"]}}}}},
      {"scheduler", entry["scheduler"]}};
  return config::resolve_config(text.dump(), {}, entry["name"].get<std::string>()).config;
}

TEST(LrScheduleGolden, EveryScheduleMatchesDeepSpeed) {
  std::string why;
  const nlohmann::json* json = reference(why);
  if (json == nullptr) GTEST_SKIP() << why;
  std::printf("DeepSpeed %s over torch %s\n", (*json)["deepspeed"].get<std::string>().c_str(),
              (*json)["torch"].get<std::string>().c_str());
  std::set<std::string> types;
  for (const nlohmann::json& entry : (*json)["cases"]) {
    const std::string name = entry["name"];
    const config::DeepSpeedConfig resolved = resolve(entry);
    types.insert(std::string(config::name_of(resolved.scheduler.type)));
    auto schedule = make_lr_schedule(resolved.scheduler, resolved.optimizer.lr);
    ASSERT_NE(schedule, nullptr) << name;
    const auto& lrs = entry["lrs"];
    const auto& betas = entry["betas"];
    ASSERT_EQ(lrs.size(), betas.size()) << name;
    ASSERT_GE(lrs.size(), 6u) << name;
    int mismatches = 0;
    for (std::size_t k = 0; k < lrs.size(); ++k) {
      const double expected = lrs[k].get<double>();
      EXPECT_NEAR(schedule->lr(), expected, 1e-12 * std::max(std::abs(expected), 1e-6))
          << name << ": the lr of optimizer step " << k + 1 << " (last_batch_iteration "
          << schedule->last_batch_iteration() << ")";
      // beta1 as the engine asks for it (the optimizer's 0.9 unless OneCycle cycles momentum).
      const double beta1 = betas[k][0].get<double>();
      EXPECT_NEAR(schedule->beta1(0.9), beta1, 1e-12)
          << name << ": beta1 of optimizer step " << k + 1;
      mismatches +=
          std::abs(schedule->lr() - expected) > 1e-12 * std::max(std::abs(expected), 1e-6);
      schedule->step();
    }
    std::printf("%-34s %3zu steps, %d mismatches\n", name.c_str(), lrs.size(), mismatches);
  }
  // All five of DeepSpeed's schedules are covered.
  EXPECT_EQ(types, (std::set<std::string>{"LRRangeTest", "OneCycle", "WarmupLR", "WarmupDecayLR",
                                          "WarmupCosineLR"}));
}

}  // namespace
}  // namespace zero::optim
