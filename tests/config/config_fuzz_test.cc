// Mutation fuzzing over real configs: every outcome is a resolved config or a zero::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../common/test_data.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"

namespace zero::config {
namespace {

using Json = nlohmann::ordered_json;
using Random = std::mt19937_64;

constexpr int kIterations = 10'000;

// Seeds when the shared data folder is absent: small configs touching every section.
constexpr const char* kBuiltInSeeds[] = {
    R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": 2, "gradient_clipping": "auto",
        "fp16": {"enabled": "auto", "loss_scale": 0}, "bf16": {"enabled": false},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": [0.9, 0.999]}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}},
        "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/x"},
                              "stage3_prefetch_bucket_size": "auto", "cpu_offload": false},
        "aio": {"thread_count": 2}, "checkpoint": {"tag_validation": "Fail"}})",
    R"({"train_batch_size": 512, "train_micro_batch_size_per_gpu": 32,
        "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1}},
        "zero_optimization": true, "bfloat16": {"enabled": true}, "wandb": {"enabled": true}})",
};

std::size_t pick(Random& random, std::size_t count) {
  return static_cast<std::size_t>(random() % count);
}

Json random_value(Random& random) {
  static const Json kPool[] = {0,
                               -1,
                               1,
                               3,
                               2.5,
                               1e30,
                               5e8,
                               -9.9e307,
                               1e-320,
                               "auto",
                               "x",
                               "cpu",
                               "nvme",
                               "AdamW",
                               true,
                               false,
                               nullptr,
                               Json::array(),
                               Json::object(),
                               Json::array({1, 2}),
                               Json::parse("9223372036854775807"),
                               Json::parse("18446744073709551615"),
                               Json::parse("-9223372036854775808"),
                               Json::object({{"enabled", true}}),
                               Json::object({{"device", "cpu"}})};
  return kPool[pick(random, std::size(kPool))];
}

std::string random_key(Random& random) {
  static const char* kKeys[] = {"stage",
                                "offload_param",
                                "offload_optimizer",
                                "train_batch_size",
                                "auto",
                                "cpu_offload",
                                "bfloat16",
                                "bf16",
                                "fp16",
                                "zero_optimization",
                                "optimizer",
                                "scheduler",
                                "type",
                                "params",
                                "enabled",
                                "device",
                                "nvme_path",
                                "betas",
                                "lr",
                                "stage3_max_live_parameters",
                                "max_live_parameters",
                                "thread_count",
                                "gradient_accumulation_steps"};
  return kKeys[pick(random, std::size(kKeys))];
}

void collect(Json& node, std::vector<Json*>& nodes) {
  nodes.push_back(&node);
  if (node.is_structured())
    for (auto& child : node) collect(child, nodes);
}

// One structural edit: replace a value, delete/rename/add a key, or transplant a subtree.
void mutate_tree(Json& root, Random& random) {
  std::vector<Json*> nodes;
  collect(root, nodes);
  Json& node = *nodes[pick(random, nodes.size())];
  switch (pick(random, 5)) {
    case 0: node = random_value(random); break;
    case 1:
      if (node.is_object() && !node.empty()) {
        auto it = node.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(pick(random, node.size())));
        node.erase(it);
      }
      break;
    case 2:
      if (node.is_object() && !node.empty()) {
        auto it = node.begin();
        std::advance(it, static_cast<std::ptrdiff_t>(pick(random, node.size())));
        std::string key = it.key();
        Json value = it.value();
        node.erase(it);
        if (!key.empty()) {
          const std::size_t at = pick(random, key.size());
          if (random() % 2)
            key.erase(at, 1);
          else
            std::swap(key[at], key[pick(random, key.size())]);
        }
        node[key] = std::move(value);
      }
      break;
    case 3:
      if (node.is_object())
        node[random_key(random)] = random_value(random);
      else if (node.is_array())
        node.push_back(random_value(random));
      break;
    default: {
      const Json copy = *nodes[pick(random, nodes.size())];
      node = copy;
      break;
    }
  }
}

// One textual edit: truncate, or flip/insert/delete bytes.
void mutate_text(std::string& text, Random& random) {
  if (text.empty()) return;
  switch (pick(random, 4)) {
    case 0: text.resize(pick(random, text.size())); break;
    case 1: text[pick(random, text.size())] = static_cast<char>(random() % 256); break;
    case 2: text.insert(pick(random, text.size()), 1, "{}[],:\"e.-0auto "[pick(random, 16)]); break;
    default: text.erase(pick(random, text.size()), 1 + pick(random, 3)); break;
  }
}

