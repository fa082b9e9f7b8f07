// Planning without peers: one process plays rank r of a world of N alone (planning device context
// + PlanningCommunicator) and its ledger equals, byte for byte, rank r's ledger in a real run of N
// threads, for every stage and world 1, 2, 4, issuing as many collectives; in fp32 (MLP stack)
// and in bf16 / fp16 (GPT-2, gpt2::EngineModel itself on the planning allocator).
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "gpt2_engine_driver.h"
#include "mixed_precision_runs.h"
#include "test_model.h"
#include "zero/comm/planning_communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/device_context.h"

namespace zero::testing {
namespace {

// Current and peak bytes of every (space, category) and every space total.
struct LedgerSnapshot {
  std::array<std::array<LedgerEntry, kNumMemoryCategories>, kNumMemorySpaces> entries{};
  std::array<LedgerEntry, kNumMemorySpaces> totals{};
};

LedgerSnapshot snapshot(const MemoryLedger& ledger) {
  LedgerSnapshot result;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    result.totals[s] = ledger.space_total(space);
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c)
      result.entries[s][c] = ledger.entry(space, static_cast<MemoryCategory>(c));
  }
  return result;
}

void expect_same(const LedgerSnapshot& plan, const LedgerSnapshot& run, const std::string& what) {
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
      const std::string where = what + " " + std::string(name_of(space)) + "/" +
                                std::string(name_of(static_cast<MemoryCategory>(c)));
      EXPECT_EQ(plan.entries[s][c].current_bytes, run.entries[s][c].current_bytes) << where;
      EXPECT_EQ(plan.entries[s][c].peak_bytes, run.entries[s][c].peak_bytes) << where;
    }
    EXPECT_EQ(plan.totals[s].peak_bytes, run.totals[s].peak_bytes) << what << " " << name_of(space);
  }
}

// TinyStack::micro_step's engine protocol without the arithmetic (planned buffers have no memory).
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

constexpr int kMicroSteps = 4;

EngineOptions planning_options(int stage) {
  EngineOptions options = parity_options(stage, 2);
  options.overlap_comm = false;  // frees happen at deterministic points
  return options;
}

TEST(EnginePlanning, PeerFreePlanOfEachRankEqualsTheRealRun) {
  for (int world : {1, 2, 4}) {
    for (int stage = 0; stage <= 3; ++stage) {
      const EngineOptions options = planning_options(stage);
      std::vector<LedgerSnapshot> real(static_cast<std::size_t>(world));
      std::vector<std::uint64_t> collectives(static_cast<std::size_t>(world));
      run_ranks(world, [&](Communicator& comm) {
        std::unique_ptr<Engine> engine = make_engine(options, comm);
        TinyStack model;
        model.register_units(*engine);
        for (int micro = 0; micro < kMicroSteps; ++micro) {
          model.micro_step(*engine, make_batch({}, micro, comm.rank() * 2, 2));
          engine->step();
        }
        comm.synchronize();
        real[static_cast<std::size_t>(comm.rank())] = snapshot(engine->ledger());
        collectives[static_cast<std::size_t>(comm.rank())] = comm.sequence();
      });
      for (int rank = 0; rank < world; ++rank) {
        PlanningCommunicator comm(rank, world);
        std::unique_ptr<DeviceContext> context = make_planning_context();
        {
          const std::unique_ptr<Engine> engine_owner =
              make_engine(options, comm, {.context = context.get()});
          Engine& engine = *engine_owner;
          TinyStack model;
          model.register_units(engine);
          for (int micro = 0; micro < kMicroSteps; ++micro) {
            plan_micro_step(engine, model.units());
            engine.step();
          }
          const std::string what = "world " + std::to_string(world) + " stage " +
                                   std::to_string(stage) + " rank " + std::to_string(rank);
          expect_same(snapshot(context->ledger()), real[static_cast<std::size_t>(rank)], what);
          // The same collectives, recorded instead of run.
          comm.synchronize();
          EXPECT_EQ(comm.sequence(), collectives[static_cast<std::size_t>(rank)]) << what;
          EXPECT_EQ(comm.calls().size(), comm.sequence()) << what;
          if (world > 1) {
            EXPECT_GT(comm.sequence(), 0u) << what;
          }
        }
        EXPECT_EQ(context->ledger().space_total(MemorySpace::kDevice).current_bytes, 0);
      }
    }
  }
}

