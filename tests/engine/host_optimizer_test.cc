// HostOptimizer on its own (CPU and planning contexts, a StateStorage, a recording optimizer, the
// in-memory swap store that defers every transfer to its wait): offload_optimizer's step updates
// every host sub-group's master and state and refreshes the compute parameters (fp32 and bf16);
// with nvme the sub-groups go through swap slots (every pipeline_read / pipeline_write setting
// gives the same values, gradients swapped in or zeros); partial offload steps the device
// sub-groups too; params_from_master follows a rewritten master; a plan allocates the step's
// workspace and steps nothing; the slots are sized by the residues of the sub-groups.
#include "engine/host_optimizer.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/state_storage.h"
#include "memory_swap_store.h"
#include "state_storage_util.h"
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

class HostOptimizerTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements (world 1) under options_, the storage allocated, values set:
  // master element i of unit u = u + i/100, gradient = 1 + u (gradients_held_: swapped in).
  HostOptimizer& make(std::vector<std::size_t> sizes, bool planning = false) {
    host_.reset();  // before the storage and the context they use
    storage_.reset();
    context_ = planning ? make_planning_context() : make_cpu_context();
    policy_ = state_policy(options_);
    storage_ = testing::allocated_storage(*context_, options_, policy_, sizes, 0, 1, 1,
                                          testing::memory_swap_store_factory(),
                                          [](std::size_t) { return 1; });
    host_ = std::make_unique<HostOptimizer>(HostOptimizerSetup{
        .context = *context_,
        .options = options_,
        .policy = policy_,
        .storage = *storage_,
        .optimizer = optimizer_,
        .shard_chunk =
            [this](UnitId u, float* params, const float* grads, float* state) {
              ShardChunk chunk;
              chunk.params = params;
              chunk.grads = grads;
              chunk.state = state;
              chunk.num_elements = storage_->unit(u).owned_count;
              chunk.segments.push_back({0, chunk.num_elements, static_cast<int>(u)});
              return chunk;
            },
        .gradients_held = [this](std::size_t) { return gradients_held_; },
        .stored_gradient_scale = [](std::size_t) { return 0.5f; },
        .take_gradient_windows = {},  // no gradient windows
        .synchronize_compute =
            [this](const std::string&) { context_->compute_stream().synchronize(); },
    });
    if (!planning) set_values();
    return *host_;
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
    // The gradients: resident, or written to each host sub-group's region.
    for (UnitId u = 0; u < units(); ++u)
      if (auto* grads = static_cast<float*>(storage_->owned_grads(u)))
        std::fill_n(grads, storage_->unit(u).owned_count, gradient(u));
    if (!policy_.swap_grads()) return;
    // Stored 16-bit (bf16 without accumulation): twice the gradient, widened × 0.5 by the step.
    const DType stored = policy_.grad_swap_dtype;
    const float factor = stored == DType::kFloat32 ? 1.0f : 2.0f;
    const std::vector<SubGroup>& groups = storage_->sub_groups();
    for (std::size_t g = storage_->device_groups(); g < groups.size(); ++g) {
      for (std::size_t u = groups[g].first_unit; u < groups[g].last_unit; ++u)
        std::fill_n(slot.master + (storage_->unit(static_cast<UnitId>(u)).owned_offset -
                                   groups[g].owned_offset),
                    storage_->unit(static_cast<UnitId>(u)).owned_count,
                    factor * (1.0f + static_cast<float>(u)));
      convert(slot.master, DType::kFloat32, slot.state, stored, groups[g].num_elements);
      SwapStore& swap = *storage_->optimizer_swap();
      swap.wait(swap.write(storage_->grad_region(g), slot.state));
    }
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

  EngineOptions options_ = [] {
    EngineOptions options;
    options.stage = 3;
    options.alignment_elements = 4;
    options.sub_group_size = 40;
    options.offload_optimizer.device = config::OffloadDevice::kCpu;
    options.offload_optimizer.nvme_path = "/nvme";
    return options;
  }();
  bool gradients_held_ = true;
  RecordingOptimizer optimizer_;
  std::unique_ptr<DeviceContext> context_;
  StatePolicy policy_;
  std::unique_ptr<StateStorage> storage_;
  std::unique_ptr<HostOptimizer> host_;
};

TEST_F(HostOptimizerTest, CpuOffloadStepsEverySubGroupAndRefreshesTheParameters) {
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

TEST_F(HostOptimizerTest, NvmeGivesTheSameValuesWithEveryPipelineSetting) {
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

TEST_F(HostOptimizerTest, PartialOffloadStepsTheDeviceSubGroupsToo) {
  options_.offload_optimizer.ratio = 0.5;
  options_.sub_group_size = 16;
  make({16, 16, 16, 16});
  ASSERT_EQ(storage_->device_groups(), 2u);
  step_once();
  expect_stepped();
  EXPECT_EQ(optimizer_.chunk_sizes.size(), 4u);  // two device chunks, then one per host group
}

TEST_F(HostOptimizerTest, ParamsFromMasterFollowsARewrittenMaster) {
  options_.bf16.enabled = true;
  make({20, 36});
  for (UnitId u = 0; u < units(); ++u)
    std::fill_n(storage_->owned_params(u), storage_->unit(u).owned_count, 0.25f + u);
  host_->params_from_master();
  for (UnitId u = 0; u < units(); ++u)
    EXPECT_EQ(compute_of(u), std::vector<float>(storage_->unit(u).owned_count, 0.25f + u));
  EXPECT_TRUE(optimizer_.chunk_sizes.empty());
}

TEST_F(HostOptimizerTest, APlanAllocatesTheStepsWorkspaceAndStepsNothing) {
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

TEST_F(HostOptimizerTest, SlotsAreSizedByTheSubGroupsTheyHold) {
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

}  // namespace
}  // namespace zero
