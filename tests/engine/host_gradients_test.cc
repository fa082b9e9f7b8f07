// HostGradients on its own (a CPU context, a local communicator, a StateStorage and the in-memory
// swap store that defers every transfer to its wait): reduced blocks unpacked into the host
// gradient partition (scaled, then accumulated), their squared norms and zeroing; with nvme the
// blocks of three sub-groups go through two windows (a sub-group met again is read back from its
// region and accumulated), squares() keeps the last two windows in memory for the step
// (take_windows hands over those it adopts without writing them; the others are written out, so
// the regions then hold the sums), and zero() empties them.
#include "engine/host_gradients.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/host_optimizer.h"
#include "engine/state_storage.h"
#include "engine/stored_gradients.h"
#include "memory_swap_store.h"
#include "state_storage_util.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/optimizer.h"
#include "zero/core/partition.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero {
namespace {

// Never stepped here: the host optimizer only sizes the windows.
class IdleOptimizer final : public Optimizer {
 public:
  std::string_view name() const override { return "idle"; }
  int states_per_element() const override { return 1; }
  std::vector<std::string> state_names() const override { return {"sum"}; }
  double lr() const override { return 0.0; }
  double beta1() const override { return 0.0; }
  void step(std::span<ShardChunk>, const OptimizerStep&) override {}
};

class HostGradientsTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements (world 1) under options_, the storage allocated.
  HostGradients& make(std::vector<std::size_t> sizes) {
    policy_ = state_policy(options_);
    storage_ = testing::allocated_storage(*context_, options_, policy_, sizes, 0, 1, 1,
                                          testing::memory_swap_store_factory(&counters_),
                                          [](std::size_t) { return 1; });
    host_optimizer_ = std::make_unique<HostOptimizer>(HostOptimizerSetup{
        .context = *context_,
        .options = options_,
        .policy = policy_,
        .storage = *storage_,
        .optimizer = optimizer_,
        .shard_chunk = [](UnitId, float*, const float*, float*) { return ShardChunk{}; },
        .gradients_held = [](std::size_t) { return false; },
        .stored_gradient_scale = [](std::size_t) { return 1.0f; },
        .take_gradient_windows = {},  // no gradient windows
        .synchronize_compute = [](const std::string&) {},
    });
    grads_ = std::make_unique<HostGradients>(HostGradientsSetup{
        .context = *context_,
        .communicator = *communicator_,
        .policy = policy_,
        .storage = *storage_,
        .host_optimizer = *host_optimizer_,
    });
    grads_->allocate(kReceive);
    return *grads_;
  }

  // Unpacks `value` + i (i < count) as unit u's elements [offset, offset + count), × `post`.
  void unpack(UnitId u, std::size_t offset, std::size_t count, float value, bool accumulate,
              float post) {
    Buffer reduced = context_->allocator(MemorySpace::kDevice)
                         .allocate(count * sizeof(float), MemoryCategory::kWorkspace);
    for (std::size_t i = 0; i < count; ++i)
      reduced.data_as<float>()[i] = value + static_cast<float>(i);
    float* destination =
        policy_.swap_grads() ? nullptr : static_cast<float*>(storage_->owned_grads(u)) + offset;
    grads_->unpack(reduced.data(), count, {{destination, count, 0, u, offset}}, accumulate, post);
    context_->copy_stream().synchronize();  // before `reduced` goes
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

  static constexpr std::size_t kReceive = 64;
  EngineOptions options_ = [] {
    EngineOptions options;
    options.stage = 3;
    options.alignment_elements = 4;
    options.sub_group_size = 40;
    options.offload_optimizer.device = config::OffloadDevice::kCpu;
    options.offload_optimizer.nvme_path = "/nvme";
    return options;
  }();
  IdleOptimizer optimizer_;
  testing::SwapStoreCounters counters_;
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
  std::unique_ptr<Communicator> communicator_ =
      make_local_communicator(CommOptions::from_environment(), context_.get());
  StatePolicy policy_;
  std::unique_ptr<StateStorage> storage_;
  std::unique_ptr<HostOptimizer> host_optimizer_;
  std::unique_ptr<HostGradients> grads_;
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

TEST_F(HostGradientsTest, CpuOffloadScalesThenAccumulatesIntoTheHostPartition) {
  HostGradients& grads = make({8, 12});
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

TEST_F(HostGradientsTest, NvmeAccumulatesThroughTwoWindowsAndTheRegions) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  HostGradients& grads = make({20, 36, 8, 28});  // sub-groups {20}, {36}, {8, 28}
  ASSERT_TRUE(policy_.swap_grads());
  ASSERT_EQ(storage_->sub_groups().size(), 3u);
  for (int micro = 0; micro < 2; ++micro) {
    grads.allocate_windows();  // the reducer's before_flush; allocated once per step
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

TEST_F(HostGradientsTest, NvmeHandsTheWindowsTheBackwardEndedWithToTheStepUnwritten) {
  options_.offload_optimizer.device = config::OffloadDevice::kNvme;
  HostGradients& grads = make({20, 36, 8, 28});  // sub-groups {20}, {36}, {8, 28}
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
          EXPECT_EQ(size_bytes, host_optimizer_->swap_slot_bytes(36));
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
