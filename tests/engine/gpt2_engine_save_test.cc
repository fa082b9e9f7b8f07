// The Hugging Face model saved from the engine one unit at a time (zero/gpt2/engine_save.h): the
// same files, byte for byte, as the whole model holding the optimizer's fp32 values (the
// parameters of an fp32 run, the masters of a 16-bit one, read from every rank's shard states)
// saved with save_hf_checkpoint / save_classifier_checkpoint, at stages 0-3, worlds 1 and 2, fp32,
// bf16 and fp16 parameters, with the masters resident or in NVMe swap regions; a failed write on
// rank 0 leaves no rank in a collective. An untied Llama's classifier on the engine.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "../common/test_data.h"
#include "gpt2_engine_driver.h"
#include "memory_swap_store.h"
#include "zero/core/error.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/model.h"

namespace zero::testing {
namespace {

namespace fs = std::filesystem;

// Each unit's fp32 values as the optimizer holds them (the masters of a 16-bit run, the
// parameters of an fp32 one), assembled from every rank's Engine::visit_shard_states: a path
// independent of the save's gather (Engine::gather_master). The ranks are threads of one
// process, so each writes its ranges into `units` under `mutex`.
struct OptimizerValues {
  std::mutex mutex;
  std::map<std::string, std::vector<float>> units;

  void add(Engine& engine) {
    engine.visit_shard_states([&](const ShardState& shard) {
      std::lock_guard lock(mutex);
      std::vector<float>& unit = units[shard.unit];
      unit.resize(engine.layout(engine.unit(shard.unit)).num_elements());
      std::copy(shard.params.begin(), shard.params.end(),
                unit.begin() + static_cast<std::ptrdiff_t>(shard.range.begin));
    });
  }
  // The whole model holding them (units in `names` order, the body's).
  std::unique_ptr<gpt2::GPT2Model> model(const gpt2::GPT2Config& config,
                                         const std::vector<std::string>& names,
                                         Allocator& allocator) {
    auto whole = std::make_unique<gpt2::GPT2Model>(config, allocator);
    for (std::size_t u = 0; u < names.size(); ++u) {
      const std::vector<float>& values = units.at(names[u]);
      std::copy(values.begin(), values.end(), whole->param_data(static_cast<int>(u)));
    }
    return whole;
  }
};

template <typename Model>
std::vector<std::string> body_names(Model& model) {
  std::vector<std::string> names;
  for (std::size_t u = 0; u < model.unit_specs().size(); ++u)
    names.push_back(model.engine().unit_name(model.units()[u]));
  return names;
}

// How many of the file's float32 values are not representable in bf16: a 16-bit run's save of
// the widened working copy has none; of its fp32 masters, nearly all.
std::size_t values_beyond_bf16(const fs::path& file) {
  const std::string bytes = read_bytes(file);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), sizeof(header));
  std::size_t beyond = 0;
  for (std::size_t at = 8 + header; at + 4 <= bytes.size(); at += 4) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, bytes.data() + at, 4);
    beyond += (bits & 0xFFFFu) != 0 ? 1 : 0;
  }
  return beyond;
}

EngineOptions options_for(int stage, DType dtype, bool nvme, const fs::path& swap) {
  EngineOptions options = gpt2_parity_options(stage, 1);
  if (dtype == DType::kBFloat16) options.bf16.enabled = true;
  if (nvme) {
    options.offload_optimizer.device = config::OffloadDevice::kNvme;
    options.offload_optimizer.nvme_path = swap;
    options.sub_group_size = 20'000;  // several sub-groups, of several units
  }
  return options;
}

// Two training steps, so the parameters are not the initialisation.
void train_two_steps(Engine& engine, gpt2::EngineModel& model, int rank) {
  for (int step = 0; step < 2; ++step) {
    const TokenBatch batch = make_token_batch(model.config(), 16, step, rank * 2, 2);
    model.train_micro_step(batch.tokens, batch.targets,
                           {7, static_cast<std::uint64_t>(step), rank * 2, true});
    engine.step();
  }
}

