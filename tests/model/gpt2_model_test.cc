// GPT2Model / GPT2Compute: dropout keyed by global sample (batch splits agree), determinism,
// activation accounting in the ledger, the unit call sequence, and sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "../common/forwarding_context.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

class GPT2ModelTest : public ::testing::Test {
 protected:
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

TEST_F(GPT2ModelTest, DropoutDependsOnGlobalSampleNotOnTheBatchSplit) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(5);
  const std::int64_t B = 4, T = 10;
  const auto tokens = sequence(B * T, 53, 1), targets = sequence(B * T, 53, 2);
  const DropoutKey key{.seed = 9, .step = 3, .sample_offset = 0, .training = true};

  GPT2Compute whole(config, B, T, *context_, allocator_);
  const float loss = model.forward(whole, tokens, targets, key);
  GPT2Compute again(config, B, T, *context_, allocator_);
  EXPECT_EQ(model.forward(again, tokens, targets, key), loss);  // bit-identical
  GPT2Compute off(config, B, T, *context_, allocator_);
  EXPECT_NE(model.forward(off, tokens, targets), loss);  // dropout changes the loss
  DropoutKey next_step = key;
  next_step.step = 4;
  EXPECT_NE(model.forward(again, tokens, targets, next_step), loss);

  // Two "ranks" with two samples each see the same per-sample losses as one with four.
  GPT2Compute half(config, 2, T, *context_, allocator_);
  for (int rank = 0; rank < 2; ++rank) {
    DropoutKey part = key;
    part.sample_offset = 2 * rank;
    const std::span<const int> part_tokens(tokens.data() + 2 * rank * T, 2 * T);
    const std::span<const int> part_targets(targets.data() + 2 * rank * T, 2 * T);
    model.forward(half, part_tokens, part_targets, part);
    for (std::int64_t row = 0; row < 2 * T; ++row)
      ASSERT_NEAR(half.losses()[row], whole.losses()[2 * rank * T + row], 1e-5)
          << "rank " << rank << " row " << row;
  }
}

TEST_F(GPT2ModelTest, GradientsAccumulateAndFollowLossScale) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(6);
  const auto tokens = sequence(2 * 8, 53, 3), targets = sequence(2 * 8, 53, 4);
  GPT2Compute compute(config, 2, 8, *context_, allocator_);
  model.forward(compute, tokens, targets);
  model.backward(compute);
  std::vector<float> once(model.grad_data(1),
                          model.grad_data(1) + model.grads(1).layout().num_elements());
  model.forward(compute, tokens, targets);
  model.backward(compute, 0.5f / compute.num_counted_targets());  // half the mean-loss gradient
  for (std::size_t i = 0; i < once.size(); ++i)
    ASSERT_NEAR(model.grad_data(1)[i], 1.5f * once[i], 1e-6f + 1e-5f * std::abs(once[i]));
  // A loss of zero counted targets gives no gradient.
  model.zero_grads();
  const std::vector<int> ignored(2 * 8, -100);
  EXPECT_EQ(model.forward(compute, tokens, ignored), 0.0f);
  model.backward(compute);
  for (int u = 0; u < model.num_units(); ++u)
    for (std::size_t i = 0; i < model.grads(u).layout().num_elements(); ++i)
      ASSERT_EQ(model.grad_data(u)[i], 0.0f);
}

TEST_F(GPT2ModelTest, ActivationsAreInTheLedgerAsPlanned) {
  const GPT2Config config = tiny_config();
  for (bool checkpointing : {false, true}) {
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    const std::unique_ptr<zero::DeviceContext> context = zero::make_cpu_context();
    const ComputeOptions options{.activation_checkpointing = checkpointing};
    const ActivationPlan plan = GPT2Compute::plan(config, 3, 7, options);
    GPT2Compute compute(config, 3, 7, *context, allocator, options);
    const auto activations =
        ledger.entry(MemorySpace::kHost, MemoryCategory::kActivations).current_bytes;
    const auto workspace =
        ledger.entry(MemorySpace::kHost, MemoryCategory::kWorkspace).current_bytes;
    std::size_t kept = plan.recompute_bytes;
    for (std::size_t bytes : plan.kept_bytes) kept += bytes;
    EXPECT_GE(static_cast<std::size_t>(activations), kept);
    EXPECT_LT(static_cast<std::size_t>(activations), kept + 64);  // padding to 16 elements
    EXPECT_GE(static_cast<std::size_t>(workspace), plan.workspace_bytes);
    EXPECT_LT(static_cast<std::size_t>(workspace), plan.workspace_bytes + 64);
    ASSERT_EQ(plan.kept_bytes.size(), 4u);
    EXPECT_GT(plan.kept_bytes[1], 0u);
    if (checkpointing) {
      EXPECT_EQ(plan.kept_bytes[1], 3u * 7 * 24 * sizeof(float));  // only the block output
    }
  }
}

