// Generation with a KV cache (zero/gpt2/decoder.h): the cached attention kernel against its scalar
// twin (grouped-query heads, several query rows at an offset, odd head sizes, positions past the
// cached ones never read) and through the seam in both CPU modes; the decoder's logits at every
// step against GPT2Compute's full forward over the sequence so far (the oracle independent of the
// cache) for GPT-2 and the Llama family, across prefill chunks and in every CPU mode; greedy
// generation against a full forward per token, past n_positions too; the decoder's refusals.
// transformers' own generate() is the oracle of generate_golden_test.
#include "zero/gpt2/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../common/kernel_checks.h"
#include "../common/random_inputs.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/reference_kernels.h"
#include "zero/gpt2/sampling.h"

namespace zero::gpt2 {
namespace {

using zero::testing::random_tokens;
using zero::testing::random_vector;

struct CacheShape {
  std::int64_t Q, first_position, max_positions, NH, KVH, HS;
};
// One query at the first position, a GQA step late in a cache, several rows (prefill) at an
// offset, a single key/value head for seven query heads with 33 channels.
const CacheShape kCacheShapes[] = {
    {1, 0, 1, 1, 1, 1}, {1, 9, 16, 6, 2, 10}, {5, 3, 8, 4, 4, 8}, {3, 20, 23, 7, 1, 33}};

struct CacheInputs {
  std::vector<float> q, keys, values;
  CachedAttention call(float* out, const CacheShape& s) const {
    return {out, q.data(),         (s.NH + 2 * s.KVH) * s.HS, keys.data(), values.data(),
            s.Q, s.first_position, s.max_positions,           s.NH,        s.KVH,
            s.HS};
  }
};

// Random q rows (a qkv row's stride) and caches whose positions past first_position + Q are NaN:
// a kernel that reads past the causal limit returns NaN.
CacheInputs cache_inputs(const CacheShape& s) {
  CacheInputs inputs{random_vector(s.Q * (s.NH + 2 * s.KVH) * s.HS, 1),
                     random_vector(s.KVH * s.max_positions * s.HS, 2, 2.0),
                     random_vector(s.KVH * s.max_positions * s.HS, 3)};
  for (std::int64_t head = 0; head < s.KVH; ++head)
    for (std::int64_t t = s.first_position + s.Q; t < s.max_positions; ++t)
      for (std::int64_t c = 0; c < s.HS; ++c) {
        const std::int64_t index = (head * s.max_positions + t) * s.HS + c;
        inputs.keys[index] = inputs.values[index] = std::numeric_limits<float>::quiet_NaN();
      }
  return inputs;
}

TEST(CachedAttention, MatchesItsScalarTwinOnGroupedHeads) {
  for (const CacheShape& s : kCacheShapes) {
    SCOPED_TRACE(::testing::Message() << "Q " << s.Q << " first " << s.first_position << " NH "
                                      << s.NH << " KVH " << s.KVH << " HS " << s.HS);
    const CacheInputs inputs = cache_inputs(s);
    std::vector<float> actual(s.Q * s.NH * s.HS), expected(actual.size());
    cpu::cached_attention_forward(inputs.call(actual.data(), s));
    reference::cached_attention_forward<double>(inputs.call(expected.data(), s));
    zero::testing::expect_near_all(actual, expected, 2e-6, "cached attention");
  }
}

TEST(CachedAttention, RunsThroughTheSeamInBothCpuModesAndRefusesBadShapes) {
  const CacheShape s = kCacheShapes[1];
  const CacheInputs inputs = cache_inputs(s);
  std::vector<float> direct(s.Q * s.NH * s.HS);
  cpu::cached_attention_forward(inputs.call(direct.data(), s));
  for (const bool asynchronous : {false, true}) {
    CpuContextOptions options;
    options.asynchronous = asynchronous;
    const auto context = make_cpu_context(options);
    const auto kernels = make_kernels(*context);
    std::vector<float> out(direct.size());
    kernels->cached_attention_forward(context->compute_stream(), inputs.call(out.data(), s));
    context->compute_stream().synchronize();
    EXPECT_EQ(out, direct);
    CachedAttention past = inputs.call(out.data(), s);
    past.Q = s.max_positions - s.first_position + 1;
    EXPECT_THROW(kernels->cached_attention_forward(context->compute_stream(), past), Error);
    CachedAttention uneven = inputs.call(out.data(), s);
    uneven.KVH = 4;  // 6 heads do not share 4 key/value heads
    EXPECT_THROW(kernels->cached_attention_forward(context->compute_stream(), uneven), Error);
  }
}

class DecoderTest : public ::testing::Test {
 protected:
  // GPT2Compute's logits of the last of `tokens` (B 1): the full forward over the whole sequence.
  std::vector<float> full_forward_logits(const GPT2Model& model, const std::vector<int>& tokens) {
    const GPT2Config& config = model.config();
    GPT2Compute compute(config, 1, std::ssize(tokens), *context_, allocator_);
    model.forward(compute, tokens);
    const float* row = compute.logits() + (tokens.size() - 1) * config.padded_vocab_size();
    return {row, row + config.vocab_size};
  }