TrainerValues random_trainer(Random& random) {
  TrainerValues trainer;
  if (random() % 2) return trainer;
  auto maybe = [&] { return random() % 3 == 0; };
  static const std::int64_t kIntegers[] = {0, 1, 2, 3, 8, -1, std::int64_t{1} << 40, 768};
  auto integer = [&] { return kIntegers[pick(random, std::size(kIntegers))]; };
  if (maybe()) trainer.world_size = integer();
  if (maybe()) trainer.per_device_train_batch_size = integer();
  if (maybe()) trainer.gradient_accumulation_steps = integer();
  if (maybe()) trainer.learning_rate = 3e-5;
  if (maybe()) trainer.adam_beta1 = 0.9;
  if (maybe()) trainer.adam_beta2 = 0.95;
  if (maybe()) trainer.adam_epsilon = 1e-8;
  if (maybe()) trainer.weight_decay = 0.1;
  if (maybe()) trainer.warmup_steps = integer();
  if (maybe()) trainer.total_steps = integer();
  if (maybe()) trainer.max_grad_norm = 1.0;
  if (maybe()) trainer.fp16 = random() % 2 == 0;
  if (maybe()) trainer.bf16 = random() % 2 == 0;
  if (maybe()) trainer.hidden_size = integer();
  return trainer;
}

std::vector<std::string> load_seeds() {
  std::vector<std::string> seeds(std::begin(kBuiltInSeeds), std::end(kBuiltInSeeds));
  const auto folder = zero::testing::shared_data_dir() / "ds_configs";
  if (zero::testing::shared_data_dir().empty() || !std::filesystem::is_directory(folder))
    return seeds;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream file(entry.path());
    std::ostringstream text;
    text << file.rdbuf();
    seeds.push_back(text.str());
  }
  return seeds;
}

TEST(ConfigFuzz, EveryMutationResolvesOrThrowsZeroError) {
  const std::vector<std::string> seeds = load_seeds();
  Random random(0x2e60c0f16ULL);
  int resolved = 0, rejected = 0;
  double slowest_seconds = 0.0;  // a hang shows up here first
  const auto start = std::chrono::steady_clock::now();
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    const std::string& seed = seeds[pick(random, seeds.size())];
    std::string text = seed;
    // Half the mutations keep the text valid JSON (tree edits only); the rest also edit bytes.
    const std::size_t kind = pick(random, 2) == 0 ? 0 : 1 + pick(random, 2);
    if (kind != 1) {
      Json tree = Json::parse(seed);
      const std::size_t edits = 1 + pick(random, 3);
      for (std::size_t i = 0; i < edits; ++i) mutate_tree(tree, random);
      text = tree.dump();
    }
    if (kind != 0) mutate_text(text, random);
    const TrainerValues trainer = random_trainer(random);
    const auto iteration_start = std::chrono::steady_clock::now();
    try {
      const ConfigResult result = resolve_config(text, trainer, "fuzz.json");
      EXPECT_FALSE(to_json(result.config).empty());
      ++resolved;
    } catch (const zero::Error& error) {
      EXPECT_NE(std::string(error.what()).find("fuzz.json"), std::string::npos) << error.what();
      ++rejected;
    } catch (const std::exception& error) {
      FAIL() << "iteration " << iteration << ": " << typeid(error).name() << ": " << error.what()
             << "\ninput: " << text;
    } catch (...) {
      FAIL() << "iteration " << iteration << ": unknown exception\ninput: " << text;
    }
    slowest_seconds = std::max(
        slowest_seconds,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - iteration_start).count());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << kIterations << " mutations over " << seeds.size() << " seeds: " << resolved
            << " resolved, " << rejected << " rejected, " << seconds << " s (slowest "
            << slowest_seconds * 1e3 << " ms)\n";
  EXPECT_EQ(resolved + rejected, kIterations);
  EXPECT_GT(resolved, 0);
  EXPECT_GT(rejected, 0);
  // About 2 s in a release build here, 1 min with sanitizers; one resolve must never stall.
  EXPECT_LT(slowest_seconds, 5.0);
  EXPECT_LT(seconds, 240.0);
}

}  // namespace
}  // namespace zero::config
