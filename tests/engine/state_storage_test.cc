// StateStorage on its own (CPU and planning contexts, no communicator): every stage and offload
// mode allocates exactly the memory formula's bytes per (space, category), as rank 1 of 2 and 4;
// the units' views sit at their offsets in the flat buffers (the rank's shard of the full buffers
// at stages 0-2, back to back in the owned buffers); partial offload keeps the leading sub-groups
// on the device; nvme creates its regions in the order the engine's files are laid out in; the
// gradients are zeroed; misuse is refused with errors that name it.
#include "engine/state_storage.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "state_storage_util.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/partition.h"
#include "zero/core/swap_store.h"
#include "zero/engine/memory_formula.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero {
namespace {

constexpr std::size_t kStates = 2;  // Adam's moments

// A swap store that records its regions (label, bytes) and the ledger's nvme bytes; moves nothing.
class RecordingSwapStore final : public SwapStore {
 public:
  RecordingSwapStore(MemoryLedger* ledger, std::vector<std::string>* labels)
      : ledger_(ledger), labels_(labels) {}
  ~RecordingSwapStore() override {
    for (const auto& [bytes, category] : regions_)
      ledger_->record_free(MemorySpace::kNvme, category, bytes);
  }
  int add_region(std::string label, std::size_t bytes, MemoryCategory category) override {
    ledger_->record_allocation(MemorySpace::kNvme, category, bytes);
    labels_->push_back(label + " " + std::to_string(bytes));
    regions_.emplace_back(bytes, category);
    return static_cast<int>(regions_.size() - 1);
  }
  SwapTicket write(int, const void*) override { return {}; }
  SwapTicket read(int, void*) override { return {}; }
  SwapTicket read_range(int, std::size_t, std::size_t, void*) override { return {}; }
  void wait(SwapTicket) override {}
  void wait_all() override {}
  std::size_t io_alignment() const override { return 4096; }
  std::size_t padded_bytes(int region) const override {
    return regions_.at(static_cast<std::size_t>(region)).first;
  }
  const std::filesystem::path& directory() const override { return directory_; }

 private:
  MemoryLedger* ledger_;
  std::vector<std::string>* labels_;
  std::vector<std::pair<std::size_t, MemoryCategory>> regions_;
  std::filesystem::path directory_;
};

class StateStorageTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements placed as rank `rank` of `world` under options_.
  StateStorage& make(std::vector<std::size_t> sizes, int rank = 1, int world = 2,
                     bool planning = false) {
    storage_.reset();  // before the context it allocated from
    sizes_ = std::move(sizes);
    context_ = planning ? make_planning_context() : make_cpu_context();
    policy_ = state_policy(options_);
    storage_ = testing::allocated_storage(
        *context_, options_, policy_, sizes_, rank, world, kStates,
        [this](const NvmeSwapOptions& options) {
          paths_.push_back(options.nvme_path.string());
          return std::make_unique<RecordingSwapStore>(options.ledger, &regions_);
        },
        [](std::size_t u) { return static_cast<int>(u) + 1; });
    return *storage_;
  }

  // The ledger's bytes against the memory formula, per space and model-state category.
  void expect_formula_bytes(int world) {
    const ModelStateBytesBySpace expected =
        model_state_bytes(options_, sizes_, world, static_cast<int>(kStates));
    const MemoryLedger& ledger = context_->ledger();
    for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
      const auto space = static_cast<MemorySpace>(s);
      const ModelStateBytes& bytes = expected.in(space);
      const auto held = [&](MemoryCategory category) {
        return ledger.entry(space, category).current_bytes;
      };
      SCOPED_TRACE(std::string(name_of(space)));
      EXPECT_EQ(held(MemoryCategory::kParams), bytes.params);
      EXPECT_EQ(held(MemoryCategory::kParamShard), bytes.param_shard);
      EXPECT_EQ(held(MemoryCategory::kGrads), bytes.grads);
      EXPECT_EQ(held(MemoryCategory::kGradShard), bytes.grad_shard);
      EXPECT_EQ(held(MemoryCategory::kMasterParams), bytes.master_params);
      EXPECT_EQ(held(MemoryCategory::kOptimizerState), bytes.optimizer_state);
    }
  }

  static std::ptrdiff_t bytes_between(const void* from, const void* to) {
    return static_cast<const char*>(to) - static_cast<const char*>(from);
  }

  EngineOptions options_ = [] {
    EngineOptions options;
    options.alignment_elements = 4;
    return options;
  }();
  std::vector<std::size_t> sizes_;
  std::unique_ptr<DeviceContext> context_;
  StatePolicy policy_;
  std::unique_ptr<StateStorage> storage_;
  std::vector<std::string> regions_;  // "label bytes", in creation order
  std::vector<std::string> paths_;    // nvme_path of each store made
};

