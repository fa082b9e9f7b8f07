// Mixed-precision GPT-2 runs for the engine tests: the parity configuration in bf16 or fp16, and
// an fp16 run with infs put into one rank's gradients at chosen steps.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpt2_engine_driver.h"
#include "ledger_checks.h"
#include "memory_swap_store.h"
#include "offload_modes.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {

// The GPT-2 parity configuration (gpt2_parity_options) over `steps` steps, in `dtype`: bf16, or
// fp16 with the dynamic loss scaler from 2^12 (DeepSpeed's 2^16 overflows the tied embedding's
// gradient of this model at once), or fp32.
inline GPT2Run mixed_run(DType dtype, int stage, int accumulation, int steps = 20) {
  GPT2Run run;
  run.steps = steps;
  run.options = gpt2_parity_options(stage, accumulation);
  run.options.scheduler.total_num_steps = steps;
  if (dtype == DType::kBFloat16) run.options.bf16.enabled = true;
  if (dtype == DType::kFloat16) {
    run.options.fp16.enabled = true;
    run.options.fp16.initial_scale_power = 12;
  }
  return run;
}

// What an fp16 run with induced overflows saw, boundary by boundary (rank 0; every rank is
// checked to agree).
struct OverflowRun {
  std::vector<bool> overflows;  // Engine::last_step_overflowed() after each boundary
  std::vector<double> scales;   // Engine::loss_scale() after each boundary
  std::int64_t skipped_steps = 0;
  std::int64_t global_steps = 0;
  bool params_unchanged_on_skips = true;
  bool lr_unchanged_on_skips = true;
};

// fp16 GPT-2 (stage, world, one micro-step per step) with the dynamic scaler (2^power,
// `window`, `hysteresis`, `consecutive`, min scale 1); at each step in `inject`, rank 1 (rank 0
// at world 1) puts an inf into its gradients of block h.0 before its backward.
inline OverflowRun run_with_overflows(int stage, int world, std::vector<int> inject, int power,
                                      int window, int hysteresis, bool consecutive, int steps) {
  std::vector<OverflowRun> ranks(static_cast<std::size_t>(world));
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    GPT2Run run = mixed_run(DType::kFloat16, stage, 1, steps);
    run.options.fp16.initial_scale_power = power;
    run.options.fp16.loss_scale_window = window;
    run.options.fp16.hysteresis = hysteresis;
    run.options.fp16.consecutive_hysteresis = consecutive;
    run.options.fp16.min_loss_scale = 1;
    std::unique_ptr<Engine> engine = make_engine(run.options, comm);
    const int rows = run.global_batch / world;
    GPT2EngineDriver model(*engine, run.config, rows, run.seq_len, run.seed);
    const UnitId block = engine->unit("h.0");
    OverflowRun mine;
    for (int step = 0; step < steps; ++step) {
      const bool injected = std::find(inject.begin(), inject.end(), step) != inject.end();
      std::vector<std::vector<float>> before;
      if (injected) before = gathered_parameters(*engine);
      const double lr_before = engine->lr();
      if (injected && comm.rank() == world - 1) {
        GradientBuffer grads = engine->grads(block);
        const float inf = std::numeric_limits<float>::infinity();
        convert(&inf, DType::kFloat32, static_cast<char*>(grads.raw) + 5 * size_of(grads.dtype),
                grads.dtype, 1);
      }
      const int first = comm.rank() * rows;
      const gpt2::DropoutKey dropout{run.seed, static_cast<std::uint64_t>(step), first, true};
      model.micro_step(make_token_batch(run.config, run.seq_len, step, first, rows), dropout);
      const bool taken = engine->step();
      mine.overflows.push_back(engine->last_step_overflowed());
      mine.scales.push_back(engine->loss_scale());
      if (taken == engine->last_step_overflowed()) mine.params_unchanged_on_skips = false;
      if (engine->last_step_overflowed()) {
        if (!injected || gathered_parameters(*engine) != before)
          mine.params_unchanged_on_skips = false;
        if (engine->lr() != lr_before) mine.lr_unchanged_on_skips = false;
      }
    }
    mine.skipped_steps = engine->training_state().skipped_steps;
    mine.global_steps = engine->training_state().global_steps;
    ranks[static_cast<std::size_t>(comm.rank())] = std::move(mine);
  });
  for (const OverflowRun& other : ranks) {
    EXPECT_EQ(other.overflows, ranks[0].overflows) << "ranks disagree on overflows";
    EXPECT_EQ(other.scales, ranks[0].scales) << "ranks disagree on the loss scale";
  }
  return ranks[0];
}

// `run` with an offload `mode` (apply_offload) on `world` thread ranks, one OpenMP thread each,
// nvme through the in-memory store counting rank 0's traffic in `counters`: rank 0's result.
inline TrainResult train_gpt2_offloaded(GPT2Run run, int world, Mode mode,
                                        std::int64_t sub_group_size, std::int64_t max_in_cpu,
                                        SwapStoreCounters* counters = nullptr) {
  apply_offload(run.options, mode, sub_group_size, max_in_cpu);
  const int accumulation = run.options.gradient_accumulation_steps;
  TrainResult result;
  std::mutex mutex;
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    const int rows = run.global_batch / (world * accumulation);
    std::unique_ptr<Engine> engine = make_engine(run.options, comm);
    engine->set_swap_store_factory(
        memory_swap_store_factory(comm.rank() == 0 ? counters : nullptr));
    GPT2EngineDriver model(*engine, run.config, rows, run.seq_len, run.seed);
    TrainResult mine = train_steps(comm, *engine, run.steps, rows, [&](int step, int first) {
      const gpt2::DropoutKey dropout{run.seed, static_cast<std::uint64_t>(step), first, true};
      return model.micro_step(make_token_batch(run.config, run.seq_len, step, first, rows),
                              dropout);
    });
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      result = std::move(mine);
    }
  });
  return result;
}

}  // namespace zero::testing