// --recompute_blocks k: the first k of L blocks recompute their internals in backward, into the
// last block's (dead by then) when some are kept. The gradients and the loss are those of the run
// that keeps every block's, bit for bit, for GPT-2 (dropout at every site) and the Llama family
// (Llama and Qwen2 tiny shapes: grouped-query attention, RoPE, SwiGLU; Qwen2's q/k/v biases), with
// either CPU GEMM (ctest gpt2_recompute_bitwise_eigen runs it with Eigen's).
TEST_F(GPT2ModelTest, RecomputingTheFirstBlocksKeepsTheGradientsBitwise) {
  GPT2Config gpt2 = tiny_config({.n_layer = 4});
  gpt2.resid_pdrop = gpt2.embd_pdrop = gpt2.attn_pdrop = 0.2;
  GPT2Config llama = tiny_llama_config({.n_layer = 4, .n_head = 4});
  llama.family = ModelFamily::kLlama;  // Qwen2's shape without its q/k/v biases
  const GPT2Config qwen2 = tiny_llama_config({.n_layer = 4, .n_head = 4});
  const std::int64_t B = 2, T = 6;
  const auto tokens = sequence(B * T, 53, 11), targets = sequence(B * T, 53, 12);
  const DropoutKey key{.seed = 3, .step = 2, .sample_offset = 1, .training = true};
  for (const GPT2Config& config : {gpt2, llama, qwen2}) {
    GPT2Model model(config, allocator_);
    model.init(21);
    auto gradients = [&](ComputeOptions options, float& loss) {
      model.zero_grads();
      GPT2Compute compute(config, B, T, *context_, allocator_, options);
      loss = model.forward(compute, tokens, targets, key);
      model.backward(compute);
      std::vector<std::vector<float>> grads;
      for (int u = 0; u < model.num_units(); ++u)
        grads.emplace_back(model.grad_data(u),
                           model.grad_data(u) + model.grads(u).layout().num_elements());
      return grads;
    };
    float kept_loss = 0.0f;
    const auto kept = gradients({}, kept_loss);
    for (int blocks = 1; blocks <= 4; ++blocks) {
      float loss = 0.0f;
      const auto recomputed = gradients({.recompute_blocks = blocks}, loss);
      const std::string what = std::string(name_of(config.family)) + ", the first " +
                               std::to_string(blocks) + " blocks recomputed";
      EXPECT_EQ(loss, kept_loss) << what;
      for (int u = 0; u < model.num_units(); ++u)
        for (std::size_t i = 0; i < kept[u].size(); ++i)
          ASSERT_EQ(recomputed[u][i], kept[u][i])
              << what << ": " << model.units()[u].name << " " << i;
    }
  }
}

// Recomputing k < L blocks saves k blocks' internals (no set of their own; each set starts
// 64-byte aligned, so within 64 bytes a set); k = L keeps one shared set, as much as k = L-1
// keeps. The ledger holds what the plan says, within the layout's padding.
TEST_F(GPT2ModelTest, RecomputedBlocksSaveTheirInternalsInThePlanAndTheLedger) {
  for (const GPT2Config& config :
       {tiny_config({.n_layer = 4}), tiny_llama_config({.n_layer = 4, .n_head = 4})}) {
    const std::int64_t B = 3, T = 7;
    const std::size_t output_bytes = B * T * config.n_embd * sizeof(float);  // residual3
    const ActivationPlan kept = GPT2Compute::plan(config, B, T);
    const std::size_t internals = kept.kept_bytes[block_unit(3)] - output_bytes;  // + its pad
    ASSERT_GT(internals, 0u);
    for (int blocks = 0; blocks <= 4; ++blocks) {
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      const ComputeOptions options{.recompute_blocks = blocks};
      const ActivationPlan plan = GPT2Compute::plan(config, B, T, options);
      const std::size_t saved = kept.total_bytes() - plan.total_bytes();
      const std::size_t expected = std::min(blocks, 3) * internals;
      EXPECT_GE(saved + 64, expected) << blocks << " blocks";
      EXPECT_LE(saved, expected + 64 * static_cast<std::size_t>(blocks)) << blocks << " blocks";
      for (int layer = 0; layer < 4; ++layer)
        if (layer < blocks)
          EXPECT_EQ(plan.kept_bytes[block_unit(layer)], output_bytes) << "block " << layer;
        else
          EXPECT_GE(plan.kept_bytes[block_unit(layer)] + 64, output_bytes + internals)
              << "block " << layer;
      EXPECT_EQ(plan.recompute_bytes == 0, blocks < 4);
      EXPECT_LT(plan.recompute_bytes, internals + 64);
      GPT2Compute compute(config, B, T, *context_, allocator, options);
      const auto activations =
          ledger.entry(MemorySpace::kHost, MemoryCategory::kActivations).current_bytes;
      const std::size_t planned = plan.total_bytes() - plan.workspace_bytes;
      EXPECT_GE(static_cast<std::size_t>(activations), planned);
      EXPECT_LT(static_cast<std::size_t>(activations), planned + 64);  // padding to 16 elements
    }
    EXPECT_THROW(GPT2Compute::plan(config, B, T, {.recompute_blocks = 5}), Error);
    EXPECT_THROW(GPT2Compute::plan(config, B, T, {.recompute_blocks = -1}), Error);
  }
}