TEST_F(StateStorageTest, EveryStageAndOffloadAllocatesTheFormulasBytes) {
  struct Mode {
    const char* name;
    int stage;
    bool bf16;
    config::OffloadDevice optimizer, params;
    double ratio;
  };
  using config::OffloadDevice;
  const Mode modes[] = {
      {"stage 0", 0, false, OffloadDevice::kNone, OffloadDevice::kNone, 1.0},
      {"stage 1 bf16", 1, true, OffloadDevice::kNone, OffloadDevice::kNone, 1.0},
      {"stage 2", 2, false, OffloadDevice::kNone, OffloadDevice::kNone, 1.0},
      {"stage 3 bf16", 3, true, OffloadDevice::kNone, OffloadDevice::kNone, 1.0},
      {"stage 1 offload cpu", 1, false, OffloadDevice::kCpu, OffloadDevice::kNone, 1.0},
      {"stage 2 offload cpu bf16", 2, true, OffloadDevice::kCpu, OffloadDevice::kNone, 1.0},
      {"stage 3 offload cpu", 3, false, OffloadDevice::kCpu, OffloadDevice::kCpu, 1.0},
      {"stage 3 partial offload", 3, true, OffloadDevice::kCpu, OffloadDevice::kNone, 0.5},
      {"stage 3 params only", 3, true, OffloadDevice::kNone, OffloadDevice::kCpu, 1.0},
      {"stage 3 nvme", 3, true, OffloadDevice::kNvme, OffloadDevice::kNvme, 1.0},
  };
  for (const Mode& mode : modes) {
    for (const bool planning : {false, true}) {
      for (const int world : {2, 4}) {
        SCOPED_TRACE(std::string(mode.name) + (planning ? ", planned" : "") + ", world " +
                     std::to_string(world));
        options_.stage = mode.stage;
        options_.bf16.enabled = mode.bf16;
        options_.offload_optimizer.device = mode.optimizer;
        options_.offload_optimizer.nvme_path = "/nvme/optimizer";
        options_.offload_optimizer.ratio = mode.ratio;
        options_.offload_param.device = mode.params;
        options_.offload_param.nvme_path = "/nvme/params";
        options_.offload_param.max_in_cpu = 40;
        options_.sub_group_size = 60;
        make({37, 100, 9, 64}, 1, world, planning);
        expect_formula_bytes(world);
        storage_.reset();
      }
    }
  }
}