  // The decoder's logits after the prompt and after each of `steps` tokens against the full
  // forward's, within 1e-5 of the logits' scale.
  void expect_steps_follow_the_full_forward(const GPT2Model& model, DeviceContext& context,
                                            std::int64_t prompt_length, int steps) {
    Decoder decoder(model, context, model.config().n_positions);
    std::vector<int> tokens = random_tokens(prompt_length, model.config().vocab_size, 7);
    std::vector<float> logits = decoder.append(tokens);
    for (int step = 0;; ++step) {
      SCOPED_TRACE("position " + std::to_string(tokens.size() - 1));
      const std::vector<float> expected = full_forward_logits(model, tokens);
      double scale = 0.0, error = 0.0;
      for (std::size_t v = 0; v < expected.size(); ++v) {
        scale = std::max(scale, std::abs(double(expected[v])));
        error = std::max(error, std::abs(double(logits[v]) - expected[v]));
      }
      EXPECT_LE(error, 1e-5 * scale);
      if (step == steps) break;
      tokens.push_back(sample_greedy(logits));
      logits = decoder.append({&tokens.back(), 1});
    }
    EXPECT_EQ(decoder.positions(), std::ssize(tokens));
  }

  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
};

TEST_F(DecoderTest, Gpt2StepsFollowTheFullForward) {
  GPT2Model model(tiny_config(), allocator_);
  model.init(31);
  expect_steps_follow_the_full_forward(model, *context_, 5, 7);  // up to n_positions
}

TEST_F(DecoderTest, LlamaFamilyStepsFollowTheFullForward) {
  GPT2Config config = tiny_llama_config({.n_positions = 16, .n_embd = 32, .n_head = 4});
  config.n_kv_head = 1;  // four query heads on one key/value head
  config.rope_scaling = {RopeScaling::Type::kLlama3, 8.0, 1.0, 4.0, 8.0};
  GPT2Model model(config, allocator_);
  model.init(32);
  expect_steps_follow_the_full_forward(model, *context_, 4, 12);
  GPT2Model qwen2(tiny_llama_config(), allocator_);  // q/k/v biases, two key/value heads
  qwen2.init(33);
  expect_steps_follow_the_full_forward(qwen2, *context_, 1, 11);
}

TEST_F(DecoderTest, APromptLongerThanAChunkIsPrefilledInChunks) {
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt2");
    const TinySizes sizes{.n_positions = 2 * Decoder::kChunkRows + 8, .n_head = llama ? 4 : 3};
    GPT2Model model(llama ? tiny_llama_config(sizes) : tiny_config(sizes), allocator_);
    model.init(34);
    expect_steps_follow_the_full_forward(model, *context_, 2 * Decoder::kChunkRows + 3, 2);
  }
}

TEST_F(DecoderTest, AsynchronousCpuModeGivesTheSameLogits) {
  GPT2Model model(tiny_llama_config(), allocator_);
  model.init(35);
  const auto stressed =
      make_cpu_context(CpuContextOptions{.stress = StreamStress{.seed = 3}, .asynchronous = true});
  Decoder on_host(model, *context_, 12), on_stream(model, *stressed, 12);
  const std::vector<int> prompt = {4, 8, 15, 16};
  EXPECT_EQ(on_stream.append(prompt), on_host.append(prompt));  // bit for bit
  for (const int token : {23, 42, 7})
    EXPECT_EQ(on_stream.append({&token, 1}), on_host.append({&token, 1}));
}

// Greedy tokens chosen from the full forward over the last n_positions tokens, one per new token:
// the semantics generate() keeps, its window sliding past n_positions.
TEST_F(DecoderTest, GreedyGenerationEqualsAFullForwardPerTokenPastTheWindowToo) {
  for (const bool llama : {false, true}) {
    SCOPED_TRACE(llama ? "llama" : "gpt2");
    GPT2Model model(llama ? tiny_llama_config() : tiny_config(), allocator_);
    model.init(36);
    const std::vector<int> prompt = {3, 1, 4, 1, 5};
    const std::vector<int> generated = generate(model, *context_, prompt, 14, {});
    std::vector<int> expected = prompt;
    const std::size_t window = static_cast<std::size_t>(model.config().n_positions);
    while (expected.size() < generated.size()) {
      const std::size_t first = expected.size() > window ? expected.size() - window : 0;
      expected.push_back(sample_greedy(full_forward_logits(
          model, std::vector<int>(expected.begin() + std::ptrdiff_t(first), expected.end()))));
    }
    EXPECT_EQ(generated, expected);
  }
}

TEST_F(DecoderTest, RefusesWhatItCannotHold) {
  GPT2Model model(tiny_config(), allocator_);
  model.init(37);
  EXPECT_THROW(Decoder(model, *context_, 13), Error);  // n_positions 12
  EXPECT_THROW(Decoder(model, *context_, 0), Error);
  Decoder decoder(model, *context_, 4);
  decoder.append(std::vector<int>{1, 2, 3});
  EXPECT_THROW(decoder.append(std::vector<int>{4, 5}), Error);
  EXPECT_THROW(decoder.append(std::vector<int>{53}), Error);  // V 53
  EXPECT_THROW(decoder.append({}), Error);
  EXPECT_EQ(decoder.positions(), 3);  // the cache as it was
  decoder.append(std::vector<int>{4});
  decoder.reset();
  EXPECT_EQ(decoder.positions(), 0);
}

}  // namespace
}  // namespace zero::gpt2
