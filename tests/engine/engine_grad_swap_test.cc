// ZeRO-Infinity's swapped gradients: with offload_optimizer nvme the fp32 gradient partition lives
// in swap regions (the host holds two sub-group windows), the run stays bitwise the run with the
// partition in host memory (stages 1-3, worlds 1-2, with gradient accumulation), the gradients of
// the two sub-groups the backward reaches last are stepped from memory, and the step of
// sub-group k overlaps the read of k+1 and the write of k-1 (checked on the order of the calls a
// recording in-memory store sees, not on timing). Checkpoint shard files stream from the swap
// regions one sub-group at a time and equal the files of the run with the states in host memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory_swap_store.h"
#include "offload_runs.h"
#include "test_model.h"
#include "zero/checkpoint/checkpoint_index.h"
#include "zero/checkpoint/checkpoint_save.h"
#include "zero/comm/thread_communicator.h"
#include "zero/optim/optimizers.h"

namespace zero::testing {
namespace {

constexpr int kSteps = 4;
// TinyStack's owned elements at W = 1: embed 320, block.k 1200 (3 blocks), head 128. With
// sub_group_size 1300 each unit is its own sub-group at W = 1.
constexpr std::int64_t kOwned = 320 + 3 * 1200 + 128;

EngineOptions offload_options(int stage, int accumulation, bool nvme) {
  EngineOptions options = parity_options(stage, accumulation);
  options.scheduler.total_num_steps = kSteps;
  options.sub_group_size = 1300;
  options.offload_optimizer.device =
      nvme ? config::OffloadDevice::kNvme : config::OffloadDevice::kCpu;
  options.offload_optimizer.nvme_path = "/grad-swap-test";
  options.offload_optimizer.pipeline_read = true;
  options.offload_optimizer.pipeline_write = true;
  return options;
}

// An optimizer that hands everything to `inner_`; the tests' optimizers below override step().
class ForwardingOptimizer : public Optimizer {
 public:
  explicit ForwardingOptimizer(std::unique_ptr<Optimizer> inner) : inner_(std::move(inner)) {}
  std::string_view name() const override { return inner_->name(); }
  int states_per_element() const override { return inner_->states_per_element(); }
  std::vector<std::string> state_names() const override { return inner_->state_names(); }
  double lr() const override { return inner_->lr(); }
  double beta1() const override { return inner_->beta1(); }

 protected:
  std::unique_ptr<Optimizer> inner_;
};

// Logs "step" for every sub-group the engine steps, into the store's event log.
class RecordingOptimizer final : public ForwardingOptimizer {
 public:
  RecordingOptimizer(std::unique_ptr<Optimizer> inner, SwapStoreCounters& log)
      : ForwardingOptimizer(std::move(inner)), log_(log) {}
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override {
    log_.record("step");
    inner_->step(chunks, step);
  }

