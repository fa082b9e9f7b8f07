// --label_smoothing_factor's kernels (zero/gpt2/layers_cpu.h crossentropy_forward/backward with
// ε): the per-row losses against the definition in double, and the mean loss and its gradient
// against torch's CrossEntropyLoss(label_smoothing=ε, ignore_index=-100)
// (tests/golden/label_smoothing_reference.py through ZERO_PYTHON; skips without torch). Over the
// first V of Vp columns (the LM head's padded vocabulary) and with an ignored row.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "train_test_util.h"
#include "zero/gpt2/layers_cpu.h"

namespace zero::testing {
namespace {

constexpr std::int64_t N = 7, V = 13, Vp = 16;
constexpr float kEpsilon = 0.1f;

struct Rows {
  std::vector<float> logits = std::vector<float>(N * Vp);
  std::vector<int> targets = {3, 0, -100, 12, 7, 7, 1};
};

Rows random_rows() {
  Rows rows;
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (float& logit : rows.logits) logit = normal(generator);
  return rows;
}

// (1 - ε)·(-log p[target]) + ε·mean over the V classes of -log p, in double.
double smoothed_loss(const float* z, int target, double epsilon) {
  double max = z[0], sum = 0.0, mean = 0.0;
  for (std::int64_t v = 0; v < V; ++v) max = std::max<double>(max, z[v]);
  for (std::int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - max);
  const double lse = max + std::log(sum);
  for (std::int64_t v = 0; v < V; ++v) mean += (lse - z[v]) / static_cast<double>(V);
  return (1.0 - epsilon) * (lse - z[target]) + epsilon * mean;
}

TEST(LabelSmoothing, RowLossesAreTheDefinition) {
  const Rows rows = random_rows();
  std::vector<float> losses(N), logsumexp(N), plain(N);
  const std::int64_t counted = gpt2::cpu::crossentropy_forward(
      losses.data(), logsumexp.data(), rows.logits.data(), rows.targets.data(), N, V, Vp, kEpsilon);
  gpt2::cpu::crossentropy_forward(plain.data(), logsumexp.data(), rows.logits.data(),
                                  rows.targets.data(), N, V, Vp);
  EXPECT_EQ(counted, N - 1);
  for (std::int64_t row = 0; row < N; ++row) {
    const int target = rows.targets[row];
    if (target < 0) {
      EXPECT_EQ(losses[row], 0.0f);
      continue;
    }
    const double expected = smoothed_loss(&rows.logits[row * Vp], target, kEpsilon);
    EXPECT_NEAR(losses[row], expected, 1e-5 * expected) << "row " << row;
    EXPECT_NEAR(plain[row], smoothed_loss(&rows.logits[row * Vp], target, 0.0), 1e-5)
        << "ε = 0 is plain cross-entropy";
  }
}

TEST(LabelSmoothing, MeanLossAndGradientMatchTorch) {
  const char* python = std::getenv("ZERO_PYTHON");
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  if (python == nullptr || source == nullptr) GTEST_SKIP() << "ZERO_PYTHON/ZERO_SOURCE_DIR unset";
  TempFolder folder("label_smoothing");
  Rows rows = random_rows();
  {
    std::ofstream in(folder.path() / "in.txt");
    in.precision(9);
    in << N << " " << V << " " << kEpsilon << "\n";
    for (std::int64_t row = 0; row < N; ++row) {
      in << rows.targets[row];
      for (std::int64_t v = 0; v < V; ++v) in << " " << rows.logits[row * Vp + v];
      in << "\n";
    }
  }
  const std::string command =
      std::string(python) + " " + source + "/tests/golden/label_smoothing_reference.py " +
      (folder.path() / "in.txt").string() + " " + (folder.path() / "out.txt").string();
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) GTEST_SKIP() << "torch is not importable by " << python;
  ASSERT_EQ(code, 0) << command;
  std::ifstream out(folder.path() / "out.txt");
  double torch_loss = 0.0;
  out >> torch_loss;

  std::vector<float> losses(N), logsumexp(N);
  const std::int64_t counted = gpt2::cpu::crossentropy_forward(
      losses.data(), logsumexp.data(), rows.logits.data(), rows.targets.data(), N, V, Vp, kEpsilon);
  double sum = 0.0;
  for (float loss : losses) sum += loss;
  EXPECT_NEAR(sum / static_cast<double>(counted), torch_loss, 1e-5 * torch_loss);

  // The gradient of the mean: scale 1 / counted, in place over the logits.
  for (std::int64_t row = 0; row < N; ++row)
    for (std::int64_t v = V; v < Vp; ++v) rows.logits[row * Vp + v] = 99.0f;  // must become 0
  gpt2::cpu::crossentropy_backward(rows.logits.data(), logsumexp.data(), rows.targets.data(), N, V,
                                   Vp, 1.0f / static_cast<float>(counted), kEpsilon);
  for (std::int64_t row = 0; row < N; ++row) {
    for (std::int64_t v = 0; v < V; ++v) {
      double expected = 0.0;
      out >> expected;
      EXPECT_NEAR(rows.logits[row * Vp + v], expected, 1e-6) << "row " << row << " class " << v;
    }
    for (std::int64_t v = V; v < Vp; ++v) EXPECT_EQ(rows.logits[row * Vp + v], 0.0f);
  }
}

}  // namespace
}  // namespace zero::testing
