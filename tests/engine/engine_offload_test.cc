// Offload (ZeRO-Offload / ZeRO-Infinity): stages 1-3 × worlds 1, 2 × {optimizer cpu, optimizer +
// params cpu, optimizer nvme, optimizer + params nvme} reproduce the run without offload bit for
// bit, in fp32 (MLP stack) and bf16 (GPT-2); the ledger puts each state in the space the formula
// says (and the device keeps what DeepSpeed's estimator says); a plan records the same
// allocations. nvme runs use an in-memory SwapStore (memory_swap_store.h).
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpt2_engine_driver.h"
#include "ledger_checks.h"
#include "memory_swap_store.h"
#include "mixed_precision_runs.h"
#include "offload_modes.h"
#include "offload_runs.h"
#include "shard_image.h"
#include "test_model.h"
#include "zero/comm/planning_communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/device_context.h"
#include "zero/optim/optimizers.h"

namespace zero::testing {
namespace {

constexpr int kStackSteps = 8;

// Units (W = 1): embed 320, block.k 1200, head 128 owned elements: sub-groups {embed},
// {block.0}, ... at W = 1 and pairs at W = 2 (sub_group_size 1300).
TrainResult run_stack(int stage, int world, Mode mode, int accumulation = 1,
                      SwapStoreCounters* counters = nullptr) {
  return run_offloaded_stack(stage, world, mode, 1300, kStackSteps, accumulation, counters);
}

class StackOffload : public ::testing::TestWithParam<std::tuple<int, int>> {};

// fp32: the offloaded step runs the same arithmetic (an fp32 master equal to the parameters, the
// same optimizer kernel over the same elements, the same reduction and sums), so bitwise.
TEST_P(StackOffload, MatchesTheRunWithoutOffloadBitwise) {
  const auto [stage, world] = GetParam();
  const TrainResult reference = run_stack(stage, world, Mode::kNone);
  EXPECT_LT(reference.losses.back(), reference.losses.front());
  for (Mode mode : kModes) {
    if (stage3_only(mode) && stage != 3) continue;
    expect_bitwise(run_stack(stage, world, mode), reference,
                   "fp32 stage " + std::to_string(stage) + " world " + std::to_string(world) + " " +
                       name_of(mode));
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, StackOffload,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 2)));

TEST(EngineOffload, AccumulationAndSwapTraffic) {
  // Three micro-steps per step: stage 1 reduces once into the host partition, stages 2-3 add
  // every micro-step's reduction there.
  for (int stage : {1, 2, 3}) {
    const TrainResult reference = run_stack(stage, 2, Mode::kNone, 3);
    expect_bitwise(run_stack(stage, 2, Mode::kCpu, 3), reference,
                   "accumulation 3, stage " + std::to_string(stage));
  }
  // nvme: every step reads and writes each sub-group's master and moments once (12 bytes per
  // owned element per direction), writes its accumulated fp32 gradients once and reads them for
  // the step (4 each way), plus the initial write of master and moments; but the step takes the
  // gradients of the two sub-groups the backward reaches last from memory: embed's (320, not
  // written) and block 0's (1200, written when its window was left), and reads neither.
  SwapStoreCounters counters;
  run_stack(2, 1, Mode::kNvme, 1, &counters);
  const std::int64_t owned = 320 + 3 * 1200 + 128, embed = 320, block = 1200;
  EXPECT_EQ(counters.stores, 1);
  EXPECT_EQ(counters.bytes_read, (16 * owned - 4 * (embed + block)) * kStackSteps);
  EXPECT_EQ(counters.bytes_written, (16 * owned - 4 * embed) * kStackSteps + 12 * owned);
}

// Stage 3's parameter shards on NVMe are read ahead: gather() issues the read and the copy stream
// waits for it, so the training thread never waits for one (it did, for every gather and
// prefetch), and the run stays bitwise the run without offload (the in-memory store moves the
// bytes only at wait(): a copy before the wait would read stale bytes).
TEST(EngineOffload, ParameterShardReadsAreWaitedForOffTheTrainingThread) {
  const TrainResult reference = run_stack(3, 1, Mode::kNone);
  for (Mode mode : {Mode::kParamsNvme, Mode::kNvmeParams}) {
    SwapStoreCounters counters;
    expect_bitwise(run_stack(3, 1, mode, 1, &counters), reference, name_of(mode));
    EXPECT_GT(counters.param_read_waits, 3 * kStackSteps) << name_of(mode);
    EXPECT_EQ(counters.param_read_waits_on_compute_thread, 0) << name_of(mode);
  }
}

// GPT-2 in bf16 and fp32. bf16: the device keeps bf16 parameters, the host the fp32 master, moments
// and gradient partition; the arithmetic is the run without offload's (fp32 accumulation is bf16's
// default; conversions are zero::convert's), so bitwise too.
constexpr int kGpt2Steps = 6;

TrainResult run_gpt2(int stage, int world, Mode mode, DType dtype = DType::kBFloat16,
                     int accumulation = 1, SwapStoreCounters* counters = nullptr) {
  // Units (W = 1): embeddings 4608, h.0 / h.1 12704, ln_f 64: sub-groups {embeddings}, {h.0},
  // {h.1, ln_f} at W = 1.
  return train_gpt2_offloaded(mixed_run(dtype, stage, accumulation, kGpt2Steps), world, mode,
                              13'000, 4608 / world, counters);
}

class Gpt2Offload : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(Gpt2Offload, MatchesTheRunWithoutOffloadBitwise) {
  const auto [stage, world] = GetParam();
  for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
    const TrainResult reference = run_gpt2(stage, world, Mode::kNone, dtype);
    for (Mode mode : kModes) {
      if (stage3_only(mode) && stage != 3) continue;
      expect_bitwise(run_gpt2(stage, world, mode, dtype), reference,
                     std::string(zero::name_of(dtype)) + " stage " + std::to_string(stage) +
                         " world " + std::to_string(world) + " " + name_of(mode));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, Gpt2Offload,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 2)));

// Stage 3, optimizer on NVMe: with one micro-step per step and bf16 gradients the swapped
// gradient partition holds the reduced bf16 values (half the fp32 bytes), widened × post where
// they are used, so the run is bitwise the run without offload; with accumulation, or fp32, the
// partition stays fp32. Each step reads and writes every sub-group's master and moments (12 bytes
// per owned element each way), plus their initial write; of the gradients the step takes
// embeddings' and h.0's from the backward's windows (h.0's written when its window was left) and
// reads {h.1, ln_f}'s (12768 elements).
TEST(EngineOffload, Bf16GradientsSwapInHalfTheBytesWithoutAccumulation) {
  constexpr std::int64_t kOwned = 4608 + 2 * 12704 + 64, kH0 = 12704, kLast = 12704 + 64;
  for (int world : {1, 2})
    for (int accumulation : {1, 2})
      for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
        const std::string what = std::string(zero::name_of(dtype)) + " world " +
                                 std::to_string(world) + " accumulation " +
                                 std::to_string(accumulation);
        const TrainResult reference = run_gpt2(3, world, Mode::kNone, dtype, accumulation);
        SwapStoreCounters counters;
        expect_bitwise(run_gpt2(3, world, Mode::kNvme, dtype, accumulation, &counters), reference,
                       what);
        if (world != 1 || accumulation != 1) continue;
        const std::int64_t grad_bytes = dtype == DType::kBFloat16 ? 2 : 4;
        EXPECT_EQ(counters.bytes_read, (12 * kOwned + grad_bytes * kLast) * kGpt2Steps) << what;
        EXPECT_EQ(counters.bytes_written,
                  (12 * kOwned + grad_bytes * (kH0 + kLast)) * kGpt2Steps + 12 * kOwned)
            << what;
      }
}

