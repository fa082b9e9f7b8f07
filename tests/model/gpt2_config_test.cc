// GPT2Config (config.json, overrides, validation) and the parameter units and their initialisation.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "../common/test_data.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/error.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using testing::error_of;

TEST(GPT2Config, DefaultsAreGPT2Small) {
  const GPT2Config config = GPT2Config::gpt2_124m();
  EXPECT_EQ(config.padded_vocab_size(), 50304);
  EXPECT_EQ(config.head_size(), 64);
  EXPECT_EQ(config.hidden_size(), 3072);
  EXPECT_EQ(config.num_parameters(), 124439808);
}

TEST(GPT2Config, ReadsHuggingFaceJsonAndIgnoresUnrelatedKeys) {
  const GPT2Config config = GPT2Config::from_json_text(R"({
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
    "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 1024, "n_head": 16,
    "n_inner": null, "n_layer": 24, "n_positions": 1024, "reorder_and_upcast_attn": false,
    "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true,
    "summary_activation": null, "task_specific_params": {"text-generation": {"do_sample": true}},
    "vocab_size": 50257})");
  EXPECT_EQ(config.n_embd, 1024);
  EXPECT_EQ(config.n_layer, 24);
  EXPECT_EQ(config.n_head, 16);
  EXPECT_EQ(config.hidden_size(), 4096);
  const GPT2Config again = GPT2Config::from_json_text(config.to_json_text());
  EXPECT_EQ(again.to_json_text(), config.to_json_text());
  EXPECT_NE(error_of([] {
              GPT2Config::from_json_text(R"({"n_embd": "wide"})");
            }).find("must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { GPT2Config::from_json_text(R"({"model_type": "bert"})"); }).find("bert"),
            std::string::npos);
  EXPECT_NE(error_of([] { GPT2Config::from_json_text("{"); }).find("not valid JSON"),
            std::string::npos);
}

TEST(GPT2Config, OverridesLikeRunClm) {
  GPT2Config config;
  config.apply_overrides("n_embd=1024,n_head=16,n_layer=48,n_positions=1024, resid_pdrop=0.0");
  EXPECT_EQ(config.n_embd, 1024);
  EXPECT_EQ(config.n_head, 16);
  EXPECT_EQ(config.n_layer, 48);
  EXPECT_EQ(config.resid_pdrop, 0.0);

  std::string message = error_of([] { GPT2Config().apply_overrides("n_embd=1000,n_head=16"); });
  EXPECT_NE(message.find("not divisible by n_head"), std::string::npos) << message;
  message = error_of([] { GPT2Config().apply_overrides("n_embed=1024"); });
  EXPECT_NE(message.find("unknown key 'n_embed'"), std::string::npos) << message;
  EXPECT_NE(message.find("did you mean 'n_embd'"), std::string::npos) << message;
  message = error_of([] { GPT2Config().apply_overrides("n_layer=12x"); });
  EXPECT_NE(message.find("bad value '12x' for 'n_layer'"), std::string::npos) << message;
  message = error_of([] { GPT2Config().apply_overrides("n_layer"); });
  EXPECT_NE(message.find("not key=value"), std::string::npos) << message;
  message = error_of([] { GPT2Config().apply_overrides("attn_pdrop=1.5"); });
  EXPECT_NE(message.find("attn_pdrop must be in [0, 1)"), std::string::npos) << message;
  message = error_of([] { GPT2Config().apply_overrides("activation_function=relu"); });
  EXPECT_NE(message.find("not supported"), std::string::npos) << message;
}

// The unit count and shapes below ({128, 32}, {32, 96}) follow from these sizes.
constexpr TinySizes kSizes{
    .vocab_size = 97, .n_positions = 16, .n_embd = 32, .n_layer = 3, .n_head = 4};