 private:
  SwapStoreCounters& log_;
};

struct SwapRun {
  TrainResult result;
  LedgerEntry host_grads, nvme_grads, host_workspace;
  std::int64_t save_workspace = 0;      // host workspace the checkpoint save added at its peak
  std::int64_t backward_workspace = 0;  // host workspace after the last backward, before step()
};

// Trains kSteps; with `checkpoint`, saves the engine there (tag "saved") afterwards.
SwapRun run(const EngineOptions& options, int world, SwapStoreCounters* counters = nullptr,
            const std::filesystem::path& checkpoint = {}) {
  SwapRun out;
  std::mutex mutex;
  run_ranks(world, [&](Communicator& comm) {
    SwapStoreCounters own;
    SwapStoreCounters& log = counters != nullptr && comm.rank() == 0 ? *counters : own;
    Engine engine(
        options, comm,
        std::make_unique<RecordingOptimizer>(optim::make_optimizer(options.optimizer), log));
    engine.set_swap_store_factory(memory_swap_store_factory(&log));
    TinyStack model;
    model.register_units(engine);
    const int rows = 24 / (world * options.gradient_accumulation_steps);
    std::int64_t backward_workspace = 0;
    TrainResult mine = train_steps(comm, engine, kSteps, rows, [&](int step, int first) {
      const double loss = model.micro_step(engine, make_batch({}, step, first, rows));
      backward_workspace =
          engine.ledger().entry(MemorySpace::kHost, MemoryCategory::kWorkspace).current_bytes;
      return loss;
    });
    std::int64_t save_workspace = 0;
    if (!checkpoint.empty()) {
      MemoryLedger& ledger = engine.ledger();
      const std::int64_t before =
          ledger.entry(MemorySpace::kHost, MemoryCategory::kWorkspace).current_bytes;
      ledger.reset_peaks();
      checkpoint::CheckpointSave save(comm, checkpoint, "saved");
      save.write_engine(engine);
      save.commit();
      save_workspace =
          ledger.entry(MemorySpace::kHost, MemoryCategory::kWorkspace).peak_bytes - before;
    }
    if (comm.rank() != 0) return;
    std::lock_guard lock(mutex);
    out.result = std::move(mine);
    out.save_workspace = save_workspace;
    out.backward_workspace = backward_workspace;
    out.host_grads = engine.ledger().entry(MemorySpace::kHost, MemoryCategory::kGradShard);
    out.nvme_grads = engine.ledger().entry(MemorySpace::kNvme, MemoryCategory::kGradShard);
    out.host_workspace = engine.ledger().entry(MemorySpace::kHost, MemoryCategory::kWorkspace);
  });
  return out;
}

TEST(EngineGradSwap, BitwiseTheRunWithTheGradientsInHostMemory) {
  for (int stage : {1, 2, 3})
    for (int world : {1, 2})
      for (int accumulation : {1, 3}) {
        const std::string what = "stage " + std::to_string(stage) + " world " +
                                 std::to_string(world) + " accumulation " +
                                 std::to_string(accumulation);
        const SwapRun host = run(offload_options(stage, accumulation, false), world);
        EXPECT_LT(host.result.losses.back(), host.result.losses.front()) << what;
        const SwapRun swapped = run(offload_options(stage, accumulation, true), world);
        expect_bitwise(swapped.result, host.result, what);
        EXPECT_GT(host.host_grads.current_bytes, 0) << what;
      }
}

// With one or two slots the step takes one window (or two when sized alike) and steps its
// sub-group first, out of order: each sub-group's update is its own, so the run is the same.
TEST(EngineGradSwap, BitwiseWithEveryPipelineSetting) {
  for (int world : {1, 2}) {
    const SwapRun host = run(offload_options(3, 1, false), world);
    for (const bool read : {false, true})
      for (const bool write : {false, true}) {
        EngineOptions options = offload_options(3, 1, true);
        options.offload_optimizer.pipeline_read = read;
        options.offload_optimizer.pipeline_write = write;
        expect_bitwise(run(options, world).result, host.result,
                       "pipeline_read " + std::to_string(read) + " pipeline_write " +
                           std::to_string(write) + " world " + std::to_string(world));
      }
  }
}

TEST(EngineGradSwap, TheHostHoldsTwoSubGroupWindowsNotThePartition) {
  SwapStoreCounters counters;
  const SwapRun swapped = run(offload_options(2, 1, true), 1, &counters);
  EXPECT_EQ(swapped.host_grads.peak_bytes, 0);
  EXPECT_EQ(swapped.nvme_grads.current_bytes, 4 * kOwned);
  // After the backward the host workspace is the two windows, each as large as one of the step's
  // swap slots so the slots reuse their memory (1200 elements: master 8192, moments 12288,
  // gradients 8192 bytes at the 4096-byte alignment, plus the alignment slack). The step takes
  // them as its first two slots.
  EXPECT_EQ(swapped.backward_workspace, 2 * (8192 + 12288 + 8192 + 4096));
  EXPECT_EQ(swapped.host_workspace.current_bytes, 0);
  // Every step reads each sub-group's master and moments once (12 bytes per owned element) and
  // writes them (12), plus the initial master and moments. The gradients (4) are written once
  // and read once, except where the backward ends: it reaches embed (320) last and block 0 (1200)
  // before it, and the step takes their windows, so embed's are neither written nor read and
  // block 0's (written when its window was left) are not read. The blocks of a sub-group arrive
  // together, so none is read back during the backward.
  constexpr std::int64_t kEmbed = 320, kBlock = 1200;
  EXPECT_EQ(counters.bytes_read, (16 * kOwned - 4 * (kEmbed + kBlock)) * kSteps);
  EXPECT_EQ(counters.bytes_written, (16 * kOwned - 4 * kEmbed) * kSteps + 12 * kOwned);
}

// The position of the first `event` after `from`; events.size() when absent.
std::size_t find_after(const std::vector<std::string>& events, std::size_t from,
                       const std::string& event) {
  const auto it =
      std::find(events.begin() + static_cast<std::ptrdiff_t>(from) + 1, events.end(), event);
  return static_cast<std::size_t>(it - events.begin());
}

TEST(EngineGradSwap, TheStepOfAGroupOverlapsTheNextReadAndThePreviousWrite) {
  SwapStoreCounters counters;
  counters.record_events = true;
  run(offload_options(2, 1, true), 1, &counters);
  const std::vector<std::string>& events = counters.events;
  // The last optimizer step: its five "step" events (one per sub-group).
  std::vector<std::size_t> steps;
  for (std::size_t i = 0; i < events.size(); ++i)
    if (events[i] == "step") steps.push_back(i);
  ASSERT_GE(steps.size(), 5u);
  steps.erase(steps.begin(), steps.end() - 5);
  for (std::size_t k = 1; k + 1 < steps.size(); ++k) {
    const std::string next = " sub-group " + std::to_string(k + 1);
    const std::string previous = " sub-group " + std::to_string(k - 1);
    for (const char* region : {"master_params", "optimizer_state", "grad_shard"}) {
      // Read of k+1: issued between the steps of k-1 and k, waited for after the step of k.
      const std::size_t read =
          find_after(events, steps[k - 1], std::string("read ") + region + next);
      EXPECT_LT(read, steps[k]) << region << next;
      EXPECT_GT(find_after(events, steps[k - 1], std::string("wait read ") + region + next),
                steps[k])
          << region << next;
    }
    for (const char* region : {"master_params", "optimizer_state"}) {
      // Write of k-1: issued before the step of k, waited for after it.
      const std::size_t write =
          find_after(events, steps[k - 1], std::string("write ") + region + previous);
      EXPECT_LT(write, steps[k]) << region << previous;
      EXPECT_GT(find_after(events, steps[k - 1], std::string("wait write ") + region + previous),
                steps[k])
          << region << previous;
    }
  }
}

// Holds the step of one sub-group (the `gated`-th step() call of the first optimizer step) until
// open() or 10 s; counts the sub-groups stepped.
class GatedOptimizer final : public ForwardingOptimizer {
 public:
  GatedOptimizer(std::unique_ptr<Optimizer> inner, int gated)
      : ForwardingOptimizer(std::move(inner)), gated_(gated) {}
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override {
    const bool gated = ++calls_ == gated_;
    if (gated) {
      std::unique_lock lock(mutex_);
      timed_out_ = !opened_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
    }
    inner_->step(chunks, step);
    if (gated) {
      std::lock_guard lock(mutex_);
      passed_ = true;
    }
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    opened_.notify_all();
  }
  bool passed() {  // the gated sub-group is stepped
    std::lock_guard lock(mutex_);
    return passed_;
  }
  bool timed_out() {
    std::lock_guard lock(mutex_);
    return timed_out_;
  }