// fp16 (dynamic loss scale) without accumulation: the swapped partition in fp16 gives the run
// with the fp32 partition in host memory, bitwise (the run without offload accumulates in fp16).
TEST(EngineOffload, Fp16GradientsSwappedInSixteenBitsGiveTheHostPartitionsRun) {
  for (int world : {1, 2})
    expect_bitwise(run_gpt2(3, world, Mode::kNvme, DType::kFloat16),
                   run_gpt2(3, world, Mode::kCpu, DType::kFloat16),
                   "fp16 world " + std::to_string(world));
}

// The same swapped bf16 gradients across a checkpoint: shard_states() (read from the swap
// regions) saved after 3 steps and loaded into a fresh engine continue as the uninterrupted run,
// bitwise (stage 3, W = 2, the overlapped step).
TEST(EngineOffload, Bf16SwappedGradientsResumeFromShardStatesBitwise) {
  constexpr int kWorld = 2;
  GPT2Run run = mixed_run(DType::kBFloat16, 3, 1, kGpt2Steps);
  apply_offload(run.options, Mode::kNvme, 13'000, 4608 / kWorld);
  ASSERT_EQ(state_policy(run.options).grad_swap_dtype, DType::kBFloat16);
  const int rows = run.global_batch / kWorld;
  auto train = [&](Engine& engine, GPT2EngineDriver& model, int rank, int first, int count) {
    for (int step = first; step < first + count; ++step) {
      const int sample = (step * kWorld + rank) * rows;
      const gpt2::DropoutKey dropout{run.seed, static_cast<std::uint64_t>(step), sample, true};
      model.micro_step(make_token_batch(run.config, run.seq_len, step, sample, rows), dropout);
      engine.step();
    }
  };
  std::vector<std::vector<float>> uninterrupted, resumed;
  std::vector<ShardImage> images(kWorld);
  std::vector<TrainingState> training(kWorld);
  run_ranks(kWorld, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(run.options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory());
    GPT2EngineDriver model(*engine, run.config, rows, run.seq_len, run.seed);
    train(*engine, model, comm.rank(), 0, 3);
    images[static_cast<std::size_t>(comm.rank())] = take_shard_image(*engine);
    training[static_cast<std::size_t>(comm.rank())] = engine->training_state();
    train(*engine, model, comm.rank(), 3, 3);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    if (comm.rank() == 0) uninterrupted = std::move(params);
  });
  run_ranks(kWorld, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(run.options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory());
    GPT2EngineDriver model(*engine, run.config, rows, run.seq_len, run.seed);
    put_shard_image(*engine, images[static_cast<std::size_t>(comm.rank())]);
    engine->set_training_state(training[static_cast<std::size_t>(comm.rank())]);
    engine->refresh_params();
    train(*engine, model, comm.rank(), 3, 3);
    std::vector<std::vector<float>> params = gathered_parameters(*engine);
    if (comm.rank() == 0) resumed = std::move(params);
  });
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  for (std::size_t u = 0; u < resumed.size(); ++u) EXPECT_EQ(resumed[u], uninterrupted[u]) << u;
}