TEST(EnginePlanning, PlanningCommunicatorRecordsCollectivesInOrder) {
  PlanningCommunicator comm(2, 4);
  EXPECT_EQ(comm.rank(), 2);
  EXPECT_EQ(comm.world_size(), 4);
  comm.all_reduce(nullptr, nullptr, 10, DType::kFloat32, ReduceOp::kSum, "grads a");
  comm.all_gather(nullptr, nullptr, 3, DType::kFloat32, "gather b");
  comm.synchronize();
  const std::vector<CollectiveInfo> calls = comm.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].to_string(), "#1 all_reduce(count=10, fp32, sum) 'grads a'");
  EXPECT_EQ(calls[1].to_string(), "#2 all_gather(count=3, fp32) 'gather b'");
  EXPECT_THROW(PlanningCommunicator(4, 4), Error);
}

// The same in 16 bits: GPT-2 (tiny) in bf16 (fp32 accumulation) and fp16 (fp16 accumulation,
// dynamic loss scale), two steps of two micro-steps.
TEST(EnginePlanning, PeerFreePlanEqualsTheRealRunInSixteenBits) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (int world : {1, 2, 4})
      for (int stage = 0; stage <= 3; ++stage) {
        GPT2Run run = mixed_run(dtype, stage, 2);
        run.options.overlap_comm = false;
        const int rows = run.global_batch / (world * 2);
        std::vector<LedgerSnapshot> real(static_cast<std::size_t>(world));
        std::vector<std::uint64_t> collectives(static_cast<std::size_t>(world));
        run_ranks(world, [&](Communicator& comm) {
          std::unique_ptr<Engine> engine = make_engine(run.options, comm);
          GPT2EngineDriver model(*engine, run.config, rows, run.seq_len, run.seed);
          for (int micro = 0; micro < kMicroSteps; ++micro) {
            const int first = comm.rank() * rows;
            model.micro_step(make_token_batch(run.config, run.seq_len, micro, first, rows),
                             {run.seed, static_cast<std::uint64_t>(micro), first, true});
            engine->step();
          }
          comm.synchronize();
          real[static_cast<std::size_t>(comm.rank())] = snapshot(engine->ledger());
          collectives[static_cast<std::size_t>(comm.rank())] = comm.sequence();
        });
        for (int rank = 0; rank < world; ++rank) {
          PlanningCommunicator comm(rank, world);
          std::unique_ptr<DeviceContext> context = make_planning_context();
          const std::unique_ptr<Engine> engine_owner =
              make_engine(run.options, comm, {.context = context.get()});
          Engine& engine = *engine_owner;
          // The model itself (gpt2::EngineModel), its activations recorded in a ledger of their own
          // as the driver keeps them out of the engine's: on a planning allocator GPT2Compute
          // computes nothing, so the gathers, gradients and reductions run in the model's order.
          MemoryLedger activation_ledger;
          PlanningAllocator activations(activation_ledger, MemorySpace::kDevice);
          gpt2::EngineModel model(engine, run.config, rows, run.seq_len, run.seed, activations);
          const std::vector<int> tokens(static_cast<std::size_t>(rows * run.seq_len), 0);
          for (int micro = 0; micro < kMicroSteps; ++micro) {
            model.train_micro_step(tokens, tokens, {});
            engine.step();
          }
          const std::string what = std::string(name_of(dtype)) + " world " + std::to_string(world) +
                                   " stage " + std::to_string(stage) + " rank " +
                                   std::to_string(rank);
          expect_same(snapshot(context->ledger()), real[static_cast<std::size_t>(rank)], what);
          comm.synchronize();
          EXPECT_EQ(comm.sequence(), collectives[static_cast<std::size_t>(rank)]) << what;
        }
      }
}

}  // namespace
}  // namespace zero::testing
