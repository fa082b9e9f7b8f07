// A Hugging Face checkpoint streamed into the engine's partitions (gpt2::load_hf_partitions), as
// `zero train --model_name_or_path` loads: at every stage, worlds 1-3, fp32 and bf16, from one
// file and from shards, each rank's shards and every gathered unit equal the whole-model load bit
// for bit (the classifier's score.weight too; the Llama family's units, saved back through the
// engine to the same bytes); loading a 46 MB checkpoint at stage 3 on 2 ranks
// raises the resident peak by at most one mapped chunk per rank, not the model (VmHWM).
// From-scratch initialisation generates on each rank only what it holds and equals the broadcast
// one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "../common/guarded_device_context.h"
#include "../common/test_data.h"
#include "gpt2_engine_driver.h"
#include "memory_swap_store.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/gpt2/model.h"

namespace zero::testing {
namespace {

namespace fs = std::filesystem;

EngineOptions options_for(int stage, DType dtype) {
  EngineOptions options = gpt2_parity_options(stage, 1);
  if (dtype == DType::kBFloat16) options.bf16.enabled = true;
  return options;
}

// Elements of this rank's shards and gathered units that differ from `whole` (rounded to the
// engine's parameter dtype for the gathered copies).
template <typename Model>
std::size_t count_differences(Model& model, const std::vector<std::vector<float>>& whole) {
  Engine& engine = model.engine();
  std::size_t differences = 0;
  for (const ShardState& shard : engine.shard_states()) {
    const auto u = static_cast<std::size_t>(
        std::find(model.units().begin(), model.units().end(), engine.unit(shard.unit)) -
        model.units().begin());
    differences += std::memcmp(shard.params.data(), whole[u].data() + shard.range.begin,
                               shard.range.size() * sizeof(float)) != 0;
  }
  for (std::size_t u = 0; u < whole.size(); ++u) {
    const GatheredUnit gathered = engine.gather(model.units()[u]);
    std::vector<float> actual(whole[u].size()), expected(whole[u].size());
    std::vector<std::byte> rounded(whole[u].size() * size_of(gathered.dtype()));
    convert(gathered.raw(), gathered.dtype(), actual.data(), DType::kFloat32, actual.size());
    convert(whole[u].data(), DType::kFloat32, rounded.data(), gathered.dtype(), whole[u].size());
    convert(rounded.data(), gathered.dtype(), expected.data(), DType::kFloat32, expected.size());
    differences += std::memcmp(actual.data(), expected.data(), actual.size() * 4) != 0;
  }
  return differences;
}

std::vector<std::vector<float>> units_of(const gpt2::GPT2Model& model) {
  std::vector<std::vector<float>> units;
  for (int u = 0; u < model.num_units(); ++u) {
    const float* data = model.param_data(u);
    units.emplace_back(data, data + model.units()[u].num_elements());
  }
  return units;
}

class EngineLoad : public ::testing::TestWithParam<std::tuple<int, int, DType>> {
 protected:
  fs::path folder_ = scratch_dir("gpt2_engine_load");
  MemoryLedger ledger_;
  HostAllocator allocator_{ledger_};
  void TearDown() override { fs::remove_all(folder_); }
};

TEST_P(EngineLoad, ShardsAndGatheredUnitsEqualTheWholeLoad) {
  const auto [stage, world, dtype] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  gpt2::GPT2Model source(config, allocator_);
  source.init(5);
  gpt2::save_hf_checkpoint(source, folder_ / "single");
  gpt2::save_hf_checkpoint(source, folder_ / "sharded", {.max_shard_bytes = 20'000});
  const std::vector<std::vector<float>> whole =
      units_of(gpt2::load_hf_model(folder_ / "single", allocator_));
  for (const char* form : {"single", "sharded"}) {
    std::atomic<std::size_t> differences{0};
    run_ranks(world, [&](Communicator& comm) {
      omp_set_num_threads(1);
      std::unique_ptr<Engine> engine = make_engine(options_for(stage, dtype), comm);
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);  // another seed
      const gpt2::HFWeights weights(folder_ / form, config);
      gpt2::load_hf_partitions(*engine, model.units(), weights);
      differences += count_differences(model, whole);
    });
    EXPECT_EQ(differences.load(), 0u) << form;
  }
}

TEST_P(EngineLoad, ClassifierLoadsTheBodyAndScore) {
  const auto [stage, world, dtype] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  gpt2::ClassifierConfig head;
  head.num_labels = 3;
  head.pad_token_id = 0;
  gpt2::GPT2Model body(config, allocator_);
  body.init(6);
  std::vector<float> score(static_cast<std::size_t>(head.num_labels * config.n_embd));
  for (std::size_t i = 0; i < score.size(); ++i) score[i] = 0.01f * static_cast<float>(i % 97);
  gpt2::save_classifier_checkpoint(body, head, score, folder_ / "classifier");
  std::vector<std::vector<float>> whole = units_of(body);
  whole.push_back(score);
  std::atomic<std::size_t> differences{0};
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine = make_engine(options_for(stage, dtype), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineClassifier model(*engine, config, head, 2, 16, 7, allocator);
    const gpt2::HFWeights weights(folder_ / "classifier", config,
                                  {{gpt2::kScoreTensorName, {head.num_labels, config.n_embd}}});
    const std::vector<UnitId> units = model.units();
    const UnitId score_unit = model.score_unit();
    gpt2::load_hf_partitions(*engine, std::span(units).first(units.size() - 1), weights,
                             std::span(&score_unit, 1));
    differences += count_differences(model, whole);
  });
  EXPECT_EQ(differences.load(), 0u);
}

// Units registered without a model: the Llama family's, before its passes exist.
struct RegisteredUnits {
  Engine& engine_;
  std::vector<UnitId> units_;
  Engine& engine() { return engine_; }
  const std::vector<UnitId>& units() const { return units_; }
};

// The Llama family's units (a tied Qwen2 with q/k/v biases, an untied grouped-query Llama with
// attention biases) streamed from their Hugging Face files into the engine's partitions equal the
// whole load, and the engine's unit-by-unit save writes the files they came from, byte for byte.
TEST_P(EngineLoad, LlamaFamilyUnitsLoadAndSaveThroughTheEngine) {
  const auto [stage, world, dtype] = GetParam();
  const char* configs[] = {
      R"({"model_type": "qwen2", "vocab_size": 300, "hidden_size": 56, "intermediate_size": 72,
          "num_hidden_layers": 2, "num_attention_heads": 7, "num_key_value_heads": 1,
          "max_position_embeddings": 64, "tie_word_embeddings": true})",
      R"({"model_type": "llama", "vocab_size": 260, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
          "attention_bias": true, "max_position_embeddings": 64, "tie_word_embeddings": false})"};
  for (const char* text : configs) {
    fs::remove_all(folder_);
    fs::create_directories(folder_ / "single");
    std::ofstream(folder_ / "single" / "config.json") << text;
    const gpt2::GPT2Config config = gpt2::load_hf_config(folder_ / "single");
    SCOPED_TRACE(gpt2::name_of(config.family));
    gpt2::GPT2Model source(config, allocator_);
    source.init(5);
    gpt2::save_hf_checkpoint(source, folder_ / "single");
    gpt2::save_hf_checkpoint(source, folder_ / "sharded", {.max_shard_bytes = 20'000});
    const std::vector<std::vector<float>> whole = units_of(source);
    for (const char* form : {"single", "sharded"}) {
      std::atomic<std::size_t> differences{0};
      const fs::path saved = folder_ / (std::string("saved_") + form);
      run_ranks(world, [&](Communicator& comm) {
        omp_set_num_threads(1);
        std::unique_ptr<Engine> engine = make_engine(options_for(stage, dtype), comm);
        RegisteredUnits model{*engine, {}};
        for (const gpt2::UnitSpec& spec : gpt2::gpt2_units(config))
          model.units_.push_back(engine->register_unit(
              spec.name, spec.tensors,
              RangeInitFunction([config, spec](ElementRange range, std::span<float> values) {
                gpt2::init_unit_range(config, spec, 7, range, values.data());  // another seed
              })));
        engine->initialize();
        gpt2::load_hf_partitions(*engine, model.units(), gpt2::HFWeights(folder_ / form, config));
        differences += count_differences(model, whole);
        gpt2::save_hf_checkpoint(*engine, model.units(), config, saved);
      });
      EXPECT_EQ(differences.load(), 0u) << form;
      EXPECT_EQ(read_bytes(saved / "model.safetensors"),
                read_bytes(folder_ / "single" / "model.safetensors"))
          << form;
      EXPECT_EQ(read_bytes(saved / "config.json"), read_bytes(folder_ / "single" / "config.json"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    StageWorldDtype, EngineLoad,
    ::testing::Values(std::tuple{0, 1, DType::kFloat32}, std::tuple{0, 2, DType::kFloat32},
                      std::tuple{1, 2, DType::kBFloat16}, std::tuple{2, 3, DType::kFloat32},
                      std::tuple{3, 2, DType::kFloat32}, std::tuple{3, 3, DType::kBFloat16}));

// An engine at `stage`, its optimizer (and at stage 3 its parameters) offloaded to host memory
// (`offload` cpu), to an in-memory swap store (nvme), or not at all (none).
std::unique_ptr<Engine> offload_engine(Communicator& comm, int stage, const std::string& offload) {
  EngineOptions options = options_for(stage, DType::kFloat32);
  if (offload == "cpu") {
    options.offload_optimizer.device = config::OffloadDevice::kCpu;
    if (stage == 3) options.offload_param.device = config::OffloadDevice::kCpu;
  } else if (offload == "nvme") {
    options.offload_optimizer.device = config::OffloadDevice::kNvme;
    options.offload_optimizer.nvme_path = "/gpt2-engine-load/optimizer";
  }
  std::unique_ptr<Engine> engine = make_engine(options, comm);
  if (offload == "nvme") engine->set_swap_store_factory(memory_swap_store_factory());
  return engine;
}

struct InitCase {
  int stage;
  int world;
  std::string offload;  // none, cpu, nvme
};
constexpr const char* kNone = "none";

// GPT-2's units registered as before range initialisers: rank 0 generates every tensor whole,
// the engine broadcasts it.
std::vector<std::vector<float>> broadcast_init_shards(Communicator& comm, const InitCase& c,
                                                      const gpt2::GPT2Config& config) {
  std::unique_ptr<Engine> engine = offload_engine(comm, c.stage, c.offload);
  for (const gpt2::UnitSpec& spec : gpt2::gpt2_units(config))
    engine->register_unit(spec.name, spec.tensors,
                          InitFunction([config, spec](const TensorSlot& slot, std::span<float> v) {
                            gpt2::init_unit_range(config, spec, 7, slot.range(), v.data());
                          }));
  engine->initialize();
  std::vector<std::vector<float>> shards;
  for (const ShardState& shard : engine->shard_states())
    shards.emplace_back(shard.params.begin(), shard.params.end());
  return shards;
}

TEST(EngineInit, EachRankGeneratesWhatItHoldsBitIdenticalToTheBroadcastInit) {
  const gpt2::GPT2Config config = tiny_gpt2_config();
  std::size_t unit_elements = 0;
  for (const gpt2::UnitSpec& spec : gpt2::gpt2_units(config)) unit_elements += spec.num_elements();
  MemoryLedger reference_ledger;
  HostAllocator reference_allocator(reference_ledger);
  gpt2::GPT2Model reference(config, reference_allocator);
  reference.init(7);
  const std::vector<std::vector<float>> initial = units_of(reference);
  for (const InitCase& c :
       {InitCase{0, 2, kNone}, InitCase{1, 2, kNone}, InitCase{3, 2, kNone}, InitCase{3, 3, kNone},
        InitCase{2, 2, "cpu"}, InitCase{3, 2, "cpu"}, InitCase{3, 2, "nvme"}}) {
    const std::string what =
        "stage " + std::to_string(c.stage) + " world " + std::to_string(c.world) + " " + c.offload;
    std::atomic<std::size_t> differences{0};
    std::vector<std::size_t> generated(static_cast<std::size_t>(c.world), 0);
    std::vector<std::size_t> owned(static_cast<std::size_t>(c.world), 0);
    run_ranks(c.world, [&](Communicator& comm) {
      omp_set_num_threads(1);
      const auto rank = static_cast<std::size_t>(comm.rank());
      const std::vector<std::vector<float>> expected = broadcast_init_shards(comm, c, config);
      std::unique_ptr<Engine> engine = offload_engine(comm, c.stage, c.offload);
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
      differences += count_differences(model, initial);  // the compute copies too
      const std::vector<ShardState> shards = engine->shard_states();
      for (std::size_t u = 0; u < shards.size(); ++u) {
        differences += std::memcmp(shards[u].params.data(), expected[u].data(),
                                   expected[u].size() * sizeof(float)) != 0;
        owned[rank] += shards[u].range.size();
      }
      // A counting engine: the elements each rank's initialiser is asked for.
      std::unique_ptr<Engine> counting = offload_engine(comm, c.stage, c.offload);
      for (const gpt2::UnitSpec& spec : gpt2::gpt2_units(config))
        counting->register_unit(spec.name, spec.tensors,
                                RangeInitFunction([&](ElementRange range, std::span<float> v) {
                                  generated[rank] += range.size();
                                  std::fill(v.begin(), v.end(), 0.5f);
                                }));
      counting->initialize();
    });
    EXPECT_EQ(differences.load(), 0u) << what;
    for (int r = 0; r < c.world; ++r)  // stage 3: the partition; stages 0-2: the whole model
      EXPECT_EQ(generated[r], c.stage == 3 ? owned[r] : unit_elements) << what << " rank " << r;
  }
}

// The load into offloaded states: shard_states() of host memory (cpu) or of the swap regions
// (nvme, written back by refresh_params).
TEST(EngineLoadOffload, ShardsAndGatheredUnitsEqualTheWholeLoad) {
  const fs::path folder = scratch_dir("gpt2_engine_load_offload");
  const gpt2::GPT2Config config = tiny_gpt2_config();
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  gpt2::GPT2Model source(config, allocator);
  source.init(5);
  gpt2::save_hf_checkpoint(source, folder, {.max_shard_bytes = 20'000});
  const std::vector<std::vector<float>> whole = units_of(source);
  for (const InitCase& c : {InitCase{2, 2, "cpu"}, InitCase{3, 2, "cpu"}, InitCase{3, 2, "nvme"}}) {
    std::atomic<std::size_t> differences{0};
    run_ranks(c.world, [&](Communicator& comm) {
      omp_set_num_threads(1);
      std::unique_ptr<Engine> engine = offload_engine(comm, c.stage, c.offload);
      MemoryLedger rank_ledger;
      HostAllocator rank_allocator(rank_ledger);
      gpt2::EngineModel model(*engine, config, 2, 16, 7, rank_allocator);
      gpt2::load_hf_partitions(*engine, model.units(), gpt2::HFWeights(folder, config));
      differences += count_differences(model, whole);
    });
    EXPECT_EQ(differences.load(), 0u) << "stage " << c.stage << " " << c.offload;
  }
  fs::remove_all(folder);
}

// The load into device memory the host cannot address (tests/common/guarded_device_context.h:
// mprotect'ed while the load runs): the body's pieces are read straight into pinned pieces, the
// classifier's score (an extra unit: its pieces start with the current values) too, and both
// equal the whole load; stages 0 and 3, world 1, pieces of 100 elements.
TEST(EngineLoadDevice, ClassifierLoadsIntoDeviceStatesThroughPinnedPieces) {
  const fs::path folder = scratch_dir("gpt2_engine_load_device");
  const gpt2::GPT2Config config = tiny_gpt2_config();
  gpt2::ClassifierConfig head;
  head.num_labels = 3;
  head.pad_token_id = 0;
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  gpt2::GPT2Model body(config, allocator);
  body.init(6);
  std::vector<float> score(static_cast<std::size_t>(head.num_labels * config.n_embd));
  for (std::size_t i = 0; i < score.size(); ++i) score[i] = 0.01f * static_cast<float>(i % 89);
  gpt2::save_classifier_checkpoint(body, head, score, folder);
  std::vector<std::vector<float>> whole = units_of(body);
  whole.push_back(score);
  for (const int stage : {0, 3}) {
    GuardedDeviceContext context;
    std::unique_ptr<Communicator> comm =
        make_local_communicator(CommOptions::from_environment(), &context);
    std::unique_ptr<Engine> engine =
        make_engine(options_for(stage, DType::kFloat32), *comm, {.context = &context});
    engine->set_shard_piece_elements(100);
    gpt2::EngineClassifier model(*engine, config, head, 2, 16, 7, allocator);
    engine->initialize();
    const gpt2::HFWeights weights(folder, config,
                                  {{gpt2::kScoreTensorName, {head.num_labels, config.n_embd}}});
    const std::vector<UnitId> units = model.units();
    const UnitId score_unit = model.score_unit();
    context.guard(true);
    gpt2::load_hf_partitions(*engine, std::span(units).first(units.size() - 1), weights,
                             std::span(&score_unit, 1));
    context.guard(false);
    EXPECT_EQ(count_differences(model, whole), 0u) << "stage " << stage;
  }
  fs::remove_all(folder);
}

std::size_t status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field)) return std::stoul(line.substr(std::strlen(field)));
  return 0;
}

// Both ranks are threads of this process, so its peak holds both ranks' reads.
TEST(EngineLoadMemory, StageThreePeakIsOneChunkPerRankNotTheModel) {
  const fs::path folder = scratch_dir("gpt2_engine_load_memory");
  gpt2::GPT2Config config = tiny_gpt2_config();
  config.vocab_size = 32768;
  config.n_embd = 256;
  config.n_head = 4;
  config.n_layer = 4;
  config.n_positions = 64;
  {
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::GPT2Model source(config, allocator);
    source.init(3);
    gpt2::save_hf_checkpoint(source, folder);
  }
  const std::size_t file_bytes = fs::file_size(folder / "model.safetensors");
  if (!(std::ofstream("/proc/self/clear_refs") << "5").flush()) {
    fs::remove_all(folder);
    GTEST_SKIP() << "cannot reset VmHWM through /proc/self/clear_refs";
  }
  std::atomic<int> ready{0};
  std::size_t before_kib = 0, peak_kib = 0;
  run_ranks(2, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine = make_engine(options_for(3, DType::kFloat32), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineModel model(*engine, config, 1, 8, 7, allocator);
    const gpt2::HFWeights weights(folder, config);
    engine->average_across_ranks(0.0);  // both engines built
    if (comm.rank() == 0) {
      std::ofstream("/proc/self/clear_refs") << "5";
      before_kib = status_kib("VmRSS:");
    }
    engine->average_across_ranks(0.0);
    gpt2::load_hf_partitions(*engine, model.units(), weights);
    engine->average_across_ranks(0.0);
    if (comm.rank() == 0) peak_kib = status_kib("VmHWM:");
    ++ready;
  });
  ASSERT_EQ(ready.load(), 2);
  const std::size_t growth = (peak_kib - std::min(peak_kib, before_kib)) << 10;
  std::printf(
      "  stage 3, 2 ranks, a %.1f MB checkpoint: the resident peak rose %.1f MB while "
      "loading (bound: 2 chunks of %zu MiB + 6 MiB)\n",
      file_bytes / 1e6, growth / 1e6, SafetensorsReader::kStreamChunkBytes >> 20);
  EXPECT_GT(file_bytes, 40'000'000u);
  EXPECT_LE(growth, 2 * SafetensorsReader::kStreamChunkBytes + (6u << 20));
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::testing