// fp16: offload accumulates the gradient partition in fp32 where the run without offload
// accumulates in fp16 (DeepSpeed's offload keeps an fp32 partition too), so the two differ by
// fp16 rounding of the reduced gradients: within the mixed-precision tests' fp16 tolerance between
// stages (5e-4 on the loss; measured 3.8e-6 over 6 steps). Three micro-steps per step, so the
// accumulation dtype matters.
TEST(EngineOffload, Fp16StaysWithinTheFp16Tolerance) {
  for (int stage : {2, 3}) {
    const TrainResult reference = run_gpt2(stage, 2, Mode::kNone, DType::kFloat16, 3);
    for (Mode mode : {Mode::kCpu, Mode::kNvme}) {
      const TrainResult result = run_gpt2(stage, 2, mode, DType::kFloat16, 3);
      ASSERT_EQ(result.losses.size(), reference.losses.size());
      double largest = 0.0;
      for (std::size_t s = 0; s < reference.losses.size(); ++s)
        largest = std::max(largest, std::abs(result.losses[s] - reference.losses[s]));
      EXPECT_LT(largest, 5e-4) << "fp16 stage " << stage << " " << name_of(mode);
      std::printf("fp16 stage %d %s: largest loss difference %.3g\n", stage, name_of(mode).c_str(),
                  largest);
    }
  }
}