// (stage, world, parameter dtype, offload_optimizer nvme)
class EngineSave : public ::testing::TestWithParam<std::tuple<int, int, DType, bool>> {
 protected:
  fs::path folder_ = scratch_dir("gpt2_engine_save");
  void SetUp() override { fs::create_directories(folder_ / "swap"); }
  void TearDown() override { fs::remove_all(folder_); }
};

TEST_P(EngineSave, LanguageModelSameBytesAsTheOptimizerValues) {
  const auto [stage, world, dtype, nvme] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  OptimizerValues values;
  std::vector<std::string> names;
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine =
        make_engine(options_for(stage, dtype, nvme, folder_ / "swap"), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
    train_two_steps(*engine, model, comm.rank());
    gpt2::save_hf_checkpoint(model, folder_ / "streamed");
    gpt2::save_hf_checkpoint(model, folder_ / "sharded", {.max_shard_bytes = 20'000});
    values.add(*engine);
    if (comm.rank() == 0) names = body_names(model);
  });
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  const std::unique_ptr<gpt2::GPT2Model> whole = values.model(config, names, allocator);
  gpt2::save_hf_checkpoint(*whole, folder_ / "whole");
  gpt2::save_hf_checkpoint(*whole, folder_ / "whole_sharded", {.max_shard_bytes = 20'000});
  if (dtype != DType::kFloat32) {  // the fp32 masters, not the 16-bit copy widened
    EXPECT_GT(values_beyond_bf16(folder_ / "streamed" / "model.safetensors"), 1000u);
  }
  for (const char* file : {"model.safetensors", "config.json"})
    EXPECT_EQ(read_bytes(folder_ / "streamed" / file), read_bytes(folder_ / "whole" / file))
        << file;
  int shards = 0;
  for (const auto& entry : fs::directory_iterator(folder_ / "whole_sharded")) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(read_bytes(folder_ / "sharded" / name), read_bytes(entry.path())) << name;
    shards += name.starts_with("model-") ? 1 : 0;
  }
  EXPECT_GE(shards, 2);
  EXPECT_FALSE(fs::exists(folder_ / "sharded" / "model.safetensors"));
}

TEST_P(EngineSave, ClassifierSameBytesAsTheOptimizerValues) {
  const auto [stage, world, dtype, nvme] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  gpt2::ClassifierConfig head;
  head.num_labels = 3;
  head.id2label = {"a", "b", "c"};
  head.pad_token_id = 0;
  OptimizerValues values;
  std::vector<std::string> names;
  std::string score_name;
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine =
        make_engine(options_for(stage, dtype, nvme, folder_ / "swap"), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineClassifier model(*engine, config, head, 2, 16, 7, allocator);
    gpt2::save_classifier_checkpoint(model, folder_ / "streamed");
    values.add(*engine);
    if (comm.rank() == 0) {
      names = body_names(model);
      score_name = engine->unit_name(model.score_unit());
    }
  });
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  const std::unique_ptr<gpt2::GPT2Model> whole = values.model(config, names, allocator);
  gpt2::save_classifier_checkpoint(*whole, head, values.units.at(score_name), folder_ / "whole");
  for (const char* file : {"model.safetensors", "config.json"})
    EXPECT_EQ(read_bytes(folder_ / "streamed" / file), read_bytes(folder_ / "whole" / file))
        << file;
}

// An untied Llama's classifier on the engine (stage 3, world 2; fp32 and bf16 parameters): its
// units are the body without lm_head.weight plus score, and a micro-step's loss is the whole
// model's (the optimizer's fp32 values in a GPT2Model and a ClassifierHead; bf16 within 1e-2), with
// label ids and with multi-hot float targets (multi_label_classification, chosen from them).
TEST(EngineClassifierLlama, LossIsTheWholeModelsWithoutAnLmHead) {
  gpt2::GPT2Config config = gpt2::family_defaults(gpt2::ModelFamily::kLlama);
  config.apply_overrides(
      "vocab_size=50,hidden_size=32,num_hidden_layers=2,num_attention_heads=4,"
      "num_key_value_heads=2,intermediate_size=48,max_position_embeddings=16,"
      "tie_word_embeddings=false");
  gpt2::ClassifierConfig head;
  head.num_labels = 3;
  head.pad_token_id = 0;
  const std::vector<int> tokens = {5, 9, 17, 3, 44, 8, 2, 0, 7, 7, 31, 12, 0, 0, 0, 0};
  const std::vector<int> labels = {2, 0};
  const std::vector<float> targets = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};  // (B 2, K 3)
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    SCOPED_TRACE(name_of(dtype));
    OptimizerValues values;
    std::vector<std::string> names;
    std::string score_name;
    double engine_loss = 0.0, engine_multi_label_loss = 0.0;
    run_ranks(2, [&](Communicator& comm) {
      omp_set_num_threads(1);
      std::unique_ptr<Engine> engine = make_engine(options_for(3, dtype, false, {}), comm);
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      gpt2::EngineClassifier model(*engine, config, head, 2, 8, 7, allocator);
      values.add(*engine);
      const double loss = model.train_micro_step(tokens, labels, {7, 0, 0, true});
      const double multi_label_loss = model.train_micro_step(tokens, targets, {7, 0, 0, true});
      if (comm.rank() == 0) {
        names = body_names(model);
        score_name = engine->unit_name(model.score_unit());
        engine_loss = loss;
        engine_multi_label_loss = multi_label_loss;
      }
    });
    ASSERT_EQ(names.back(), "norm");
    ASSERT_EQ(values.units.at("norm").size(), static_cast<std::size_t>(config.n_embd))
        << "the engine's final unit holds more than norm.weight (an LM head)";
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    const gpt2::GPT2Config body = gpt2::classifier_body(config);
    const std::unique_ptr<gpt2::GPT2Model> whole = values.model(body, names, allocator);
    ASSERT_EQ(whole->units().back().tensors.size(), 1u) << "the final unit is norm.weight alone";
    std::unique_ptr<DeviceContext> context = make_cpu_context();
    gpt2::GPT2Compute compute(body, 2, 8, *context, allocator);
    gpt2::ClassifierHead classifier(body, head, 2, 8, allocator);
    whole->forward(compute, tokens);
    classifier.forward(compute, tokens, labels, whole->param_data(gpt2::final_norm_unit(body)),
                       values.units.at(score_name).data());
    EXPECT_NEAR(engine_loss, classifier.loss(),
                (dtype == DType::kFloat32 ? 1e-6 : 1e-2) * classifier.loss());
    classifier.forward(compute, tokens, targets, whole->param_data(gpt2::final_norm_unit(body)),
                       values.units.at(score_name).data());
    EXPECT_EQ(classifier.problem_type(), gpt2::ProblemType::kMultiLabel);
    EXPECT_NEAR(engine_multi_label_loss, classifier.loss(),
                (dtype == DType::kFloat32 ? 1e-6 : 1e-2) * classifier.loss());
  }
}