TEST_F(GPT2ModelTest, UnitsDrivenOneAtATimeFromSeparateBuffersMatchTheModel) {
  // What the engine does: each unit's parameters in its own (here: copied, padded) buffer.
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(8);
  const auto tokens = sequence(2 * 6, 53, 5), targets = sequence(2 * 6, 53, 6);
  GPT2Compute reference(config, 2, 6, *context_, allocator_);
  const float loss = model.forward(reference, tokens, targets);
  model.backward(reference);

  std::vector<std::vector<float>> params, grads;
  for (int u = 0; u < model.num_units(); ++u) {
    const FlatLayout layout(model.units()[u].tensors, 4, 32);
    params.emplace_back(layout.padded_num_elements(), 0.0f);
    grads.emplace_back(layout.padded_num_elements(), 0.0f);
    std::memcpy(params[u].data(), model.param_data(u), layout.num_elements() * sizeof(float));
  }
  GPT2Compute compute(config, 2, 6, *context_, allocator_);
  compute.set_inputs(tokens, targets);
  compute.forward_embeddings(params[0].data());
  for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, params[block_unit(l)].data());
  const int head = final_norm_unit(config);
  compute.forward_head(params[head].data(), params[0].data());
  EXPECT_EQ(compute.loss(), loss);
  compute.backward_head(params[head].data(), params[0].data(), grads[head].data(), grads[0].data());
  for (int l = static_cast<int>(config.n_layer) - 1; l >= 0; --l)
    compute.backward_block(l, params[block_unit(l)].data(), grads[block_unit(l)].data());
  compute.backward_embeddings(params[0].data(), grads[0].data());
  for (int u = 0; u < model.num_units(); ++u)
    for (std::size_t i = 0; i < model.grads(u).layout().num_elements(); ++i)
      ASSERT_EQ(grads[u][i], model.grad_data(u)[i]) << model.units()[u].name << " " << i;
}

// Whole-model finite differences with every dropout site active: checks that each backward
// draws the same masks as its forward (the golden test runs with dropout off).
TEST_F(GPT2ModelTest, FiniteDifferencesWithDropoutThroughTheWholeModel) {
  GPT2Config config = tiny_config();
  config.n_embd = 12;
  config.resid_pdrop = config.embd_pdrop = config.attn_pdrop = 0.2;
  const std::int64_t B = 2, T = 5;
  const auto tokens = sequence(B * T, 53, 7), targets = sequence(B * T, 53, 8);
  const DropoutKey key{.seed = 4, .step = 1, .sample_offset = 3, .training = true};
  for (bool checkpointing : {false, true}) {
    GPT2Model model(config, allocator_);
    model.init(12);
    // Larger weights than GPT-2's init so that every path carries gradient.
    for (int u = 0; u < model.num_units(); ++u)
      for (std::size_t i = 0; i < model.params(u).layout().num_elements(); ++i)
        model.param_data(u)[i] *= 10.0f;
    GPT2Compute compute(config, B, T, *context_, allocator_,
                        {.activation_checkpointing = checkpointing});
    model.forward(compute, tokens, targets, key);
    model.backward(compute);
    int checked = 0;
    for (int u = 0; u < model.num_units(); ++u) {
      const std::size_t count = model.params(u).layout().num_elements();
      for (std::size_t i = 7; i < count; i += count / 10 + 1) {
        if (u == 0 && i >= std::size_t(config.vocab_size * config.n_embd) &&
            i < std::size_t(config.padded_vocab_size() * config.n_embd))
          continue;  // padded vocabulary rows
        float& parameter = model.param_data(u)[i];
        const float saved = parameter;
        constexpr float kStep = 1e-2f;
        parameter = saved + kStep;
        const double plus = model.forward(compute, tokens, targets, key);
        parameter = saved - kStep;
        const double minus = model.forward(compute, tokens, targets, key);
        parameter = saved;
        const double numeric = (plus - minus) / (2.0 * kStep);
        const double analytic = model.grad_data(u)[i];
        EXPECT_NEAR(analytic, numeric, 2e-3 + 5e-2 * std::abs(numeric))
            << model.units()[u].name << " element " << i
            << (checkpointing ? " (checkpointing)" : "");
        ++checked;
      }
    }
    EXPECT_GE(checked, 30);
  }
}

