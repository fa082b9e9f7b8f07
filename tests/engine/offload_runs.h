// The offload tests' runs (engine_offload_test, engine_sub_group_test, engine_grad_swap_test):
// TinyStack trained with an offload mode, and the bitwise comparison of two runs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "memory_swap_store.h"
#include "offload_modes.h"
#include "test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {

// Losses, grad norms and final parameters equal bit for bit; `what` names the run.
inline void expect_bitwise(const TrainResult& result, const TrainResult& expected,
                           const std::string& what) {
  ASSERT_EQ(result.losses.size(), expected.losses.size()) << what;
  for (std::size_t s = 0; s < expected.losses.size(); ++s) {
    EXPECT_EQ(result.losses[s], expected.losses[s]) << what << " step " << s;
    EXPECT_EQ(result.grad_norms[s], expected.grad_norms[s]) << what << " step " << s;
  }
  ASSERT_EQ(result.params.size(), expected.params.size()) << what;
  for (std::size_t u = 0; u < expected.params.size(); ++u) {
    ASSERT_EQ(result.params[u].size(), expected.params[u].size()) << what;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < expected.params[u].size(); ++i)
      differ += result.params[u][i] != expected.params[u][i];
    EXPECT_EQ(differ, 0u) << what << " unit " << u << ": elements that differ";
  }
}

// TinyStack (owned at W = 1: embed 320, block.k 1200 (3 blocks), head 128) trained `steps` steps
// of `accumulation` micro-steps on `world` thread ranks in `mode` (apply_offload, max_in_cpu the
// embedding's shard), rank 0's result; nvme through the in-memory store, counted in `counters`.
inline TrainResult run_offloaded_stack(int stage, int world, Mode mode, std::int64_t sub_group_size,
                                       int steps, int accumulation = 1,
                                       SwapStoreCounters* counters = nullptr) {
  EngineOptions options = parity_options(stage, accumulation);
  options.scheduler.total_num_steps = steps;
  apply_offload(options, mode, sub_group_size, 320 / world);
  TrainResult result;
  std::mutex mutex;
  run_ranks(world, [&](Communicator& comm) {
    if (counters != nullptr && comm.rank() == 0) {
      std::lock_guard lock(counters->mutex);
      counters->compute_thread = std::this_thread::get_id();
    }
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory(counters));
    TinyStack model;
    model.register_units(*engine);
    const int rows = 24 / (world * accumulation);
    TrainResult mine = train_steps(comm, *engine, steps, rows, [&](int step, int first) {
      return model.micro_step(*engine, make_batch({}, step, first, rows));
    });
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      result = std::move(mine);
    }
  });
  return result;
}

// A planned micro-step of `units` (a planning context: nothing computed): each unit but the last
// gathered for the forward, then from the last back each gathered, its gradients taken and
// reduced, as TinyStack::micro_step calls the engine.
inline void plan_micro_step(Engine& engine, const std::vector<UnitId>& units) {
  for (std::size_t i = 0; i + 1 < units.size(); ++i) engine.gather(units[i]).release();
  for (std::size_t i = units.size(); i-- > 0;) {
    GatheredUnit p = engine.gather(units[i]);
    engine.grads(units[i]);
    p.release();
    engine.reduce_grads(units[i]);
  }
}

}  // namespace zero::testing
