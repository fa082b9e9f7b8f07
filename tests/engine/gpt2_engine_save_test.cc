// The Hugging Face model saved from the engine one unit at a time (zero/gpt2/engine_save.h): the
// same files, byte for byte, as the whole model gathered first (as the trainer saved before) and
// saved with save_hf_checkpoint / save_classifier_checkpoint, at stage 0 and 3, worlds 1 and 2,
// fp32 and bf16 parameters; a failed write on rank 0 leaves no rank in a collective.
#include <gtest/gtest.h>
#include <omp.h>

#include <fstream>
#include <iterator>
#include <mutex>

#include "../common/test_data.h"
#include "gpt2_engine_driver.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/model.h"

namespace zero::testing {
namespace {

namespace fs = std::filesystem;

// The whole model on rank 0 as the trainer builds it before saving (train/src/prepare.h).
template <typename Model>
std::unique_ptr<gpt2::GPT2Model> gather_whole(Model& model, Allocator& allocator) {
  Engine& engine = model.engine();
  std::unique_ptr<gpt2::GPT2Model> whole;
  if (engine.rank() == 0) whole = std::make_unique<gpt2::GPT2Model>(model.config(), allocator);
  for (std::size_t u = 0; u < model.unit_specs().size(); ++u) {
    const GatheredUnit gathered = engine.gather(model.units()[u]);
    if (whole)
      convert(gathered.raw(), gathered.dtype(), whole->param_data(static_cast<int>(u)),
              DType::kFloat32, model.unit_specs()[u].num_elements());
  }
  return whole;
}

EngineOptions options_for(int stage, DType dtype) {
  EngineOptions options = gpt2_parity_options(stage, 1);
  if (dtype == DType::kBFloat16) options.bf16.enabled = true;
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

class EngineSave : public ::testing::TestWithParam<std::tuple<int, int, DType>> {
 protected:
  fs::path folder_ = scratch_dir("gpt2_engine_save");
  void TearDown() override { fs::remove_all(folder_); }
};

TEST_P(EngineSave, LanguageModelSameBytesAsTheGatheredWholeModel) {
  const auto [stage, world, dtype] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine = make_engine(options_for(stage, dtype), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineModel model(*engine, config, 2, 16, 7, allocator);
    train_two_steps(*engine, model, comm.rank());
    gpt2::save_hf_checkpoint(model, folder_ / "streamed");
    gpt2::save_hf_checkpoint(model, folder_ / "sharded", {.max_shard_bytes = 20'000});
    const std::unique_ptr<gpt2::GPT2Model> whole = gather_whole(model, allocator);
    if (whole) {
      gpt2::save_hf_checkpoint(*whole, folder_ / "whole");
      gpt2::save_hf_checkpoint(*whole, folder_ / "whole_sharded", {.max_shard_bytes = 20'000});
    }
  });
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

TEST_P(EngineSave, ClassifierSameBytesAsTheGatheredWholeModel) {
  const auto [stage, world, dtype] = GetParam();
  const gpt2::GPT2Config config = tiny_gpt2_config();
  gpt2::ClassifierConfig head;
  head.num_labels = 3;
  head.id2label = {"a", "b", "c"};
  head.pad_token_id = 0;
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    std::unique_ptr<Engine> engine = make_engine(options_for(stage, dtype), comm);
    MemoryLedger ledger;
    HostAllocator allocator(ledger);
    gpt2::EngineClassifier model(*engine, config, head, 2, 16, 7, allocator);
    gpt2::save_classifier_checkpoint(model, folder_ / "streamed");
    const std::unique_ptr<gpt2::GPT2Model> whole = gather_whole(model, allocator);
    const GatheredUnit gathered = engine->gather(model.score_unit());
    if (whole) {
      std::vector<float> score(static_cast<std::size_t>(head.num_labels * config.n_embd));
      convert(gathered.raw(), gathered.dtype(), score.data(), DType::kFloat32, score.size());
      gpt2::save_classifier_checkpoint(*whole, head, score, folder_ / "whole");
    }
  });
  for (const char* file : {"model.safetensors", "config.json"})
    EXPECT_EQ(read_bytes(folder_ / "streamed" / file), read_bytes(folder_ / "whole" / file))
        << file;
}

INSTANTIATE_TEST_SUITE_P(StageWorldDtype, EngineSave,
                         ::testing::Values(std::tuple{0, 1, DType::kFloat32},
                                           std::tuple{3, 2, DType::kFloat32},
                                           std::tuple{3, 2, DType::kBFloat16},
                                           std::tuple{1, 2, DType::kBFloat16}));

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
    std::unique_ptr<Engine> engine = make_engine(options_for(3, DType::kFloat32), comm);
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

}  // namespace
}  // namespace zero::testing
