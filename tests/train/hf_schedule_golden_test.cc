// The trainer's Hugging Face schedules (make_hf_schedule, used when the DeepSpeed config has no
// "scheduler" section) against transformers itself: tests/golden/hf_schedules_reference.py runs
// transformers.get_scheduler for every supported type over a torch SGD, stepped as the Trainer
// steps it, with and without warmup, past the end of training, and with warmup == total. Every lr
// must agree to 1e-12 relative. Skips when ZERO_PYTHON cannot import torch and transformers
// (scripts/setup_venv.sh installs them).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "zero/core/error.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

TEST(HfScheduleGolden, EveryTypeMatchesTransformers) {
  const char* python = std::getenv("ZERO_PYTHON");
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || source == nullptr) GTEST_SKIP() << "ZERO_PYTHON/ZERO_SOURCE_DIR unset";
  const auto out = std::filesystem::temp_directory_path() /
                   ("zero_hf_schedules_" + std::to_string(::getpid()) + ".json");
  const std::string command = std::string(python) + " " + source +
                              "/tests/golden/hf_schedules_reference.py " + out.string();
  const int status = std::system(command.c_str());
  if (status != 0)
    GTEST_SKIP() << "tests/golden/hf_schedules_reference.py exited with status "
                 << (WIFEXITED(status) ? WEXITSTATUS(status) : status)
                 << " (ZERO_PYTHON lacks torch or transformers?)";
  std::ifstream file(out);
  const nlohmann::json cases = nlohmann::json::parse(file);
  std::filesystem::remove(out);

  std::set<std::string> types;
  for (const nlohmann::json& entry : cases) {
    const std::string type = entry["type"];
    const double lr = entry["lr"];
    const std::int64_t warmup = entry["warmup"], total = entry["total"];
    types.insert(type);
    auto schedule = train::make_hf_schedule(type, lr, warmup, total);
    const auto& lrs = entry["lrs"];
    ASSERT_EQ(lrs.size(), static_cast<std::size_t>(2 * total + 3)) << type;
    int mismatches = 0;
    for (std::size_t k = 0; k < lrs.size(); ++k) {
      const double expected = lrs[k].get<double>();
      const double tolerance = 1e-12 * std::max(std::abs(expected), 1e-9);
      EXPECT_NEAR(schedule->lr(), expected, tolerance)
          << type << " (lr " << lr << ", warmup " << warmup << ", total " << total
          << "): the lr of optimizer step " << k + 1;
      mismatches += std::abs(schedule->lr() - expected) > tolerance;
      schedule->step();
    }
    std::printf("%-22s lr %-7g warmup %2lld total %2lld: %3zu steps, %d mismatches\n", type.c_str(),
                lr, static_cast<long long>(warmup), static_cast<long long>(total), lrs.size(),
                mismatches);
  }
  EXPECT_EQ(types, (std::set<std::string>{"linear", "cosine", "cosine_with_restarts", "polynomial",
                                          "constant", "constant_with_warmup", "inverse_sqrt"}));
}

// transformers refuses a polynomial decay whose lr_end (1e-7) is not below the initial lr.
TEST(HfScheduleGolden, PolynomialNeedsAnLrAboveItsEnd) {
  EXPECT_THROW(train::make_hf_schedule("polynomial", 1e-7, 0, 10), Error);
  try {
    train::make_hf_schedule("cosine_restarts", 1e-3, 0, 10);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("did you mean 'cosine_with_restarts'"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace zero::testing
