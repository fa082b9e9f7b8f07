// Vectorised optimizer kernels against their scalar references, odd sizes included: Adam and SGD
// bitwise (the kernels compile without FMA contraction), Lamb split into shards with summed norms
// against the whole-tensor reference within a tolerance (the sums are added in another order).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "zero/core/error.h"
#include "zero/engine/options.h"
#include "zero/optim/kernels.h"
#include "zero/optim/optimizers.h"

namespace zero::optim {
namespace {

std::vector<float> values(std::size_t count, double phase, double scale = 1.0) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(scale * std::sin(0.731 * i + phase));
  return out;
}

void expect_bitwise_equal(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(actual[i]), std::bit_cast<std::uint32_t>(expected[i]))
        << "element " << i << ": " << actual[i] << " vs " << expected[i];
}

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                  double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i)
    ASSERT_NEAR(actual[i], expected[i], tolerance * (1.0 + std::fabs(expected[i])))
        << "element " << i;
}

class KernelSizes : public ::testing::TestWithParam<std::size_t> {};

TEST_P(KernelSizes, AdamMatchesReference) {
  const std::size_t n = GetParam();
  for (bool adam_w_mode : {true, false}) {
    AdamHyperparams hyper;
    hyper.lr = 1e-2;
    hyper.weight_decay = 0.1;
    hyper.adam_w_mode = adam_w_mode;
    hyper.grad_scale = 0.5;
    std::vector<float> p = values(n, 0.1), m(n, 0.0f), v(n, 0.0f);
    std::vector<float> rp = p, rm = m, rv = v;
    for (int step = 1; step <= 3; ++step) {
      hyper.step = step;
      const std::vector<float> g = values(n, 0.3 * step, 2.0);
      adam_step(p.data(), g.data(), m.data(), v.data(), n, hyper);
      adam_step_reference(rp.data(), g.data(), rm.data(), rv.data(), n, hyper);
    }
    expect_bitwise_equal(p, rp);
    expect_bitwise_equal(m, rm);
    expect_bitwise_equal(v, rv);
  }
}

TEST_P(KernelSizes, SgdMatchesReference) {
  const std::size_t n = GetParam();
  for (double momentum : {0.0, 0.9}) {
    for (bool nesterov : {false, true}) {
      if (nesterov && momentum == 0.0) continue;
      SgdHyperparams hyper;
      hyper.momentum = momentum;
      hyper.nesterov = nesterov;
      hyper.weight_decay = 0.01;
      std::vector<float> p = values(n, 0.2), buffer(n, 0.0f);
      std::vector<float> rp = p, rbuffer = buffer;
      for (int step = 1; step <= 3; ++step) {
        hyper.first_step = step == 1;
        const std::vector<float> g = values(n, 0.5 * step);
        sgd_step(p.data(), g.data(), buffer.data(), n, hyper);
        sgd_step_reference(rp.data(), g.data(), rbuffer.data(), n, hyper);
      }
      expect_bitwise_equal(p, rp);
      expect_bitwise_equal(buffer, rbuffer);
    }
  }
}

TEST_P(KernelSizes, LambInShardsMatchesWholeTensorReference) {
  const std::size_t n = GetParam();
  LambHyperparams hyper;
  hyper.weight_decay = 0.01;
  std::vector<float> p = values(n, 0.4), m(n, 0.0f), v(n, 0.0f);
  std::vector<float> rp = p, rm = m, rv = v;
  for (int step = 1; step <= 3; ++step) {
    hyper.step = step;
    const std::vector<float> g = values(n, 0.7 * step);
    // Three uneven shards: partial sums, summed (the all-reduce), then one trust ratio.
    const std::size_t cuts[4] = {0, n / 3, n / 3 + n / 4, n};
    SumsOfSquares total;
    for (int s = 0; s < 3; ++s) {
      const std::size_t at = cuts[s], count = cuts[s + 1] - cuts[s];
      const SumsOfSquares piece =
          lamb_moments(p.data() + at, g.data() + at, m.data() + at, v.data() + at, count, hyper);
      total.params += piece.params;
      total.update += piece.update;
    }
    const double ratio = lamb_trust_ratio(total.params, total.update, hyper);
    for (int s = 0; s < 3; ++s)
      lamb_apply(p.data() + cuts[s], m.data() + cuts[s], v.data() + cuts[s], cuts[s + 1] - cuts[s],
                 hyper, ratio);
    lamb_step_reference(rp.data(), g.data(), rm.data(), rv.data(), n, hyper);
  }
  expect_close(p, rp, 2e-6);
}

INSTANTIATE_TEST_SUITE_P(Sizes, KernelSizes, ::testing::Values(1, 22, 1023, 100003));