TEST_F(StateStorageTest, Stage1OwnedViewsAreTheRanksShardOfTheFullBuffers) {
  options_.stage = 1;
  StateStorage& storage = make({10, 6});  // padded to 16 and 8: shards 8 and 4
  const StateStorage::Placement& first = storage.unit(0);
  const StateStorage::Placement& second = storage.unit(1);
  EXPECT_EQ(first.padded, 16u);
  EXPECT_EQ(first.shard, 8u);
  EXPECT_EQ(first.owned_count, 8u);
  EXPECT_EQ(second.full_offset, 16u);
  EXPECT_EQ(second.owned_offset, 8u);
  EXPECT_EQ(second.first_tensor, 1);  // unit 0 has one tensor
  EXPECT_EQ(storage.num_tensors(), 3);
  EXPECT_EQ(storage.owned_total(), 12u);
  EXPECT_EQ(storage.owned_range(1), (ElementRange{4, 8}));
  EXPECT_EQ(bytes_between(storage.full_params(0), storage.full_params(1)), 16 * 4);
  EXPECT_EQ(bytes_between(storage.full_params(1), storage.owned_compute_params(1)), 4 * 4);
  EXPECT_EQ(bytes_between(storage.full_grads(0), storage.owned_grads(0)), 8 * 4);
  EXPECT_EQ(storage.owned_params(0), storage.owned_compute_params(0));  // fp32: no master
  EXPECT_EQ(storage.owned_state(1) - storage.owned_state(0), 2 * 8);
  EXPECT_TRUE(storage.sub_groups().empty());  // no host step
}

TEST_F(StateStorageTest, Stage3ShardsSitBackToBackWithAnFp32Master) {
  options_.stage = 3;
  options_.bf16.enabled = true;
  StateStorage& storage = make({10, 6}, 0, 2);
  EXPECT_EQ(storage.unit(1).param_offset, 8u);
  EXPECT_EQ(storage.owned_range(0), (ElementRange{0, 8}));
  EXPECT_EQ(bytes_between(storage.owned_compute_params(0), storage.owned_compute_params(1)), 8 * 2);
  EXPECT_EQ(bytes_between(storage.owned_grads(0), storage.owned_grads(1)), 8 * 4);
  EXPECT_EQ(storage.owned_params(1) - storage.owned_params(0), 8);
  EXPECT_NE(static_cast<void*>(storage.owned_params(0)), storage.owned_compute_params(0));
  EXPECT_EQ(storage.shard_space(0), MemorySpace::kDevice);
}

TEST_F(StateStorageTest, GradientsAndOptimizerStateStartAtZeroAndAreZeroedAgain) {
  options_.stage = 0;
  StateStorage& storage = make({10, 6}, 0, 1);
  context_->compute_stream().synchronize();
  for (UnitId u = 0; u < 2; ++u) {
    const auto* grads = static_cast<const float*>(storage.owned_grads(u));
    for (std::size_t i = 0; i < storage.unit(u).owned_count; ++i) EXPECT_EQ(grads[i], 0.0f);
    for (std::size_t i = 0; i < kStates * storage.unit(u).owned_count; ++i)
      EXPECT_EQ(storage.owned_state(u)[i], 0.0f);
  }
  auto* grads = static_cast<float*>(storage.owned_grads(1));
  for (std::size_t i = 0; i < 8; ++i) grads[i] = 1.5f;
  storage.zero_device_grads(context_->compute_stream());
  context_->compute_stream().synchronize();
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(grads[i], 0.0f);
}

TEST_F(StateStorageTest, PartialOffloadKeepsTheLeadingSubGroupsOnTheDevice) {
  options_.stage = 3;
  options_.offload_optimizer.device = config::OffloadDevice::kCpu;
  options_.offload_optimizer.ratio = 0.5;
  options_.sub_group_size = 8;
  StateStorage& storage = make({16, 16, 16, 16});  // shards of 8: one unit per sub-group
  ASSERT_EQ(storage.sub_groups().size(), 4u);
  EXPECT_EQ(storage.device_groups(), 2u);
  EXPECT_EQ(storage.owned_split(), 16u);
  EXPECT_TRUE(storage.on_device(1));
  EXPECT_FALSE(storage.on_device(2));
  EXPECT_EQ(storage.shard_space(1), MemorySpace::kDevice);
  EXPECT_EQ(storage.shard_space(2), MemorySpace::kHost);  // pin_memory off: pageable
  // Each part's views start its own buffer: device [0, 16), host [16, 32).
  EXPECT_EQ(storage.owned_params(1) - storage.owned_params(0), 8);
  EXPECT_EQ(storage.owned_state(3) - storage.owned_state(2),
            static_cast<std::ptrdiff_t>(kStates * 8));
  EXPECT_EQ(storage.host_grad_shard().size_bytes(), 16u * 4);
  EXPECT_EQ(storage.host_grad_shard().data(), storage.owned_grads(2));
}