TEST_F(GPT2ModelTest, InputsAreChecked) {
  const GPT2Config config = tiny_config();
  GPT2Compute compute(config, 1, 4, *context_, allocator_);
  EXPECT_THROW(compute.set_inputs(std::vector<int>{1, 2, 3}, {}), Error);
  EXPECT_THROW(compute.set_inputs(std::vector<int>{1, 2, 3, 53}, {}), Error);
  EXPECT_THROW(compute.set_inputs(std::vector<int>{1, 2, 3, 4}, std::vector<int>{1, 2, 3, 60}),
               Error);
  EXPECT_THROW(GPT2Compute(config, 1, 13, *context_, allocator_), Error);
}

TEST(Sampling, GreedyAndTopK) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.9f, 0.0f};
  EXPECT_EQ(sample_greedy(logits), 1);
  EXPECT_EQ(sample_top_k(logits, 1, 1.0f, 0.99f), 1);
  std::vector<int> counts(5, 0);
  for (int i = 0; i < 2000; ++i) ++counts[sample_top_k(logits, 2, 1.0f, (i + 0.5f) / 2000.0f)];
  EXPECT_EQ(counts[0] + counts[2] + counts[4], 0);
  const double p1 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.9));
  EXPECT_NEAR(counts[1] / 2000.0, p1, 0.01);
  EXPECT_THROW(sample_top_k(logits, 2, 0.0f, 0.5f), Error);
}

TEST_F(GPT2ModelTest, GenerateIsDeterministicAndGreedyFollowsTheLogits) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(10);
  const std::vector<int> prompt = {3, 1, 4};
  const auto greedy = generate(model, *context_, prompt, 15, {});
  ASSERT_EQ(greedy.size(), 18u);  // runs past n_positions: the window slides
  EXPECT_EQ(std::vector<int>(greedy.begin(), greedy.begin() + 3), prompt);
  GPT2Compute compute(config, 1, 4, *context_, allocator_);
  model.forward(compute, std::vector<int>(greedy.begin(), greedy.begin() + 4));
  EXPECT_EQ(greedy[4], sample_greedy({compute.logits() + 3 * config.padded_vocab_size(), 53}));
  const SamplingOptions top_k{.top_k = 5, .temperature = 0.8f, .seed = 3};
  EXPECT_EQ(generate(model, *context_, prompt, 6, top_k),
            generate(model, *context_, prompt, 6, top_k));
  const auto stopped = generate(model, *context_, prompt, 15, {}, std::vector<int>{greedy[3]});
  EXPECT_EQ(stopped.size(), 4u);
  // Several stop ids (config.json's eos_token_id may be a list): the first new token among them
  // ends the sequence, kept.
  int absent = 0;  // an id greedy decoding never reaches
  while (std::find(greedy.begin(), greedy.end(), absent) != greedy.end()) ++absent;
  const std::vector<int> stops = {absent, greedy[4]};
  std::size_t last = 3;
  while (greedy[last] != greedy[4]) ++last;
  EXPECT_EQ(
      generate(model, *context_, prompt, 15, {}, stops),
      std::vector<int>(greedy.begin(), greedy.begin() + static_cast<std::ptrdiff_t>(last) + 1));
}

