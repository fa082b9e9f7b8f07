// HostOffload on its own (CPU and planning contexts, a local communicator, a StateStorage, a
// recording optimizer, the in-memory swap store that defers every transfer to its wait).
// Its step updates every host sub-group's master and state and refreshes the compute parameters
// (fp32 and bf16); with nvme the sub-groups go through swap slots (every pipeline_read /
// pipeline_write setting gives the same values, gradients unpacked through the windows and
// swapped in, the last two windows taken as slots, or zeros); partial offload steps the device
// sub-groups too; params_from_master follows a rewritten master; a plan allocates the step's
// workspace and steps nothing; the slots are sized by the residues of the sub-groups.
// Its gradients: reduced blocks unpacked into the host gradient partition (scaled, then
// accumulated), their squared norms and zeroing; with nvme the blocks of three sub-groups go
// through two windows (a sub-group met again is read back from its region and accumulated),
// squares() keeps the last two windows in memory for the step (take_windows hands over those it
// adopts without writing them; the others are written out, so the regions then hold the sums),
// and zero() empties them.
#include "engine/host_offload.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/state_storage.h"
#include "engine/stored_gradients.h"
#include "memory_swap_store.h"
#include "state_storage_util.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/optimizer.h"
#include "zero/core/partition.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero {
namespace {

// params -= lr × grad_scale × grads; state += grads. Records the chunks it was handed, under a
// lock: step() may run on two threads at once (Optimizer's contract: partial offload steps the
// device sub-groups on the compute stream while the host steps its own).
class RecordingOptimizer final : public Optimizer {
 public:
  std::string_view name() const override { return "recording"; }
  int states_per_element() const override { return 1; }
  std::vector<std::string> state_names() const override { return {"sum"}; }
  double lr() const override { return 0.5; }
  double beta1() const override { return 0.0; }
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override {
    for (ShardChunk& chunk : chunks) {
      {
        std::lock_guard lock(mutex_);
        chunk_sizes.push_back(chunk.num_elements);
      }
      for (std::size_t i = 0; i < chunk.num_elements; ++i) {
        chunk.params[i] -= static_cast<float>(step.lr * step.grad_scale) * chunk.grads[i];
        chunk.state[i] += chunk.grads[i];
      }
    }
  }
  std::vector<std::size_t> chunk_sizes;

 private:
  std::mutex mutex_;
};

// Unit u's reduced block of `values` (converted to `dtype`, the reduced gradients') unpacked as
// its elements from `offset`, × `post` (added, when `accumulate`), into `destination` (null: its
// sub-group's window), waited for.
void unpack_block(HostOffload& host, DeviceContext& context, DType dtype, UnitId u,
                  std::size_t offset, const std::vector<float>& values, float* destination,
                  bool accumulate, float post) {
  const std::size_t count = values.size();
  Buffer reduced = context.allocator(MemorySpace::kDevice)
                       .allocate(count * size_of(dtype), MemoryCategory::kWorkspace);
  convert(values.data(), DType::kFloat32, reduced.data(), dtype, count);
  host.unpack(reduced.data(), count, {{destination, count, 0, u, offset}}, accumulate, post);
  context.copy_stream().synchronize();  // before `reduced` goes
}

// The parts a HostOffload reads, built for each test.
class HostOffloadTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements (world 1) under options_ on a CPU (or planning) context, the
  // storage allocated, the host side built with its receive buffer.
  HostOffload& build(std::vector<std::size_t> sizes, bool planning = false) {
    host_.reset();  // before the storage, the communicator and the context they use
    storage_.reset();
    communicator_.reset();
    context_ = planning ? make_planning_context() : make_cpu_context();
    communicator_ = make_local_communicator(CommOptions::from_environment(), context_.get());
    policy_ = state_policy(options_);
    storage_ = testing::allocated_storage(*context_, options_, policy_, sizes, 0, 1, 1,
                                          testing::memory_swap_store_factory(&counters_),
                                          [](std::size_t) { return 1; });
    host_ = std::make_unique<HostOffload>(HostOffloadSetup{
        .context = *context_,
        .communicator = *communicator_,
        .options = options_,
        .policy = policy_,
        .storage = *storage_,
        .optimizer = optimizer_,
    });
    host_->allocate(kReceive);
    return *host_;
  }

