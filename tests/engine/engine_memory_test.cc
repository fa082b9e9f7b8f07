// Memory: per-rank ledger bytes by category equal the ZeRO formula exactly, at every stage and
// world size 1, 2, 4; a planning allocator records the same sequence without memory.
#include <gtest/gtest.h>

#include <mutex>

#include "ledger_checks.h"
#include "test_model.h"
#include "zero/comm/thread_communicator.h"
#include "zero/engine/memory_formula.h"

namespace zero::testing {
namespace {

using Measured = MeasuredModelStates;

Measured measure(int stage, int world, std::size_t persistence) {
  Measured measured;
  std::mutex mutex;
  run_ranks(world, [&](Communicator& comm) {
    EngineOptions options = parity_options(stage, 1);
    options.param_persistence_threshold = persistence;
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    TinyStack model;
    model.register_units(*engine);
    for (int step = 0; step < 2; ++step) {
      model.micro_step(*engine, make_batch({}, step, comm.rank() * 4, 4));
      engine->step();
    }
    const MeasuredModelStates here = check_ledger_against_formula(*engine);
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      measured = here;
    }
  });
  return measured;
}

class StageWorld : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(StageWorld, LedgerEqualsFormula) {
  const auto [stage, world] = GetParam();
  measure(stage, world, 130);
  measure(stage, world, 0);
}

INSTANTIATE_TEST_SUITE_P(All, StageWorld,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2, 4)));

TEST(EngineMemory, StageThreeAtWorldFourHoldsAQuarterOfStageZero) {
  const Measured stage0 = measure(0, 4, 0);
  const Measured stage3 = measure(3, 4, 0);
  EXPECT_EQ(4 * stage3.model.total(), stage0.model.total());
  // With stage3_max_live_parameters = 2500, never the whole model is gathered at once.
  EXPECT_LT(stage3.params_peak, stage0.model.params);
  EXPECT_GT(stage3.params_peak, 0);
}

TEST(EngineMemory, StageThreePrefetchKeepsTheNextUnitInFlight) {
  // Blocks are the largest units (1200 elements, 1216 padded at W = 2). Without overlap nothing is
  // prefetched: at most one unit is gathered. With overlap the next units in the recorded order
  // are gathered while the current one computes: each gather issues units while it has issued
  // fewer than stage3_prefetch_bucket_size elements, so a bucket smaller than a block (1) still
  // prefetches one, as DeepSpeed does; stage3_max_live_parameters (2500) caps it at two blocks.
  struct Case {
    bool overlap;
    std::size_t bucket;
  };
  for (const Case& c : {Case{false, 1300}, Case{true, 1300}, Case{true, 1}}) {
    run_ranks(2, [&](Communicator& comm) {
      EngineOptions options = parity_options(3, 1);
      options.param_persistence_threshold = 0;
      options.overlap_comm = c.overlap;
      options.prefetch_bucket_size = c.bucket;
      std::unique_ptr<Engine> engine = make_engine(options, comm);
      TinyStack model;
      model.register_units(*engine);
      for (int step = 0; step < 3; ++step) {
        model.micro_step(*engine, make_batch({}, step, comm.rank() * 4, 4));
        engine->step();
      }
      const std::int64_t peak =
          engine->ledger().entry(MemorySpace::kDevice, MemoryCategory::kParams).peak_bytes;
      SCOPED_TRACE("overlap " + std::to_string(c.overlap) + ", bucket " + std::to_string(c.bucket));
      if (c.overlap)
        EXPECT_GE(peak, 2 * 4 * 1216);
      else
        EXPECT_EQ(peak, 4 * 1216);
      EXPECT_LE(peak, 4 * static_cast<std::int64_t>(options.max_live_parameters));
    });
  }
}

// The engine protocol of TinyStack::micro_step without the arithmetic: what a planner runs.
void plan_micro_step(Engine& engine, const std::vector<UnitId>& units) {
  for (std::size_t i = 0; i + 1 < units.size(); ++i) engine.gather(units[i]).release();
  GatheredUnit head = engine.gather(units.back());
  engine.grads(units.back());
  head.release();
  engine.reduce_grads(units.back());
  for (std::size_t i = units.size() - 1; i-- > 0;) {
    GatheredUnit p = engine.gather(units[i]);
    engine.grads(units[i]);
    p.release();
    engine.reduce_grads(units[i]);
  }
}

TEST(EngineMemory, PlannedPeaksEqualMeasuredPeaks) {
  for (int stage = 0; stage <= 3; ++stage) {
    run_ranks(2, [&](Communicator& comm) {
      EngineOptions options = parity_options(stage, 2);
      options.overlap_comm = false;  // frees happen at deterministic points
      std::unique_ptr<DeviceContext> planner = make_planning_context();
      MemoryLedger& planned_ledger = planner->ledger();
      const std::unique_ptr<Engine> planned_owner =
          make_engine(options, comm, {.context = planner.get()});
      Engine& planned = *planned_owner;
      TinyStack plan_model;
      plan_model.register_units(planned);
      std::unique_ptr<Engine> real = make_engine(options, comm);
      TinyStack model;
      model.register_units(*real);
      for (int micro = 0; micro < 4; ++micro) {
        plan_micro_step(planned, plan_model.units());
        planned.step();
        model.micro_step(*real, make_batch({}, micro, comm.rank() * 4, 4));
        real->step();
      }
      for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
        const auto category = static_cast<MemoryCategory>(c);
        const LedgerEntry plan = planned_ledger.entry(MemorySpace::kDevice, category);
        const LedgerEntry run = real->ledger().entry(MemorySpace::kDevice, category);
        EXPECT_EQ(plan.peak_bytes, run.peak_bytes) << "stage " << stage << " " << name_of(category);
        EXPECT_EQ(plan.current_bytes, run.current_bytes)
            << "stage " << stage << " " << name_of(category);
      }
      EXPECT_EQ(planned_ledger.space_total(MemorySpace::kDevice).peak_bytes,
                real->ledger().space_total(MemorySpace::kDevice).peak_bytes);
    });
  }
}