TEST(GPT2Units, LayoutNamesAndShapes) {
  const GPT2Config config = tiny_config(kSizes);
  const auto units = gpt2_units(config);
  ASSERT_EQ(units.size(), 5u);
  EXPECT_EQ(units[0].name, "embeddings");
  EXPECT_EQ(units[0].tensors[0].shape, (std::vector<std::int64_t>{128, 32}));
  EXPECT_EQ(units[2].name, "h.1");
  EXPECT_EQ(units[2].tensors[2].name, "attn.c_attn.weight");
  EXPECT_EQ(units[2].tensors[2].shape, (std::vector<std::int64_t>{32, 96}));
  EXPECT_EQ(hf_tensor_name(units[2], "mlp.c_fc.weight"), "transformer.h.1.mlp.c_fc.weight");
  EXPECT_EQ(hf_tensor_name(units[4], "ln_f.bias"), "transformer.ln_f.bias");
  std::size_t total = 0;
  for (const auto& unit : units) total += unit.num_elements();
  EXPECT_EQ(
      static_cast<std::int64_t>(total),
      config.num_parameters() + (config.padded_vocab_size() - config.vocab_size) * config.n_embd);
  // The views follow the declared order.
  const FlatLayout layout(units[1].tensors, 4, 16);
  std::vector<float> flat(layout.padded_num_elements());
  const BlockTensors<float> block(flat.data(), config);
  EXPECT_EQ(block.fc_weight - flat.data(),
            static_cast<std::ptrdiff_t>(layout.slot("mlp.c_fc.weight").offset_elements));
  EXPECT_EQ(block.fcproj_bias - flat.data(),
            static_cast<std::ptrdiff_t>(layout.slot("mlp.c_proj.bias").offset_elements));
}

TEST(GPT2Units, InitialisationIsIdenticalForAnySharding) {
  const GPT2Config config = tiny_config(kSizes);
  for (const UnitSpec& unit : gpt2_units(config)) {
    const FlatLayout whole(unit.tensors, 1, 1);
    std::vector<float> full(whole.padded_num_elements());
    init_unit_range(config, unit, 7, {0, full.size()}, full.data());
    for (int world : {2, 3, 8}) {
      const FlatLayout sharded(unit.tensors, world, 16);
      for (int rank = 0; rank < world; ++rank) {
        const ElementRange range = sharded.shard(rank);
        std::vector<float> shard(range.size());
        init_unit_range(config, unit, 7, range, shard.data());
        for (std::size_t i = 0; i < shard.size(); ++i) {
          const float expected = range.begin + i < full.size() ? full[range.begin + i] : 0.0f;
          ASSERT_EQ(shard[i], expected) << unit.name << " world " << world << " rank " << rank;
        }
      }
    }
  }
}

TEST(GPT2Units, InitialisationStatisticsFollowGPT2) {
  const GPT2Config config = tiny_config(kSizes);
  const auto units = gpt2_units(config);
  const UnitSpec& block = units[1];
  const FlatLayout layout(block.tensors, 1, 1);
  std::vector<float> flat(layout.num_elements());
  init_unit_range(config, block, 3, {0, flat.size()}, flat.data());
  auto stddev = [&](const char* name) {
    const TensorSlot& slot = layout.slot(name);
    double sum = 0, squares = 0;
    for (std::size_t i = 0; i < slot.num_elements; ++i) {
      sum += flat[slot.offset_elements + i];
      squares += double(flat[slot.offset_elements + i]) * flat[slot.offset_elements + i];
    }
    const double n = double(slot.num_elements);
    return std::sqrt(squares / n - (sum / n) * (sum / n));
  };
  EXPECT_NEAR(stddev("mlp.c_fc.weight"), 0.02, 0.002);
  EXPECT_NEAR(stddev("mlp.c_proj.weight"), 0.02 / std::sqrt(2.0 * 3), 0.001);
  EXPECT_EQ(flat[layout.slot("ln_1.weight").offset_elements], 1.0f);
  EXPECT_EQ(flat[layout.slot("attn.c_attn.bias").offset_elements], 0.0f);
  // Padded vocabulary rows are zero; another seed changes the values.
  const FlatLayout embeddings(units[0].tensors, 1, 1);
  std::vector<float> emb(embeddings.num_elements()), other(embeddings.num_elements());
  init_unit_range(config, units[0], 3, {0, emb.size()}, emb.data());
  init_unit_range(config, units[0], 4, {0, other.size()}, other.data());
  for (std::int64_t i = config.vocab_size * config.n_embd;
       i < config.padded_vocab_size() * config.n_embd; ++i)
    ASSERT_EQ(emb[i], 0.0f);
  EXPECT_NE(emb[0], other[0]);
}

}  // namespace
}  // namespace zero::gpt2