  static constexpr std::size_t kReceive = 64;  // elements: the largest unit's
  EngineOptions options_ = [] {
    EngineOptions options;
    options.stage = 3;
    options.alignment_elements = 4;
    options.sub_group_size = 40;
    options.offload_optimizer.device = config::OffloadDevice::kCpu;
    options.offload_optimizer.nvme_path = "/nvme";
    return options;
  }();
  RecordingOptimizer optimizer_;
  testing::SwapStoreCounters counters_;
  std::unique_ptr<DeviceContext> context_;
  std::unique_ptr<Communicator> communicator_;
  StatePolicy policy_;
  std::unique_ptr<StateStorage> storage_;
  std::unique_ptr<HostOffload> host_;
};

class HostOffloadStepTest : public HostOffloadTest {
 protected:
  // Units of `sizes` elements (world 1) under options_, the storage allocated, values set:
  // master element i of unit u = u + i/100, gradient = 1 + u (gradients_held_: unpacked).
  HostOffload& make(std::vector<std::size_t> sizes, bool planning = false) {
    build(std::move(sizes), planning);
    if (!planning) set_values();
    return *host_;
  }

  // Unit u's reduced block of `count` elements, each `value`, unpacked × `post` (swapped: into
  // its sub-group's window).
  void unpack(UnitId u, float value, float post) {
    const std::vector<float> values(storage_->unit(u).owned_count, value);
    unpack_block(*host_, *context_, policy_.model_grads, u, 0, values, nullptr, false, post);
  }

  float initial(UnitId u, std::size_t i) const {
    return static_cast<float>(u) + static_cast<float>(i) / 100.0f;
  }
  float gradient(UnitId u) const { return gradients_held_ ? 1.0f + static_cast<float>(u) : 0.0f; }

  void set_values() {
    context_->compute_stream().synchronize();
    SwapSlot slot = host_->make_swap_slot();
    AlignedHostBuffer param_io = make_param_io_buffer(*context_, policy_, *storage_);
    for (UnitId u = 0; u < units(); ++u) {
      const std::size_t count = storage_->unit(u).owned_count;
      std::vector<float> master(count);
      for (std::size_t i = 0; i < count; ++i) master[i] = initial(u, i);
      if (storage_->on_device(u))  // partial offload: resident device values
        std::copy(master.begin(), master.end(), storage_->owned_params(u));
      else
        host_->initialize_unit(u, master.data(), slot, param_io);
    }
    // The gradients: resident ones written here, swapped ones unpacked below.
    for (UnitId u = 0; u < units(); ++u)
      if (auto* grads = static_cast<float*>(storage_->owned_grads(u)))
        std::fill_n(grads, storage_->unit(u).owned_count, gradient(u));
    if (!policy_.swap_grads() || !gradients_held_) return;
    // Swapped: as a backward hands them over, last unit first, twice the gradient × 0.5 (bf16
    // without accumulation: stored 16-bit, widened × 0.5 by the step); the norm's squares keep
    // the last two windows for the step to take.
    host_->allocate_windows();
    for (UnitId u = units(); u-- > 0;) unpack(u, 2.0f * gradient(u), 0.5f);
    std::vector<SquaresResult> partial(storage_->num_units());
    host_->squares(partial);
  }

  UnitId units() const { return static_cast<UnitId>(storage_->num_units()); }

  // Unit u's fp32 master and state after the step (read from the regions with nvme).
  std::vector<float> master_of(UnitId u, bool state = false) {
    const std::size_t count = storage_->unit(u).owned_count;
    if (!policy_.swap_optimizer() || storage_->on_device(u)) {
      const float* values = state ? storage_->owned_state(u) : storage_->owned_params(u);
      return {values, values + count};
    }
    std::size_t g = 0;
    const std::vector<SubGroup>& groups = storage_->sub_groups();
    while (static_cast<std::size_t>(u) >= groups[g].last_unit) ++g;
    SwapSlot slot = host_->make_swap_slot();
    SwapStore& swap = *storage_->optimizer_swap();
    float* into = state ? slot.state : slot.master;
    swap.wait(swap.read(state ? storage_->state_region(g) : storage_->master_region(g), into));
    const float* values = into + (storage_->unit(u).owned_offset - groups[g].owned_offset);
    return {values, values + count};
  }

