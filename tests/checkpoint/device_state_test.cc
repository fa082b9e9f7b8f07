// Checkpoints of states in device memory the host cannot address (a GPU's), checked on the CPU
// (tests/common/guarded_device_context.h: device memory as mprotect'ed pages only the context's
// operations may touch while guarded). Saving, gather_master and resuming under
// the guard must stage every value through pinned host pieces, and give the bytes, masters and
// continued run of the same engine on the plain CPU context.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "../common/guarded_device_context.h"
#include "../engine/checking_communicator.h"
#include "../engine/offload_modes.h"
#include "checkpoint_test_util.h"
#include "zero/core/cpu_context.h"
#include "zero/engine/state_policy.h"
#include "zero/factory/engine_factory.h"

namespace zero::testing {
namespace {

// One rank (world 1, the local communicator over the context) on the plain CPU context or the
// guarded one, where a communicator that takes device buffers (as NCCL) records every collective
// buffer not in the context's device memory; members in construction order, engine destroyed
// first.
struct Rank {
  explicit Rank(const EngineOptions& options, bool guarded) {
    if (guarded) {
      auto context = std::make_unique<GuardedDeviceContext>();
      guarded_context = context.get();
      owned = std::move(context);
    } else {
      owned = make_cpu_context(CpuContextOptions{});
    }
    local = make_local_communicator(CommOptions::from_environment(), owned.get());
    if (guarded) {
      GuardedDeviceAllocator& device = guarded_context->device_allocator();
      checking = std::make_unique<CheckingCommunicator>(
          *local,
          [&device](const void* data, std::size_t size_bytes) {
            return device.holds(data, size_bytes);
          },
          DeviceKind::kCuda);
    }
    engine = make_engine(options, *comm(), {.context = owned.get()});
    engine->set_shard_piece_elements(128);  // every unit but the head in several pieces
    model.register_units(*engine);
    engine->initialize();
  }
  ~Rank() {
    engine.reset();
    if (checking) EXPECT_EQ(checking->violations(), std::vector<std::string>{});
  }
  Communicator* comm() const { return checking ? checking.get() : local.get(); }
  void guard(bool on) const {
    if (guarded_context != nullptr) guarded_context->guard(on);
  }
  std::unique_ptr<DeviceContext> owned;
  GuardedDeviceContext* guarded_context = nullptr;
  std::unique_ptr<Communicator> local;
  std::unique_ptr<CheckingCommunicator> checking;
  std::unique_ptr<Engine> engine;
  TinyStack model;
};

struct Saved {
  std::vector<std::vector<float>> masters;  // gather_master per unit (16-bit runs)
  std::vector<std::vector<float>> params;   // after 3 more steps
};

// 3 steps, a checkpoint root/checkpoint-3 and the masters under the guard, 3 more steps.
Saved train_and_save(const EngineOptions& options, bool guarded, const fs::path& root) {
  Rank rank(options, guarded);
  Engine& engine = *rank.engine;
  train_range(engine, rank.model, *rank.comm(), 0, 3);
  Saved saved;
  rank.guard(true);
  checkpoint::CheckpointSave save(*rank.comm(), root, "checkpoint-3");
  save.write_engine(engine);
  save.commit();
  if (state_policy(options).master_weights) {
    for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u) {
      const Buffer master = engine.gather_master(u);  // host memory the test reads
      const float* values = master.data_as<float>();
      saved.masters.emplace_back(values, values + engine.layout(u).num_elements());
    }
  }
  rank.guard(false);
  train_range(engine, rank.model, *rank.comm(), 3, 3);
  saved.params = gathered_parameters(engine);
  return saved;
}

// Loads `folder` under the guard and trains steps 3..5.
std::vector<std::vector<float>> resume(const EngineOptions& options, bool guarded,
                                       const fs::path& folder) {
  Rank rank(options, guarded);
  rank.guard(true);
  checkpoint::load(*rank.engine, folder);
  rank.guard(false);
  EXPECT_EQ(rank.engine->global_steps(), 3);
  train_range(*rank.engine, rank.model, *rank.comm(), 3, 3);
  return gathered_parameters(*rank.engine);
}

std::map<std::string, std::string> files_of(const fs::path& folder) {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] = {std::istreambuf_iterator<char>(in), {}};
  }
  return files;
}

EngineOptions options_for(int stage, Mode mode) {
  EngineOptions options = parity_options(stage, 1);
  apply_offload(options, mode, 1300, 0);  // ratio 0.5: the first sub-groups on the device
  return options;
}

// Resident states (stages 0 and 3), an fp32 master on the device beside host parameters (params
// cpu: gather_master reads it), the device and host parts of a partial offload (ratio 0.5), and
// host states (optimizer cpu, read in place).
class DeviceStates : public ::testing::TestWithParam<std::tuple<int, Mode>> {};

TEST_P(DeviceStates, SaveMastersAndResumeStageThroughPinnedPiecesAsOnTheHost) {
  const auto [stage, mode] = GetParam();
  const EngineOptions options = options_for(stage, mode);
  const fs::path root = scratch("device_states_" + std::to_string(stage) + "_" +
                                std::to_string(static_cast<int>(mode)));
  const Saved host = train_and_save(options, false, root / "host");
  const Saved device = train_and_save(options, true, root / "device");
  EXPECT_EQ(device.params, host.params) << "the save changed the run";
  EXPECT_EQ(device.masters, host.masters);
  if (mode == Mode::kParamsCpu || mode == Mode::kCpuRatio) EXPECT_FALSE(device.masters.empty());
  const auto host_files = files_of(root / "host" / "checkpoint-3");
  const auto device_files = files_of(root / "device" / "checkpoint-3");
  ASSERT_FALSE(host_files.empty());
  EXPECT_EQ(device_files, host_files) << "the shard files differ";

  // The resumed run continues the uninterrupted one bit for bit, from either save.
  EXPECT_EQ(resume(options, true, root / "host" / "checkpoint-3"), host.params);
  EXPECT_EQ(resume(options, true, root / "device" / "checkpoint-3"), host.params);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(StagesAndOffload, DeviceStates,
                         ::testing::Values(std::tuple{0, Mode::kNone}, std::tuple{3, Mode::kNone},
                                           std::tuple{3, Mode::kParamsCpu},
                                           std::tuple{3, Mode::kCpuRatio},
                                           std::tuple{2, Mode::kCpu}),
                         [](const auto& instance) {
                           std::string name = "stage" +
                                              std::to_string(std::get<0>(instance.param)) + "_" +
                                              name_of(std::get<1>(instance.param));
                           for (char& c : name)
                             if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
                           return name;
                         });

// The guard is what makes the test above mean something: under it, the engine's spans are
// device memory, and reading one from the host (as memcpy or pwrite would) kills the process.
TEST(DeviceStatesGuard, AHostReadOfAShardSpanUnderTheGuardDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Rank rank(options_for(3, Mode::kNone), true);
        const std::vector<ShardState> shards = rank.engine->shard_states();
        ASSERT_EQ(shards.front().space, MemorySpace::kDevice);
        rank.guard(true);
        float copy = 0.0f;
        std::memcpy(&copy, shards.front().params.data(), sizeof(float));
        std::fprintf(stderr, "read %g\n", copy);
      },
      "");
}

TEST(DeviceStatesGuard, PiecesMustHoldAnElement) {
  Rank rank(options_for(0, Mode::kNone), false);
  EXPECT_NE(message_of([&] { rank.engine->set_shard_piece_elements(0); }).find("at least one"),
            std::string::npos);
}

}  // namespace
}  // namespace zero::testing