TEST_F(StateStorageTest, NvmeRegionsFollowTheFilesLayout) {
  options_.stage = 3;
  options_.bf16.enabled = true;
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.offload_optimizer.nvme_path = "/nvme/optimizer";
  options_.offload_param.device = config::OffloadDevice::kNvme;
  options_.offload_param.nvme_path = "/nvme/params";
  options_.offload_param.max_in_cpu = 8;  // the first unit's shard stays in host memory
  options_.sub_group_size = 8;
  StateStorage& storage = make({16, 16});
  EXPECT_EQ(paths_, (std::vector<std::string>{"/nvme/optimizer", "/nvme/params"}));
  // bf16 with one micro-step per step: the gradient regions hold the reduced bf16 values.
  EXPECT_EQ(regions_,
            (std::vector<std::string>{
                "master_params sub-group 0 32", "optimizer_state sub-group 0 64",
                "master_params sub-group 1 32", "optimizer_state sub-group 1 64",
                "grad_shard sub-group 0 16", "grad_shard sub-group 1 16", "param_shard u1 16"}));
  EXPECT_EQ(storage.master_region(1), 2);
  EXPECT_EQ(storage.state_region(0), 1);
  EXPECT_EQ(storage.grad_region(1), 5);
  EXPECT_EQ(storage.unit(0).param_region, -1);
  EXPECT_EQ(storage.unit(1).param_region, 0);  // the first region of the parameters' store
  EXPECT_NE(storage.param_store(), storage.optimizer_swap());  // two paths, two stores
  // Swapped states have no resident view.
  EXPECT_EQ(storage.owned_params(0), nullptr);
  EXPECT_EQ(storage.owned_state(0), nullptr);
  EXPECT_EQ(storage.owned_grads(0), nullptr);
  EXPECT_NE(storage.owned_compute_params(0), nullptr);
  EXPECT_EQ(storage.owned_compute_params(1), nullptr);
  EXPECT_EQ(storage.shard_space(0), policy_.staging_space);
}

TEST_F(StateStorageTest, OneStoreServesBothWhenThePathsAgree) {
  options_.stage = 3;
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.offload_optimizer.nvme_path = "/nvme";
  options_.offload_param.device = config::OffloadDevice::kNvme;
  options_.offload_param.nvme_path = "/nvme";
  StateStorage& storage = make({16, 16});
  EXPECT_EQ(paths_.size(), 1u);
  EXPECT_EQ(storage.param_store(), storage.optimizer_swap());
}

TEST_F(StateStorageTest, MisuseIsRefusedByName) {
  options_.stage = 2;
  StateStorage& storage = make({10});
  EXPECT_THROW(
      {
        try {
          storage.unit(1);
        } catch (const Error& error) {
          EXPECT_NE(std::string(error.what()).find("no unit #1"), std::string::npos);
          throw;
        }
      },
      Error);
  EXPECT_THROW(storage.allocate({{"again", 4, 4, {{0, 4}}}}), Error);
  EXPECT_THROW(storage.set_swap_store_factory(nullptr), Error);
}

TEST_F(StateStorageTest, NvmeWithoutAFactorySaysHowToInstallOne) {
  options_.stage = 3;
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.offload_optimizer.nvme_path = "/nvme";
  context_ = make_cpu_context();
  policy_ = state_policy(options_);
  StateStorage storage(StateStorageSetup{.context = *context_,
                                         .options = options_,
                                         .policy = policy_,
                                         .rank = 0,
                                         .world = 1,
                                         .states_per_element = kStates});
  try {
    storage.allocate({{"u0", 16, 16, {{0, 16}}}});
    FAIL() << "allocated nvme states without a swap store factory";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("no swap store factory"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("offload_optimizer"), std::string::npos);
  }
}

}  // namespace
}  // namespace zero