  // The compute parameters of unit u as fp32.
  std::vector<float> compute_of(UnitId u) {
    const std::size_t count = storage_->unit(u).owned_count;
    std::vector<float> values(count);
    convert(storage_->owned_compute_params(u), policy_.compute, values.data(), DType::kFloat32,
            count);
    return values;
  }

  void step_once() {
    OptimizerStep args;
    args.lr = 0.5;
    host_->step(args);
    context_->copy_stream().synchronize();
    context_->compute_stream().synchronize();
  }

  // Every unit: master = initial - 0.5 × gradient, state = gradient, compute = master (rounded).
  void expect_stepped() {
    for (UnitId u = 0; u < units(); ++u) {
      SCOPED_TRACE("unit " + std::to_string(u));
      const std::vector<float> master = master_of(u);
      const std::vector<float> state = master_of(u, true);
      const std::vector<float> compute = compute_of(u);
      for (std::size_t i = 0; i < master.size(); ++i) {
        ASSERT_EQ(master[i], initial(u, i) - 0.5f * gradient(u)) << "element " << i;
        ASSERT_EQ(state[i], gradient(u)) << "element " << i;
        float rounded = master[i];
        convert(&master[i], DType::kFloat32, &rounded, policy_.compute, 1);
        std::vector<float> widened(1);
        convert(&rounded, policy_.compute, widened.data(), DType::kFloat32, 1);
        ASSERT_EQ(compute[i], widened[0]) << "element " << i;
      }
    }
  }

  bool gradients_held_ = true;
};

TEST_F(HostOffloadStepTest, CpuOffloadStepsEverySubGroupAndRefreshesTheParameters) {
  for (const bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "fp32");
    options_.bf16.enabled = bf16;
    make({20, 36, 8, 30});  // sub-groups of at most 40: {20}, {36}, {8, 32}
    ASSERT_EQ(storage_->sub_groups().size(), 3u);
    step_once();
    expect_stepped();
    EXPECT_TRUE(host_->take_params_refreshed());
    EXPECT_FALSE(host_->take_params_refreshed());
    host_.reset();
  }
}

TEST_F(HostOffloadStepTest, NvmeGivesTheSameValuesWithEveryPipelineSetting) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.bf16.enabled = true;
  for (const bool held : {true, false}) {
    for (const int pipeline : {0, 1, 2, 3}) {
      SCOPED_TRACE(std::string(held ? "gradients swapped in" : "no gradients") + ", pipeline " +
                   std::to_string(pipeline));
      gradients_held_ = held;
      options_.offload_optimizer.pipeline_read = (pipeline & 1) != 0;
      options_.offload_optimizer.pipeline_write = (pipeline & 2) != 0;
      make({20, 36, 8, 30, 12, 40});
      EXPECT_EQ(host_->step_slot_count(), pipeline == 3 ? 3u : (pipeline == 0 ? 1u : 2u));
      step_once();
      expect_stepped();
      host_.reset();
    }
  }
}

TEST_F(HostOffloadStepTest, PartialOffloadStepsTheDeviceSubGroupsToo) {
  options_.offload_optimizer.ratio = 0.5;
  options_.sub_group_size = 16;
  make({16, 16, 16, 16});
  ASSERT_EQ(storage_->device_groups(), 2u);
  step_once();
  expect_stepped();
  EXPECT_EQ(optimizer_.chunk_sizes.size(), 4u);  // two device chunks, then one per host group
}

TEST_F(HostOffloadStepTest, ParamsFromMasterFollowsARewrittenMaster) {
  options_.bf16.enabled = true;
  make({20, 36});
  for (UnitId u = 0; u < units(); ++u)
    std::fill_n(storage_->owned_params(u), storage_->unit(u).owned_count, 0.25f + u);
  host_->params_from_master();
  for (UnitId u = 0; u < units(); ++u)
    EXPECT_EQ(compute_of(u), std::vector<float>(storage_->unit(u).owned_count, 0.25f + u));
  EXPECT_TRUE(optimizer_.chunk_sizes.empty());
}