// ---- ledger ----

// Every model-state category of every space equals model_state_bytes(options) (stage 3's
// persistent units aside, which stay gathered on the device as params).
void check_ledger_by_space(Engine& engine) {
  const EngineOptions& options = engine.options();
  const int world = engine.world_size();
  const std::vector<std::size_t> sizes = unit_sizes(engine);
  const ModelStateBytesBySpace formula = model_state_bytes(options, sizes, world, 2);
  const StatePolicy policy = state_policy(options);
  std::int64_t persistent = 0;
  if (options.stage == 3)
    for (std::size_t count : sizes)
      if (count < static_cast<std::size_t>(options.param_persistence_threshold))
        persistent += static_cast<std::int64_t>(
            size_of(policy.compute) *
            padded_num_elements(count, world, options.alignment_elements));
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    const ModelStateBytes& expected = formula.in(space);
    auto current = [&](MemoryCategory category) {
      return engine.ledger().entry(space, category).current_bytes;
    };
    const std::string where = std::string(name_of(space));
    EXPECT_EQ(current(MemoryCategory::kParams) - (space == MemorySpace::kDevice ? persistent : 0),
              expected.params)
        << where;
    EXPECT_EQ(current(MemoryCategory::kParamShard), expected.param_shard) << where;
    EXPECT_EQ(current(MemoryCategory::kGrads), expected.grads) << where;
    EXPECT_EQ(current(MemoryCategory::kGradShard), expected.grad_shard) << where;
    EXPECT_EQ(current(MemoryCategory::kMasterParams), expected.master_params) << where;
    EXPECT_EQ(current(MemoryCategory::kOptimizerState), expected.optimizer_state) << where;
  }
}

std::int64_t device_model_states(const MemoryLedger& ledger) {
  std::int64_t total = 0;
  for (MemoryCategory category :
       {MemoryCategory::kParams, MemoryCategory::kParamShard, MemoryCategory::kGrads,
        MemoryCategory::kGradShard, MemoryCategory::kMasterParams, MemoryCategory::kOptimizerState})
    total += ledger.entry(MemorySpace::kDevice, category).current_bytes;
  return total;
}