INSTANTIATE_TEST_SUITE_P(StageWorldDtype, EngineSave,
                         ::testing::Values(std::tuple{0, 1, DType::kFloat32, false},
                                           std::tuple{3, 2, DType::kFloat32, false},
                                           std::tuple{0, 2, DType::kBFloat16, false},
                                           std::tuple{1, 2, DType::kBFloat16, false},
                                           std::tuple{2, 2, DType::kBFloat16, false},
                                           std::tuple{3, 2, DType::kBFloat16, false},
                                           std::tuple{3, 2, DType::kBFloat16, true},
                                           std::tuple{2, 2, DType::kFloat16, true}));

// Rank 0 cannot write (its folder is a file): it throws naming the path after gathering every
// unit, so rank 1's gathers complete and the engines can still step together.
TEST(EngineSaveFailure, RankZeroFailsAfterTheCollectives) {
  const fs::path folder = scratch_dir("gpt2_engine_save_failure");
  fs::create_directories(folder);
  std::ofstream(folder / "blocker") << "a file where the output folder should be";
  const gpt2::GPT2Config config = tiny_gpt2_config();
  std::mutex mutex;
  std::string error;
  run_ranks(2, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine = make_engine(options_for(3, DType::kFloat32, false, {}), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
    try {
      gpt2::save_hf_checkpoint(model, folder / "blocker" / "out");
    } catch (const std::exception& failure) {
      std::lock_guard lock(mutex);
      error = failure.what();
    }
    train_two_steps(*engine, model, comm.rank());  // collectives still line up
  });
  EXPECT_NE(error.find("blocker"), std::string::npos) << error;
  fs::remove_all(folder);
}