TEST(Optimizers, FactoryNamesAndStates) {
  config::OptimizerConfig options;
  options.type = config::optimizer_type_from_name("adam");  // case-insensitive, as DeepSpeed
  EXPECT_EQ(options.type, config::OptimizerType::kAdam);
  auto adam = make_optimizer(options);
  EXPECT_EQ(adam->name(), "AdamW");  // DeepSpeed's Adam defaults to adam_w_mode = true
  options.adam_w_mode = false;
  EXPECT_EQ(make_optimizer(options)->name(), "Adam");
  options.type = config::OptimizerType::kAdamW;
  EXPECT_EQ(make_optimizer(options)->name(), "AdamW");
  options.type = config::OptimizerType::kSgd;
  EXPECT_EQ(make_optimizer(options)->states_per_element(), 0);
  options.momentum = 0.9;
  EXPECT_EQ(make_optimizer(options)->states_per_element(), 1);
  options.type = config::OptimizerType::kLamb;
  EXPECT_EQ(make_optimizer(options)->states_per_element(), 2);
  EXPECT_EQ(config::optimizer_type_from_name("LAMB"), config::OptimizerType::kLamb);
  EXPECT_THROW(config::optimizer_type_from_name("Adagrad"), Error);
  options.type = config::OptimizerType::kNone;
  EXPECT_THROW(make_optimizer(options), Error);
  EXPECT_EQ(make_optimizer(EngineOptions{}.optimizer)->name(), "AdamW");
  EXPECT_DOUBLE_EQ(make_optimizer(EngineOptions{}.optimizer)->lr(), 1e-3);
}

TEST(Optimizers, LambStepOverChunksAllReducesPerTensorSums) {
  // Two tensors split over two "ranks": the all_reduce_sum callback must see 2 × 2 sums.
  config::OptimizerConfig options;
  options.type = config::OptimizerType::kLamb;
  Lamb lamb(options);
  std::vector<float> p = values(10, 0.1), g = values(10, 0.9), state(20, 0.0f);
  ShardChunk chunk{p.data(), g.data(), state.data(), 10, {{0, 4, 0}, {4, 6, 1}}};
  OptimizerStep step;
  step.lr = 1e-2;
  step.beta1 = 0.9;
  step.num_tensors = 2;
  std::size_t seen = 0;
  step.all_reduce_sum = [&](float*, std::size_t count) { seen = count; };
  lamb.step(std::span<ShardChunk>(&chunk, 1), step);
  EXPECT_EQ(seen, 4u);
}

// A run of elements stepped in pieces (offload's sub-groups smaller than a unit), each a chunk
// whose states stride by the run's length, equals the run stepped whole, bit for bit (Adam, AdamW
// and SGD with momentum are elementwise), pieces of odd sizes included.
TEST(Optimizers, PiecesWithStridedStatesStepAsTheWholeRun) {
  constexpr std::size_t kCount = 1023;
  for (const config::OptimizerType type :
       {config::OptimizerType::kAdam, config::OptimizerType::kAdamW, config::OptimizerType::kSgd}) {
    config::OptimizerConfig options;
    options.type = type;
    options.momentum = 0.9;
    options.weight_decay = 0.01;
    const std::unique_ptr<Optimizer> optimizer = make_optimizer(options);
    const auto states = static_cast<std::size_t>(optimizer->states_per_element());
    std::vector<float> whole = values(kCount, 0.1), grads = values(kCount, 0.9);
    std::vector<float> whole_state = values(states * kCount, 0.4, 0.01);
    std::vector<float> pieces = whole, pieces_state = whole_state;
    for (float& value : whole_state) value = std::fabs(value);  // exp_avg_sq stays >= 0
    for (float& value : pieces_state) value = std::fabs(value);
    OptimizerStep step;
    step.lr = 1e-2;
    step.beta1 = 0.9;
    step.step = 3;
    step.grad_scale = 0.5;
    for (int repeat = 0; repeat < 2; ++repeat) {
      ShardChunk all{whole.data(), grads.data(), whole_state.data(), kCount, {}};
      optimizer->step(std::span<ShardChunk>(&all, 1), step);
      std::vector<ShardChunk> chunks;
      for (std::size_t begin = 0; begin < kCount; begin += 300) {
        ShardChunk chunk{pieces.data() + begin,
                         grads.data() + begin,
                         pieces_state.data() + begin,
                         std::min<std::size_t>(300, kCount - begin),
                         {}};
        chunk.state_stride_elements = kCount;
        chunks.push_back(chunk);
      }
      optimizer->step(chunks, step);
    }
    expect_bitwise_equal(pieces, whole);
    expect_bitwise_equal(pieces_state, whole_state);
  }
}

}  // namespace
}  // namespace zero::optim