TEST(EngineOffload, LedgerEqualsTheFormulaInEverySpace) {
  for (Mode mode : kModes)
    for (int stage : {1, 2, 3})
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        if (stage3_only(mode) && stage != 3) continue;
        GPT2Run run = mixed_run(dtype, stage, 1, 1);
        run.options.param_persistence_threshold = 0;  // nothing stays gathered
        apply_offload(run.options, mode, 13'000, 4608 / 2);
        const std::string what = name_of(mode) + " stage " + std::to_string(stage) + " " +
                                 std::string(zero::name_of(dtype));
        run_ranks(2, [&](Communicator& comm) {
          omp_set_num_threads(1);
          std::unique_ptr<Engine> engine = make_engine(run.options, comm);
          engine->set_swap_store_factory(memory_swap_store_factory());
          GPT2EngineDriver model(*engine, run.config, 3, run.seq_len, run.seed);
          model.micro_step(make_token_batch(run.config, run.seq_len, 0, comm.rank() * 3, 3),
                           {run.seed, 0, comm.rank() * 3, true});
          EXPECT_TRUE(engine->step()) << what;
          SCOPED_TRACE(what);
          check_ledger_by_space(*engine);
          // DeepSpeed's estimate_zero2/zero3_model_states_mem_needs for the device: 16-bit (here:
          // compute-dtype) parameters only: cΨ at stage 2, cΨ/W at stage 3, nothing with
          // offload_param; stage 1 keeps its full gradients too.
          std::int64_t padded = 0;
          for (std::size_t count : unit_sizes(*engine))
            padded += static_cast<std::int64_t>(
                padded_num_elements(count, 2, run.options.alignment_elements));
          const auto c = static_cast<std::int64_t>(size_of(dtype));
          std::int64_t device = 0;
          if (stage == 1) device = c * padded + 4 * padded;
          if (stage == 2) device = c * padded;
          if (stage == 3) device = uses_params(mode) ? 0 : c * padded / 2;
          // offload_param alone: the fp32 master, the moments and the fp32 gradient shard
          // (16 bytes per owned element) stay on the device with the step.
          if (params_only(mode)) device = 16 * padded / 2;
          // ratio 0.5 keeps the first sub-groups' master, moments and gradients (16 bytes per
          // owned element with Adam) on the device.
          // With offload_param too, every parameter shard stays off the device.
          if (uses_ratio(mode))
            device += 16 * static_cast<std::int64_t>(
                               device_owned_elements(run.options, unit_sizes(*engine), 2));
          EXPECT_EQ(device_model_states(engine->ledger()), device) << what;
          if (uses_ratio(mode)) {
            EXPECT_GT(device_owned_elements(run.options, unit_sizes(*engine), 2), 0u);
          }
          // pin_memory (the cpu modes here): the host states are in the pinned space.
          const bool pinned =
              mode == Mode::kCpu || mode == Mode::kCpuParams || mode == Mode::kCpuRatioParamsCpu;
          if (mode == Mode::kParamsCpu || mode == Mode::kCpuRatioParamsCpu) {
            EXPECT_GT(engine->ledger()
                          .entry(MemorySpace::kHostPinned, MemoryCategory::kParamShard)
                          .current_bytes,
                      0)
                << what;
          }
          EXPECT_EQ(engine->ledger()
                            .entry(MemorySpace::kHostPinned, MemoryCategory::kGradShard)
                            .current_bytes > 0,
                    pinned)
              << what;
        });
      }
}