TEST(EngineMemory, AllgatherStagingOnlyForUnitsAboveTheBucket) {
  const std::vector<std::size_t> sizes = {312, 1200, 1200, 1200, 125};  // TinyStack's units
  EngineOptions options = parity_options(1, 1);  // allgather_bucket_size = 300
  EXPECT_EQ(allgather_chunk_elements(options, 4), 64u);
  EXPECT_EQ(allgather_staging_elements(options, sizes, 4), 256u);  // the parity runs chunk
  EXPECT_EQ(allgather_staging_elements(options, sizes, 1), 0u);
  options.allgather_bucket_size = 500'000'000;
  EXPECT_EQ(allgather_staging_elements(options, sizes, 4), 0u);  // every unit in place
  options = parity_options(3, 1);
  EXPECT_EQ(allgather_staging_elements(options, sizes, 4), 0u);  // stage 3 gathers per unit
}

TEST(EngineMemory, FormulaMatchesTheZeroPaper) {
  // Ψ = 1000 elements (padded already), W = 4, Adam: 16Ψ at stage 0, 4Ψ + 12Ψ/4 at stage 1,
  // 2·... in fp32: params + grads + moments.
  const std::vector<std::size_t> sizes = {1024};
  EXPECT_EQ(model_state_bytes(0, sizes, 4, 16, DType::kFloat32, 2).total(), 16 * 1024);
  EXPECT_EQ(model_state_bytes(1, sizes, 4, 16, DType::kFloat32, 2).total(), 8 * 1024 + 8 * 256);
  EXPECT_EQ(model_state_bytes(2, sizes, 4, 16, DType::kFloat32, 2).total(), 4 * 1024 + 12 * 256);
  EXPECT_EQ(model_state_bytes(3, sizes, 4, 16, DType::kFloat32, 2).total(), 16 * 256);
  // Mixed precision (bf16 compute): 2Ψ + 2Ψ + 12Ψ/W at stage 2... the paper's 2 + 2 + K.
  const ModelStateBytes bf16 = model_state_bytes(2, sizes, 4, 16, DType::kBFloat16, 2);
  EXPECT_EQ(bf16.params, 2 * 1024);
  EXPECT_EQ(bf16.grad_shard + bf16.master_params + bf16.optimizer_state, 16 * 256);
  // 16-bit accumulation (fp16, or bf16 with grad_accum_dtype bf16): the paper's 2Ψ+2Ψ+12Ψ,
  // 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N; fp32 accumulation adds 2Ψ (stages 0-1) or 2Ψ/N (stages 2-3).
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    auto total = [&](int stage, DType accumulate) {
      return model_state_bytes(stage, sizes, 4, 16, dtype, 2, accumulate).total();
    };
    EXPECT_EQ(total(0, dtype), 16 * 1024);
    EXPECT_EQ(total(1, dtype), 4 * 1024 + 12 * 256);
    EXPECT_EQ(total(2, dtype), 2 * 1024 + 14 * 256);
    EXPECT_EQ(total(3, dtype), 16 * 256);
    EXPECT_EQ(total(0, DType::kFloat32), 18 * 1024);
    EXPECT_EQ(total(1, DType::kFloat32), 6 * 1024 + 12 * 256);
    EXPECT_EQ(total(2, DType::kFloat32), 2 * 1024 + 16 * 256);
    EXPECT_EQ(total(3, DType::kFloat32), 18 * 256);
  }
}

TEST(EngineMemory, PlanningAllocatorRecordsTheSameModelStates) {
  for (int stage = 0; stage <= 3; ++stage) {
    run_ranks(2, [&](Communicator& comm) {
      EngineOptions options = parity_options(stage, 1);
      std::unique_ptr<DeviceContext> planner = make_planning_context();
      MemoryLedger& planned_ledger = planner->ledger();
      std::unique_ptr<Engine> planned = make_engine(options, comm, {.context = planner.get()});
      TinyStack planned_model;
      planned_model.register_units(*planned);
      planned->initialize();
      std::unique_ptr<Engine> real = make_engine(options, comm);
      TinyStack real_model;
      real_model.register_units(*real);
      real->initialize();
      for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
        const auto category = static_cast<MemoryCategory>(c);
        if (category == MemoryCategory::kWorkspace) continue;  // init staging differs
        EXPECT_EQ(planned_ledger.entry(MemorySpace::kDevice, category).current_bytes,
                  real->ledger().entry(MemorySpace::kDevice, category).current_bytes)
            << "stage " << stage << " " << name_of(category);
      }
    });
  }
}

}  // namespace
}  // namespace zero::testing