TEST_F(HostOffloadStepTest, APlanAllocatesTheStepsWorkspaceAndStepsNothing) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.offload_optimizer.pipeline_read = true;
  options_.bf16.enabled = true;
  make({20, 36, 8, 30}, true);
  context_->ledger().reset_peaks();
  host_->step(OptimizerStep{});
  const LedgerEntry workspace =
      context_->ledger().entry(policy_.staging_space, MemoryCategory::kWorkspace);
  // Two slots (master, state, gradients: 3 × 4 KiB-aligned pieces each, plus the alignment)
  // for sub-groups {20, 8 + 32} and {36}, and two 16-bit staging buffers of the largest
  // sub-group (40 elements, 64 bytes of alignment).
  EXPECT_EQ(host_->step_slot_elements(0), 40u);
  EXPECT_EQ(host_->step_slot_elements(1), 36u);
  const std::size_t slots = host_->swap_slot_bytes(40) + host_->swap_slot_bytes(36);
  EXPECT_EQ(workspace.peak_bytes, static_cast<std::int64_t>(slots + 2 * (40 * 2 + 64)));
  EXPECT_EQ(workspace.current_bytes, 0);
  EXPECT_TRUE(optimizer_.chunk_sizes.empty());
  EXPECT_TRUE(host_->take_params_refreshed());
}

TEST_F(HostOffloadStepTest, SlotsAreSizedByTheSubGroupsTheyHold) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  options_.offload_optimizer.pipeline_read = true;
  options_.offload_optimizer.pipeline_write = true;
  options_.sub_group_size = 8;
  make({8, 24, 8, 8, 4});                        // one unit per sub-group: 8, 24, 8, 8, 4
  EXPECT_EQ(host_->step_slot_elements(0), 8u);   // groups 0 and 3
  EXPECT_EQ(host_->step_slot_elements(1), 24u);  // groups 1 and 4
  EXPECT_EQ(host_->step_slot_elements(2), 8u);   // group 2
  // master + state + gradients, each rounded up to the store's 4096 bytes, and the alignment.
  EXPECT_EQ(host_->swap_slot_bytes(24), 3u * 4096 + 4096);
  SwapSlot slot = host_->make_swap_slot();  // the largest sub-group
  // Gradients first, at the buffer's aligned start (where a gradient window holds them).
  EXPECT_EQ(static_cast<void*>(slot.grads), slot.memory.data);
  EXPECT_EQ(slot.master - slot.grads, 4096 / 4);
  EXPECT_EQ(slot.state - slot.master, 4096 / 4);
}

class HostOffloadGradientsTest : public HostOffloadTest {
 protected:
  // Units of `sizes` elements (world 1) under options_, the storage allocated.
  HostOffload& make(std::vector<std::size_t> sizes) { return build(std::move(sizes)); }

  // Unpacks `value` + i (i < count) as unit u's elements [offset, offset + count), × `post`.
  void unpack(UnitId u, std::size_t offset, std::size_t count, float value, bool accumulate,
              float post) {
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = value + static_cast<float>(i);
    float* destination =
        policy_.swap_grads() ? nullptr : static_cast<float*>(storage_->owned_grads(u)) + offset;
    unpack_block(*host_, *context_, DType::kFloat32, u, offset, values, destination, accumulate,
                 post);
  }

  // Unit u's gradients: resident, or read from its sub-group's region (nvme).
  std::vector<float> grads_of(UnitId u) {
    const StateStorage::Placement& at = storage_->unit(u);
    if (!policy_.swap_grads()) {
      const auto* values = static_cast<const float*>(storage_->owned_grads(u));
      return {values, values + at.owned_count};
    }
    const std::vector<SubGroup>& groups = storage_->sub_groups();
    std::size_t g = 0;
    while (!(static_cast<std::size_t>(u) < groups[g].last_unit)) ++g;
    SwapStore& swap = *storage_->optimizer_swap();
    AlignedHostBuffer buffer = allocate_aligned(context_->allocator(MemorySpace::kHost),
                                                swap.padded_bytes(storage_->grad_region(g)),
                                                swap.io_alignment(), MemoryCategory::kWorkspace);
    swap.wait(swap.read(storage_->grad_region(g), buffer.data));
    const float* values =
        static_cast<const float*>(buffer.data) + (at.owned_offset - groups[g].owned_offset);
    return {values, values + at.owned_count};
  }