TEST(EngineOffload, FormulaPlacesEachStateByMode) {
  // Ψ = 1024 (one unit, padded already), W = 4, S = 256, Adam, bf16 (c = 2).
  const std::vector<std::size_t> sizes = {1024};
  EngineOptions options;
  options.bf16.enabled = true;
  options.stage = 2;
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  options.offload_optimizer.pin_memory = true;
  ModelStateBytesBySpace bytes = model_state_bytes(options, sizes, 4, 2);
  EXPECT_EQ(bytes.in(MemorySpace::kDevice).total(), 2 * 1024);  // DeepSpeed: 2Ψ on the GPU
  EXPECT_EQ(bytes.in(MemorySpace::kHostPinned).total(), (4 + 4 + 8) * 256);
  EXPECT_EQ(bytes.in(MemorySpace::kHost).total(), 0);
  options.offload_optimizer.device = config::OffloadDevice::kNvme;
  options.offload_optimizer.nvme_path = "/x";
  bytes = model_state_bytes(options, sizes, 4, 2);
  // nvme: the gradient partition is swapped too (ZeRO-Infinity), in bf16 as reduced with one
  // micro-step per step, in fp32 with accumulation.
  EXPECT_EQ(bytes.in(MemorySpace::kHostPinned).grad_shard, 0);
  EXPECT_EQ(bytes.in(MemorySpace::kNvme).total(), (4 + 2 + 8) * 256);
  options.gradient_accumulation_steps = 2;
  EXPECT_EQ(model_state_bytes(options, sizes, 4, 2).in(MemorySpace::kNvme).total(),
            (4 + 4 + 8) * 256);
  options.gradient_accumulation_steps = 1;
  options.stage = 3;
  options.offload_param.device = config::OffloadDevice::kNvme;
  options.offload_param.nvme_path = "/x";
  options.offload_param.max_in_cpu = 0;
  bytes = model_state_bytes(options, sizes, 4, 2);
  EXPECT_EQ(bytes.in(MemorySpace::kDevice).total(), 0);
  EXPECT_EQ(bytes.in(MemorySpace::kNvme).total(), (2 + 4 + 2 + 8) * 256);
  options.offload_param.max_in_cpu = 256;  // the one unit's shard fits in host memory
  bytes = model_state_bytes(options, sizes, 4, 2);
  EXPECT_EQ(bytes.in(MemorySpace::kHost).param_shard, 2 * 256);
  EXPECT_EQ(bytes.in(MemorySpace::kNvme).param_shard, 0);
  // ratio 0.5 over four sub-groups of 256 owned elements (four units, W = 4): the first two keep
  // master, moments and fp32 gradients (16 bytes per element) on the device.
  options = EngineOptions();
  options.stage = 3;
  options.bf16.enabled = true;
  options.sub_group_size = 256;
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  options.offload_optimizer.ratio = 0.5;
  const std::vector<std::size_t> four = {1024, 1024, 1024, 1024};
  EXPECT_EQ(device_owned_elements(options, four, 4), 512u);
  bytes = model_state_bytes(options, four, 4, 2);
  EXPECT_EQ(bytes.in(MemorySpace::kDevice).total(), 2 * 1024 + 16 * 512);
  EXPECT_EQ(bytes.in(MemorySpace::kHost).total(), 16 * 512);
  // Without offload: everything on the device, as before.
  options = EngineOptions();
  options.stage = 3;
  EXPECT_EQ(model_state_bytes(options, sizes, 4, 2).in(MemorySpace::kDevice).total(), 16 * 256);
}

// ---- planning ----

struct Snapshot {
  std::array<std::array<LedgerEntry, kNumMemoryCategories>, kNumMemorySpaces> entries{};
};

Snapshot snapshot(const MemoryLedger& ledger) {
  Snapshot result;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s)
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c)
      result.entries[s][c] =
          ledger.entry(static_cast<MemorySpace>(s), static_cast<MemoryCategory>(c));
  return result;
}

TEST(EngineOffload, PlanEqualsTheRealRun) {
  for (Mode mode : kModes)
    for (int stage : {1, 2, 3}) {
      if (stage3_only(mode) && stage != 3) continue;
      EngineOptions options = parity_options(stage, 2);
      options.overlap_comm = false;
      apply_offload(options, mode, 1300, 160);
      const int world = 2;
      std::vector<Snapshot> real(world);
      run_ranks(world, [&](Communicator& comm) {
        std::unique_ptr<Engine> engine = make_engine(options, comm);
        engine->set_swap_store_factory(memory_swap_store_factory());
        TinyStack model;
        model.register_units(*engine);
        for (int micro = 0; micro < 4; ++micro) {
          model.micro_step(*engine, make_batch({}, micro, comm.rank() * 2, 2));
          engine->step();
        }
        engine->wait_for_step();  // stage 3: the last step runs on a worker
        comm.synchronize();
        engine->context().copy_stream().synchronize();
        real[static_cast<std::size_t>(comm.rank())] = snapshot(engine->ledger());
      });
      for (int rank = 0; rank < world; ++rank) {
        PlanningCommunicator comm(rank, world);
        std::unique_ptr<DeviceContext> context = make_planning_context();
        const std::unique_ptr<Engine> engine_owner =
            make_engine(options, comm, {.context = context.get()});
        Engine& engine = *engine_owner;
        TinyStack model;
        model.register_units(engine);
        engine.initialize();
        const std::vector<UnitId>& units = model.units();
        for (int micro = 0; micro < 4; ++micro) {
          plan_micro_step(engine, units);
          engine.step();
        }
        const Snapshot plan = snapshot(context->ledger());
        const Snapshot& run = real[static_cast<std::size_t>(rank)];
        for (std::size_t s = 0; s < kNumMemorySpaces; ++s)
          for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
            const std::string where = name_of(mode) + " stage " + std::to_string(stage) + " rank " +
                                      std::to_string(rank) + " " +
                                      std::string(zero::name_of(static_cast<MemorySpace>(s))) +
                                      "/" +
                                      std::string(zero::name_of(static_cast<MemoryCategory>(c)));
            EXPECT_EQ(plan.entries[s][c].current_bytes, run.entries[s][c].current_bytes) << where;
            // Stage 3, parameters on NVMe: the step runs beside the next forward, whose gather
            // may hold a shard's read buffer (4096 bytes and the alignment) while the step holds
            // its buffers, or not yet: the plan holds it (its bound), the run at most that.
            const bool reads_beside_step =
                stage == 3 && mode == Mode::kNvmeParams &&
                c == static_cast<std::size_t>(MemoryCategory::kWorkspace);
            if (reads_beside_step) {
              EXPECT_GE(plan.entries[s][c].peak_bytes, run.entries[s][c].peak_bytes) << where;
              EXPECT_LE(plan.entries[s][c].peak_bytes - run.entries[s][c].peak_bytes, 8192)
                  << where;
            } else {
              EXPECT_EQ(plan.entries[s][c].peak_bytes, run.entries[s][c].peak_bytes) << where;
            }
          }
      }
    }
}