 private:
  int gated_;
  std::atomic<int> calls_{0};
  std::mutex mutex_;
  std::condition_variable opened_;
  bool open_ = false, passed_ = false, timed_out_ = false;
};

// Stage 3: step() returns while the step runs on a worker in the forward's order, and the next
// forward's gather of the first unit waits only for its own sub-group: here it returns while the
// last sub-group's step is held (the serial step would hold step() itself until the timeout).
// The run stays bitwise the run without offload.
TEST(EngineOverlappedStep, TheNextForwardWaitsOnlyForItsUnitsSubGroup) {
  for (int world : {1, 2}) {
    const std::string what = "world " + std::to_string(world);
    EngineOptions reference = offload_options(3, 1, false);
    reference.offload_optimizer.device = config::OffloadDevice::kNone;
    const SwapRun serial = run(reference, world);
    const EngineOptions options = offload_options(3, 1, true);
    // Host sub-groups: 5 at W = 1 (one unit each), 2 at W = 2 ({embed, block 0}, the rest).
    const int groups = world == 1 ? 5 : 2;
    std::mutex mutex;
    TrainResult overlapped;
    bool held_at_gather = false, timed_out = false;
    run_ranks(world, [&](Communicator& comm) {
      auto gated =
          std::make_unique<GatedOptimizer>(optim::make_optimizer(options.optimizer), groups);
      GatedOptimizer& gate = *gated;
      Engine engine(options, comm, std::move(gated));
      engine.set_swap_store_factory(memory_swap_store_factory());
      TinyStack model;
      model.register_units(engine);
      bool held = false;
      TrainResult mine = train_steps(comm, engine, kSteps, 24 / world, [&](int step, int first) {
        if (step == 1) {  // the first step's last sub-group is still held
          engine.gather(model.units().front()).release();
          held = !gate.passed();
          gate.open();
        }
        return model.micro_step(engine, make_batch({}, step, first, 24 / world));
      });
      if (comm.rank() != 0) return;
      std::lock_guard lock(mutex);
      overlapped = std::move(mine);
      held_at_gather = held;
      timed_out = gate.timed_out();
    });
    EXPECT_TRUE(held_at_gather) << what;
    EXPECT_FALSE(timed_out) << what;
    expect_bitwise(overlapped, serial.result, what);
  }
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << path;
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// The shard files are written from one sub-group read at a time (host workspace: one swap slot,
// not the rank's master and moments) and hold the bytes the run with host-memory states writes.
TEST(EngineNvmeSave, ShardFilesStreamFromTheSwapRegions) {
  const auto root = std::filesystem::temp_directory_path() /
                    ("zero_grad_swap_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  run(offload_options(3, 1, false), 2, nullptr, root / "host");
  const SwapRun swapped = run(offload_options(3, 1, true), 2, nullptr, root / "nvme");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string file = checkpoint::shard_file_name(rank, 2);
    EXPECT_EQ(file_bytes(root / "nvme" / "saved" / file),
              file_bytes(root / "host" / "saved" / file))
        << file;
  }
  // One slot: the largest sub-group at W = 2 (two units, 1200 elements) as master (4960 bytes),
  // moments (9920) and gradients (4960), each rounded to 4096 bytes, plus the alignment slack.
  EXPECT_GT(swapped.save_workspace, 0);
  EXPECT_LE(swapped.save_workspace, 8192 + 12288 + 8192 + 4096);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