  static double squares_of(const std::vector<float>& values) {
    double sum = 0.0;
    for (const float v : values) sum += static_cast<double>(v) * v;
    return sum;
  }
};

// Widening in place gives widen_gradients' values (0 + widen(x) × post) for every count, the
// tails of the halving included.
TEST(StoredGradients, WideningInPlaceEqualsWideningIntoAnotherBuffer) {
  for (const DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (const std::size_t count : {1, 22, 64, 65, 1023, 70'001}) {
      std::vector<float> values(count), in_place(count), expected(count);
      for (std::size_t i = 0; i < count; ++i)
        values[i] = (i % 7 == 3 ? -1.0f : 1.0f) * static_cast<float>(i % 1000) / 37.0f;
      convert(values.data(), DType::kFloat32, in_place.data(), dtype, count);
      std::vector<char> stored(count * size_of(dtype));
      std::memcpy(stored.data(), in_place.data(), stored.size());
      widen_gradients_in_place(in_place.data(), dtype, 0.3f, count);
      widen_gradients(stored.data(), dtype, 0.3f, expected.data(), count);
      EXPECT_EQ(std::memcmp(in_place.data(), expected.data(), count * sizeof(float)), 0)
          << name_of(dtype) << " count " << count;
    }
}

TEST_F(HostOffloadGradientsTest, CpuOffloadScalesThenAccumulatesIntoTheHostPartition) {
  HostOffload& grads = make({8, 12});
  ASSERT_FALSE(policy_.swap_grads());
  unpack(1, 2, 5, 10.0f, false, 0.5f);  // written: 0.5 × (10 + i)
  unpack(1, 4, 3, 1.0f, true, 2.0f);    // added: 2 × (1 + i) over [4, 7)
  const std::vector<float> unit1 = grads_of(1);
  const std::vector<float> expected = {0, 0, 5, 5.5f, 6 + 2, 6.5f + 4, 7 + 6, 0, 0, 0, 0, 0};
  EXPECT_EQ(unit1, expected);
  EXPECT_EQ(grads_of(0), std::vector<float>(8, 0.0f));
  std::vector<SquaresResult> partial(2, SquaresResult{-1.0, true});
  grads.squares(partial);
  EXPECT_EQ(partial[0].sum, 0.0);
  EXPECT_EQ(partial[1].sum, squares_of(expected));
  EXPECT_FALSE(partial[1].nonfinite);
  grads.zero();
  context_->copy_stream().synchronize();
  EXPECT_EQ(grads_of(1), std::vector<float>(12, 0.0f));
}

TEST_F(HostOffloadGradientsTest, NvmeAccumulatesThroughTwoWindowsAndTheRegions) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  HostOffload& grads = make({20, 36, 8, 28});  // sub-groups {20}, {36}, {8, 28}
  ASSERT_TRUE(policy_.swap_grads());
  ASSERT_EQ(storage_->sub_groups().size(), 3u);
  for (int micro = 0; micro < 2; ++micro) {
    grads.allocate_windows();  // before_flush's; allocated once per step
    // Sub-group 0, then 1 (0 written out), 2 (1 written out, 0's window taken), 0 again (read
    // back from its region: it holds micro-step 0's values).
    unpack(0, 0, 20, 1.0f, micro > 0, 1.0f);
    unpack(1, 4, 8, 100.0f, true, 1.0f);
    unpack(3, 0, 28, 2.0f, true, 0.5f);
    unpack(0, 10, 4, 1000.0f, true, 1.0f);
  }
  EXPECT_TRUE(grads.held(0) && grads.held(1) && grads.held(2));
  std::vector<SquaresResult> partial(4);
  grads.squares(partial);
  grads.spill_windows();  // adopting none: every window out
  std::vector<float> unit0(20), unit1(36, 0.0f), unit3(28);
  for (std::size_t i = 0; i < 20; ++i) unit0[i] = 2 * (1.0f + static_cast<float>(i));  // + once
  for (std::size_t i = 10; i < 14; ++i) unit0[i] += 2 * (1000.0f + static_cast<float>(i - 10));
  for (std::size_t i = 4; i < 12; ++i) unit1[i] = 2 * (100.0f + static_cast<float>(i - 4));
  for (std::size_t i = 0; i < 28; ++i) unit3[i] = 2 * 0.5f * (2.0f + static_cast<float>(i));
  EXPECT_EQ(grads_of(0), unit0);
  EXPECT_EQ(grads_of(1), unit1);
  EXPECT_EQ(grads_of(2), std::vector<float>(8, 0.0f));
  EXPECT_EQ(grads_of(3), unit3);
  EXPECT_EQ(partial[0].sum, squares_of(unit0));
  EXPECT_EQ(partial[1].sum, squares_of(unit1));
  EXPECT_EQ(partial[2].sum, 0.0);
  EXPECT_EQ(partial[3].sum, squares_of(unit3));
  grads.zero();
  context_->copy_stream().synchronize();
  EXPECT_FALSE(grads.held(0) || grads.held(1) || grads.held(2));
  // The next step starts from zeros: a block of sub-group 1 is not added to the old region.
  grads.allocate_windows();
  unpack(1, 0, 2, 3.0f, true, 1.0f);
  grads.squares(partial);
  grads.spill_windows();
  EXPECT_EQ(partial[0].sum, 0.0);
  EXPECT_EQ(partial[1].sum, 3.0 * 3.0 + 4.0 * 4.0);
  EXPECT_EQ(grads_of(1)[5], 0.0f);
}

TEST_F(HostOffloadGradientsTest, NvmeHandsTheWindowsTheBackwardEndedWithToTheStepUnwritten) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  HostOffload& grads = make({20, 36, 8, 28});  // sub-groups {20}, {36}, {8, 28}
  grads.allocate_windows();
  // As a backward runs: the last sub-group first. 2 is written out when 1 takes the other
  // window, 1 when 0 takes 2's.
  unpack(3, 0, 28, 2.0f, false, 1.0f);
  unpack(1, 0, 36, 1.0f, false, 1.0f);
  unpack(0, 0, 20, 5.0f, false, 1.0f);
  std::vector<SquaresResult> partial(4);
  grads.squares(partial);  // waits for 1's write
  std::vector<float> unit0(20);
  for (std::size_t i = 0; i < 20; ++i) unit0[i] = 5.0f + static_cast<float>(i);
  EXPECT_EQ(partial[0].sum, squares_of(unit0));
  const std::int64_t written = counters_.bytes_written;
  EXPECT_EQ(written, 4 * (36 + 36)) << "sub-groups 2 and 1, not 0";
  std::vector<std::size_t> offered;
  std::vector<GradientWindow> taken =
      grads.take_windows([&](std::size_t group, std::size_t size_bytes) {
        // Sub-group 0 ends in the window sized for its slot (the other holds gradients only).
        if (group == 0)
          EXPECT_EQ(size_bytes, host_->swap_slot_bytes(36));
        else
          EXPECT_EQ(size_bytes, 4096u + 4096u);
        offered.push_back(group);
        return group == 0;
      });
  EXPECT_EQ(offered, (std::vector<std::size_t>{0, 1}));  // ascending
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].group, 0u);
  const auto* values = static_cast<const float*>(taken[0].memory.data);
  EXPECT_EQ(std::vector<float>(values, values + 20), unit0);
  // Sub-group 1's window was written when left: declined, it is freed, not written again.
  EXPECT_EQ(counters_.bytes_written, written);
  EXPECT_EQ(counters_.bytes_read, 0);
  std::vector<float> unit1(36);
  for (std::size_t i = 0; i < 36; ++i) unit1[i] = 1.0f + static_cast<float>(i);
  EXPECT_EQ(grads_of(1), unit1);
  // Declining the unwritten window writes it out.
  taken.clear();
  grads.zero();
  context_->copy_stream().synchronize();
  grads.allocate_windows();
  unpack(0, 0, 20, 5.0f, false, 1.0f);
  grads.squares(partial);
  EXPECT_TRUE(grads.take_windows([](std::size_t, std::size_t) { return false; }).empty());
  EXPECT_EQ(counters_.bytes_written, written + 4 * 20);
  EXPECT_EQ(grads_of(0), unit0);
}

}  // namespace
}  // namespace zero
