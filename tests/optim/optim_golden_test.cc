// Optimizers against tests/golden/optim_reference.py: torch.optim for Adam, AdamW and SGD;
// DeepSpeed's FusedLamb arithmetic. Skips without python3-torch. (LR schedules:
// lr_schedule_golden_test.cc, against DeepSpeed's own lr_schedules.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "zero/optim/kernels.h"

namespace zero::optim {
namespace {

class Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* python = std::getenv("ZERO_PYTHON");
    const char* source = std::getenv("ZERO_SOURCE_DIR");
    if (python == nullptr || source == nullptr) return;
    const auto out = std::filesystem::temp_directory_path() /
                     ("zero_optim_reference_" + std::to_string(::getpid()) + ".json");
    const std::string command =
        std::string(python) + " " + source + "/tests/golden/optim_reference.py " + out.string();
    const int status = std::system(command.c_str());
    if (status != 0) return;
    std::ifstream file(out);
    reference_ = new nlohmann::json(nlohmann::json::parse(file));
    std::filesystem::remove(out);
  }
  void SetUp() override {
    if (reference_ == nullptr) GTEST_SKIP() << "no reference: ZERO_PYTHON lacks torch or is unset";
  }
  static inline nlohmann::json* reference_ = nullptr;

  static std::vector<float> params0(int n) {
    std::vector<float> p(n);
    for (int i = 0; i < n; ++i) p[i] = static_cast<float>(std::sin(0.37 * i + 0.1));
    return p;
  }
  static std::vector<float> grad(int n, int t) {
    std::vector<float> g(n);
    for (int i = 0; i < n; ++i)
      g[i] = static_cast<float>(0.5 * std::cos(0.11 * i * (t + 1)) + 0.01 * t);
    return g;
  }
  template <typename Step>
  void check(const std::string& key, Step&& step, double tolerance) {
    const int n = (*reference_)["n"], steps = (*reference_)["steps"];
    std::vector<float> p = params0(n);
    for (int t = 0; t < steps; ++t) {
      step(p, grad(n, t), t + 1);
      const auto& expected = (*reference_)[key][t];
      for (int i = 0; i < n; ++i)
        ASSERT_NEAR(p[i], expected[i].get<double>(), tolerance)
            << key << " step " << t + 1 << " element " << i;
    }
  }
};

TEST_F(Golden, AdamWMatchesTorch) {
  std::vector<float> m(64, 0.0f), v(64, 0.0f);
  check(
      "adamw",
      [&](std::vector<float>& p, const std::vector<float>& g, int step) {
        AdamHyperparams h{1e-2, 0.9, 0.99, 1e-8, 0.1, true, true, step, 1.0};
        adam_step(p.data(), g.data(), m.data(), v.data(), p.size(), h);
      },
      2e-6);
}

TEST_F(Golden, AdamWithL2MatchesTorch) {
  std::vector<float> m(64, 0.0f), v(64, 0.0f);
  check(
      "adam_l2",
      [&](std::vector<float>& p, const std::vector<float>& g, int step) {
        AdamHyperparams h{1e-2, 0.8, 0.999, 1e-6, 0.05, false, true, step, 1.0};
        adam_step(p.data(), g.data(), m.data(), v.data(), p.size(), h);
      },
      2e-6);
}

TEST_F(Golden, SgdMatchesTorch) {
  std::vector<float> buffer(64, 0.0f);
  check(
      "sgd_momentum",
      [&](std::vector<float>& p, const std::vector<float>& g, int step) {
        SgdHyperparams h{0.1, 0.9, 0.1, 0.01, false, step == 1, 1.0};
        sgd_step(p.data(), g.data(), buffer.data(), p.size(), h);
      },
      2e-6);
  std::fill(buffer.begin(), buffer.end(), 0.0f);
  check(
      "sgd_nesterov",
      [&](std::vector<float>& p, const std::vector<float>& g, int step) {
        SgdHyperparams h{0.1, 0.9, 0.0, 0.0, true, step == 1, 1.0};
        sgd_step(p.data(), g.data(), buffer.data(), p.size(), h);
      },
      2e-6);
}

TEST_F(Golden, LambMatchesDeepSpeedFusedLamb) {
  std::vector<float> m(64, 0.0f), v(64, 0.0f);
  check(
      "lamb",
      [&](std::vector<float>& p, const std::vector<float>& g, int step) {
        LambHyperparams h;
        h.lr = 1e-2;
        h.eps = 1e-6;
        h.weight_decay = 0.01;
        h.step = step;
        const SumsOfSquares sums =
            lamb_moments(p.data(), g.data(), m.data(), v.data(), p.size(), h);
        lamb_apply(p.data(), m.data(), v.data(), p.size(), h,
                   lamb_trust_ratio(sums.params, sums.update, h));
      },
      5e-6);
}

}  // namespace
}  // namespace zero::optim
