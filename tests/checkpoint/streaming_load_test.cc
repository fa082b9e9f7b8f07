// checkpoint::load into NVMe-offloaded states (Engine::fill_shard_states): the shard files are
// read straight into one sub-group's swap slot at a time and written to its regions, so the host
// memory of a load is one slot, never the rank's shard; the resumed run continues as the
// uninterrupted one (bitwise at the same world, across worlds as resharding does).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../engine/memory_swap_store.h"
#include "../engine/offload_modes.h"
#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

// A stack whose blocks (16512 elements; 8256 owned at W = 2) are split over sub-groups of 3840
// (4000 rounded down to kSubGroupQuantumElements): a save gathers each split unit from its pieces,
// a load fills it piece by piece.
constexpr StackShape kShape{.inputs = 12, .hidden = 128, .outputs = 5, .blocks = 6};
constexpr std::int64_t kSubGroupElements = 4000;

void train_steps_of(Engine& engine, TinyStack& model, Communicator& comm, int first, int count) {
  const int rows = 24 / comm.world_size();
  for (int step = first; step < first + count; ++step) {
    model.micro_step(engine, make_batch(kShape, step, comm.rank() * rows, rows));
    engine.step();
  }
}

EngineOptions nvme_options(int stage) {
  EngineOptions options = parity_options(stage, 1);
  options.scheduler.total_num_steps = 6;
  apply_offload(options, Mode::kNvme, kSubGroupElements, 0);
  return options;
}

std::vector<std::vector<float>> train_saving(const EngineOptions& options, int world,
                                             const fs::path& root) {
  std::vector<std::vector<float>> final_params;
  run_ranks(world, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory());
    TinyStack model(kShape);
    model.register_units(*engine);
    train_steps_of(*engine, model, comm, 0, 3);
    checkpoint::CheckpointSave save(comm, root, "checkpoint-3");
    save.write_engine(*engine);
    save.commit();
    train_steps_of(*engine, model, comm, 3, 3);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    if (comm.rank() == 0) final_params = std::move(params);
  });
  return final_params;
}

struct Resumed {
  std::vector<std::vector<float>> params;
  std::int64_t load_workspace_peak = 0;  // staging-space workspace bytes while loading (rank 0)
  std::int64_t owned_state_bytes = 0;    // (1 + states) x fp32 x owned elements (rank 0)
  std::int64_t largest_shard = 0;        // elements of the largest unit's shard (rank 0)
};

Resumed resume(const EngineOptions& options, int world, const fs::path& folder) {
  Resumed resumed;
  run_ranks(world, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory());
    TinyStack model(kShape);
    model.register_units(*engine);
    engine->initialize();
    MemoryLedger& ledger = engine->ledger();
    const std::int64_t before =
        ledger.entry(MemorySpace::kHost, MemoryCategory::kWorkspace).current_bytes;
    ledger.reset_peaks();
    checkpoint::load(*engine, folder);
    const std::int64_t peak =
        ledger.entry(MemorySpace::kHost, MemoryCategory::kWorkspace).peak_bytes - before;
    std::int64_t owned = 0, largest = 0;
    for (UnitId u = 0; u < static_cast<UnitId>(engine->num_units()); ++u) {
      const auto shard = static_cast<std::int64_t>(engine->layout(u).padded_num_elements() /
                                                   static_cast<std::size_t>(comm.world_size()));
      owned += shard;
      largest = std::max(largest, shard);
    }
    EXPECT_EQ(engine->global_steps(), 3);
    train_steps_of(*engine, model, comm, 3, 3);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    if (comm.rank() == 0) {
      resumed.params = std::move(params);
      resumed.load_workspace_peak = peak;
      resumed.owned_state_bytes = owned * 3 * static_cast<std::int64_t>(sizeof(float));
      resumed.largest_shard = largest;
    }
  });
  return resumed;
}

TEST(StreamingLoad, NvmeStatesLoadOneSubGroupAtATimeAndResumeBitwise) {
  const fs::path root = scratch("nvme_bitwise");
  const EngineOptions options = nvme_options(3);
  const std::vector<std::vector<float>> uninterrupted = train_saving(options, 2, root);
  const Resumed resumed = resume(options, 2, root / "checkpoint-3");
  EXPECT_EQ(resumed.params, uninterrupted);
  // One sub-group's slot (master, two moments and the swapped gradients, 16 bytes an element,
  // each part aligned to the store's 4096 bytes; here a piece of a unit), not the rank's shard
  // (12 bytes an owned element, 4x the largest unit's here).
  EXPECT_GT(resumed.load_workspace_peak, 0);
  EXPECT_LE(resumed.load_workspace_peak, 16 * resumed.largest_shard + 4 * 4096);
  EXPECT_LT(resumed.load_workspace_peak, resumed.owned_state_bytes / 2);
  fs::remove_all(root);
}

TEST(StreamingLoad, NvmeStatesReshardAcrossWorldAndStage) {
  const fs::path root = scratch("nvme_reshard");
  const std::vector<std::vector<float>> uninterrupted = train_saving(nvme_options(3), 2, root);
  for (const auto& [stage, world] : std::vector<std::pair<int, int>>{{3, 1}, {2, 4}, {1, 3}}) {
    SCOPED_TRACE("loaded at stage " + std::to_string(stage) + " world " + std::to_string(world));
    const Resumed resumed = resume(nvme_options(stage), world, root / "checkpoint-3");
    ASSERT_EQ(resumed.params.size(), uninterrupted.size());
    for (std::size_t u = 0; u < uninterrupted.size(); ++u)
      for (std::size_t i = 0; i < uninterrupted[u].size(); ++i)
        ASSERT_NEAR(resumed.params[u][i], uninterrupted[u][i],
                    1e-5 * (1 + std::fabs(uninterrupted[u][i])))
            << "unit " << u << " element " << i;
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