// The partial offload with offload_param: the step converts the device sub-groups' updated
// shards in a device staging buffer (the largest such shard in the compute dtype) on their way
// out; the plan's step holds it as the run's does. Peaks from just before the second step: the
// step's own buffers.
TEST(EngineOffload, PartialOffloadWithParamsPlansTheStepsDeviceStaging) {
  for (Mode mode : {Mode::kCpuRatioParamsCpu, Mode::kCpuRatioParamsNvme}) {
    EngineOptions options = parity_options(3, 1);
    options.overlap_comm = false;
    apply_offload(options, mode, 1300, 160);
    const int world = 2;
    std::vector<LedgerEntry> real(world);
    run_ranks(world, [&](Communicator& comm) {
      std::unique_ptr<Engine> engine = make_engine(options, comm);
      engine->set_swap_store_factory(memory_swap_store_factory());
      TinyStack model;
      model.register_units(*engine);
      for (int micro = 0; micro < 2; ++micro) {
        model.micro_step(*engine, make_batch({}, micro, comm.rank() * 2, 2));
        if (micro == 1) engine->ledger().reset_peaks();
        engine->step();
      }
      comm.synchronize();
      real[static_cast<std::size_t>(comm.rank())] =
          engine->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace);
    });
    for (int rank = 0; rank < world; ++rank) {
      PlanningCommunicator comm(rank, world);
      std::unique_ptr<DeviceContext> context = make_planning_context();
      const std::unique_ptr<Engine> engine = make_engine(options, comm, {.context = context.get()});
      TinyStack model;
      model.register_units(*engine);
      engine->initialize();
      for (int micro = 0; micro < 2; ++micro) {
        plan_micro_step(*engine, model.units());
        if (micro == 1) context->ledger().reset_peaks();
        engine->step();
      }
      const LedgerEntry plan =
          context->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace);
      const LedgerEntry& run = real[static_cast<std::size_t>(rank)];
      const std::string what = name_of(mode) + " rank " + std::to_string(rank);
      EXPECT_EQ(plan.peak_bytes, run.peak_bytes) << what;
      EXPECT_EQ(plan.current_bytes, run.current_bytes) << what;
      // The sub-group on the device is {embed, block.0} (W = 2: 160 and 600 owned elements): the
      // step holds block.0's shard in fp32 beside what stays allocated.
      EXPECT_GE(run.peak_bytes - run.current_bytes, 600 * 4) << what;
    }
  }
}

}  // namespace
}  // namespace zero::testing