TEST(EosTokenIds, AreTheConfigsListOrItsOneIdOrNone) {
  GPT2Config config;
  config.eos_token_id = 7;
  EXPECT_EQ(eos_token_ids(config), std::vector<int>{7});
  config.eos_token_ids = {128001, 128008, 128009};
  config.eos_token_id = 128001;
  EXPECT_EQ(eos_token_ids(config), (std::vector<int>{128001, 128008, 128009}));
  config.eos_token_ids.clear();
  config.eos_token_id = -1;
  EXPECT_TRUE(eos_token_ids(config).empty());
}

// The CPU backend with a device space the host does not address: what generation sees on a GPU
// (the parameters copied through pinned memory), with the CPU's kernels in host mode (on the
// calling thread) and its streams' tasks delayed at random, so a copy not waited for shows.
class OpaqueDeviceContext final : public testing::ForwardingContext {
 public:
  OpaqueDeviceContext()
      : ForwardingContext(make_cpu_context(CpuContextOptions{.stress = StreamStress{.seed = 11}})) {
  }
  bool host_addressable(MemorySpace space) const override {
    return space != MemorySpace::kDevice && space != MemorySpace::kNvme;
  }
};

TEST_F(GPT2ModelTest, NextTokenLogitsAreTheLastRowOfTheForward) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(12);
  const std::vector<int> tokens = {5, 9, 2, 40, 7};
  NextTokenLogits next_logits(model, *context_, 8);
  const std::vector<float> logits = next_logits(tokens);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(config.vocab_size));
  GPT2Compute compute(config, 1, 5, *context_, allocator_);
  model.forward(compute, tokens);
  const float* last = compute.logits() + 4 * config.padded_vocab_size();
  // Causal: the padded tail of the 8-position window changes nothing before it.
  for (std::size_t v = 0; v < logits.size(); ++v) ASSERT_NEAR(logits[v], last[v], 1e-5) << v;
  // Past the window only the last `window` tokens count.
  std::vector<int> longer = {30, 31, 32, 33, 34};
  longer.insert(longer.end(), tokens.begin(), tokens.end());
  NextTokenLogits five(model, *context_, 5);
  EXPECT_EQ(five(longer), five(tokens));
  EXPECT_THROW(next_logits({}), Error);
  EXPECT_THROW(NextTokenLogits(model, *context_, config.n_positions + 1), Error);
}

TEST_F(GPT2ModelTest, GenerationIsTheSameInEveryCpuModeAndThroughAnOpaqueDevice) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(21);
  const std::vector<int> prompt = {3, 1, 4, 1, 5};
  const SamplingOptions top_k{.top_k = 4, .temperature = 0.9f, .seed = 2};
  const auto host = make_cpu_context(CpuContextOptions{});
  const auto stressed =
      make_cpu_context(CpuContextOptions{.stress = StreamStress{.seed = 5}, .asynchronous = true});
  OpaqueDeviceContext opaque;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(name_of(dtype)));
    const std::vector<int> expected = generate(model, *host, prompt, 12, top_k, {}, dtype);
    EXPECT_EQ(generate(model, *stressed, prompt, 12, top_k, {}, dtype), expected);
    EXPECT_EQ(generate(model, opaque, prompt, 12, top_k, {}, dtype), expected);
    NextTokenLogits on_host(model, *host, 8, dtype), on_stream(model, *stressed, 8, dtype),
        copied(model, opaque, 8, dtype);
    EXPECT_EQ(on_stream(prompt), on_host(prompt));  // bit for bit
    EXPECT_EQ(copied(prompt), on_host(prompt));
  }
  // The parameters were copied to the opaque device once per NextTokenLogits, in its ledger.
  EXPECT_GT(opaque.inner().ledger().entry(MemorySpace::kDevice, MemoryCategory::kParams).peak_bytes,
            0);
}

TEST_F(GPT2ModelTest, Bf16GenerationRoundsTheParameters) {
  const GPT2Config config = tiny_config();
  GPT2Model model(config, allocator_);
  model.init(22);
  const std::vector<int> prompt = {8, 6, 7};
  NextTokenLogits fp32(model, *context_, 4), bf16(model, *context_, 4, DType::kBFloat16);
  const std::vector<float> exact = fp32(prompt), rounded = bf16(prompt);
  double largest = 0.0;
  for (std::size_t v = 0; v < exact.size(); ++v)
    largest = std::max(largest, static_cast<double>(std::fabs(exact[v] - rounded[v])));
  EXPECT_GT(largest, 0.0);   // the bf16 path ran
  EXPECT_LT(largest, 5e-2);  // and is the same model
}

}  // namespace
}  // namespace zero::gpt2