// With the masters in NVMe sub-groups of several units, a save reads each unit's part of its
// sub-group's master region (whole io_alignment() blocks around it), not the whole region once per
// unit: every rank reads at least its master shard, and at most that plus two blocks per unit. The
// old gather read a sub-group of k units k times (here 2 or 4): 240,640 bytes per rank, against
// bounds of 153,088 (world 1) and 92,928 (world 2).
TEST(EngineGatherMaster, ASaveReadsEachSwappedMasterOnce) {
  const gpt2::GPT2Config config = tiny_gpt2_config();
  const fs::path folder = scratch_dir("gpt2_engine_save_reads");
  for (const int world : {1, 2}) {
    std::vector<SwapStoreCounters> counters(static_cast<std::size_t>(world));
    std::vector<std::int64_t> save_reads(counters.size()), owned_bytes(counters.size());
    std::vector<std::size_t> units(counters.size());
    run_ranks(world, [&](Communicator& comm) {
      omp_set_num_threads(1);
      const auto rank = static_cast<std::size_t>(comm.rank());
      std::unique_ptr<Engine> engine =
          make_engine(options_for(world == 1 ? 2 : 3, DType::kBFloat16, true, "/reads"), comm);
      engine->set_swap_store_factory(memory_swap_store_factory(&counters[rank]));
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
      train_two_steps(*engine, model, comm.rank());
      engine->wait_for_step();  // stage 3: the last step's reads run behind step()
      const std::int64_t before = counters[rank].bytes_read;
      gpt2::save_hf_checkpoint(model, folder / std::to_string(world));
      save_reads[rank] = counters[rank].bytes_read - before;
      engine->visit_shard_states([&](const ShardState& shard) {
        owned_bytes[rank] += static_cast<std::int64_t>(shard.params.size() * sizeof(float));
        ++units[rank];
      });
    });
    for (std::size_t rank = 0; rank < counters.size(); ++rank) {
      const auto blocks = static_cast<std::int64_t>(units[rank] * 2 * 4096);  // io_alignment()
      EXPECT_GE(save_reads[rank], owned_bytes[rank]) << "world " << world << ", rank " << rank;
      EXPECT_LE(save_reads[rank], owned_bytes[rank] + blocks)
          << "world " << world << ", rank " << rank << ": " << units[rank] << " units";
    }
  }
  fs::remove_all(folder);
}

// gather_master refuses what it cannot give, naming it: an unknown unit, an fp32 engine (no master
// apart from its parameters).
TEST(EngineGatherMaster, RefusesAnUnknownUnitAndAnEngineWithoutMasters) {
  const gpt2::GPT2Config config = tiny_gpt2_config();
  run_ranks(1, [&](Communicator& comm) {
    for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      std::unique_ptr<Engine> engine = make_engine(options_for(1, dtype, false, {}), comm);
      MemoryLedger ledger;
      HostAllocator allocator(ledger);
      gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
      try {
        engine->gather_master(static_cast<UnitId>(engine->num_units()));
        ADD_FAILURE() << "an unknown unit was gathered";
      } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("no unit"), std::string::npos) << error.what();
      }
      if (dtype == DType::kFloat32) {
        try {
          engine->gather_master(0);
          ADD_FAILURE() << "an fp32 engine gave a master";
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("keeps no fp32 master"), std::string::npos)
              << error.what();
        }
      } else {
        EXPECT_EQ(engine->gather_master(0).size_bytes(),
                  engine->layout(0).padded_num_elements() * sizeof(float));
      }
    }
  });
}

}  // namespace
}  // namespace zero::testing
