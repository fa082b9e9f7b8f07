// GPT-2 through the engine in mixed precision (bf16 and fp16 parameters and gradients, fp32
// master weights and moments): stages {0,1,2,3} × worlds {1,2,4} × accumulation {1,3}, 20 steps,
// against stage 0 / world 1 in the same precision; long runs tracking the fp32 run; an fp16
// overflow induced in one rank's gradients skipping the step and moving the loss scale as
// DeepSpeed's DynamicLossScaler does (its own class runs in loss_scaler_golden_test); the ledger
// equal to the ZeRO paper's mixed-precision formula.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "gpt2_engine_driver.h"
#include "ledger_checks.h"
#include "mixed_precision_runs.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

const char* name(DType dtype) { return dtype == DType::kBFloat16 ? "bf16" : "fp16"; }

const TrainResult& reference(DType dtype) {
  static std::mutex mutex;
  static std::map<DType, TrainResult> results;
  std::lock_guard lock(mutex);
  auto found = results.find(dtype);
  if (found == results.end())
    found = results.emplace(dtype, train_gpt2_on_threads(mixed_run(dtype, 0, 1), 1)).first;
  return found->second;
}

double max_loss_deviation(const TrainResult& a, const TrainResult& b) {
  double deviation = 0.0;
  for (std::size_t s = 0; s < b.losses.size(); ++s)
    deviation = std::max(deviation, std::abs(a.losses[s] - b.losses[s]));
  return deviation;
}

class MixedStageWorldAccumulation
    : public ::testing::TestWithParam<std::tuple<DType, int, int, int>> {};

// Every stage and world gives the losses of stage 0 / world 1 in that precision. Not bitwise:
// the arithmetic order differs between runs (stages 0-1 accumulate the model's gradients in
// place and reduce once per boundary, stages 2-3 round each micro-step's gradients to 16 bits
// and reduce them every micro-step; the global norm is summed per shard; world sizes split the
// batch sums), and every 16-bit rounding of a gradient or parameter moves by up to 2^-8 (bf16)
// or 2^-11 (fp16) relative. Measured over this matrix: losses within 1.4e-3 (bf16) and 7.1e-5
// (fp16) of the reference; the bounds are 5e-3 and 5e-4, well below the loss's fall per step
// early on (~3e-2) and the difference of a wrong model (a dropped unit's update moves it by >
// 0.1). Stages 0-1 at world 1 (one block) and stage 2 vs 3 (StageThreeIsBitwiseStageTwo) do the
// same arithmetic: their deviations print as 0.
TEST_P(MixedStageWorldAccumulation, MatchesStageZeroWorldOne) {
  const auto [dtype, stage, world, accumulation] = GetParam();
  const TrainResult result = train_gpt2_on_threads(mixed_run(dtype, stage, accumulation), world);
  const TrainResult& expected = reference(dtype);
  ASSERT_EQ(result.losses.size(), expected.losses.size());
  const double tolerance = dtype == DType::kBFloat16 ? 5e-3 : 5e-4;
  for (std::size_t s = 0; s < expected.losses.size(); ++s)
    EXPECT_NEAR(result.losses[s], expected.losses[s], tolerance) << "step " << s;
  EXPECT_LT(expected.losses.back(), 0.9 * expected.losses.front());
  std::printf("%s stage %d world %d gas %d: max |loss - ref| %.2e (last %.4f)\n", name(dtype),
              stage, world, accumulation, max_loss_deviation(result, expected),
              result.losses.back());
}

INSTANTIATE_TEST_SUITE_P(All, MixedStageWorldAccumulation,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2, 4), ::testing::Values(1, 3)));

// Where the arithmetic order is the same the losses are bitwise equal: stage 3 gathers per use
// the very 16-bit parameters stage 2 all-gathers after the step, and both reduce every
// micro-step into the same gradient shards.
TEST(GPT2MixedPrecision, StageThreeIsBitwiseStageTwo) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16})
    for (int world : {1, 2, 4}) {
      const TrainResult two = train_gpt2_on_threads(mixed_run(dtype, 2, 3), world);
      const TrainResult three = train_gpt2_on_threads(mixed_run(dtype, 3, 3), world);
      EXPECT_EQ(two.losses, three.losses) << name(dtype) << " world " << world;
      EXPECT_EQ(two.params, three.params) << name(dtype) << " world " << world;
    }
}

// Stage 0 at world 1 reduces without a bucket or a collective (GradReducer::unpack_alone: the
// gradients × post in place, untouched at post 1) and, with 16-bit parameters, AdamW writes the
// compute copy in its own pass (ShardChunk::params_16bit). Both fusions are exact: the run equals,
// bit for bit, world 2 with both ranks given the same samples, whose gradients go through the
// bucket and the all-reduce (2g, scaled by post / 2: exact, a power of two) and are refreshed by
// params_from_master's conversion; and after it the compute parameters are the fp32 master
// rounded by zero::convert.
TEST(GPT2MixedPrecision, WorldOneFusionsEqualTheBucketedPathBitwise) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat32})
    for (int accumulation : {1, 3}) {
      const GPT2Run run = mixed_run(dtype, 0, accumulation, 5);
      const std::string what = std::string(dtype == DType::kBFloat16 ? "bf16" : "fp32") + " gas " +
                               std::to_string(accumulation);
      constexpr int kRows = 2;
      auto train = [&](int world) {
        TrainResult result;
        std::mutex mutex;
        run_ranks(world, [&](Communicator& comm) {
          omp_set_num_threads(1);
          std::unique_ptr<Engine> engine = make_engine(run.options, comm);
          GPT2EngineDriver model(*engine, run.config, kRows, run.seq_len, run.seed);
          TrainResult mine = train_steps(comm, *engine, run.steps, kRows, [&](int step, int first) {
            const int same = first / (world * kRows) * kRows;  // micro-step m's samples, any rank
            const gpt2::DropoutKey dropout{run.seed, static_cast<std::uint64_t>(step), same, true};
            return model.micro_step(make_token_batch(run.config, run.seq_len, step, same, kRows),
                                    dropout);
          });
          for (UnitId u = 0; u < static_cast<UnitId>(engine->num_units()); ++u) {
            if (dtype == DType::kFloat32 || world != 1) break;
            const Buffer master = engine->gather_master(u);
            GatheredUnit compute = engine->gather(u);
            const std::size_t count = compute.layout().num_elements();
            std::vector<BFloat16> rounded(count);
            convert(master.data(), DType::kFloat32, rounded.data(), DType::kBFloat16, count);
            EXPECT_EQ(std::memcmp(rounded.data(), compute.raw(), count * sizeof(BFloat16)), 0)
                << what << " world " << world << " unit " << u;
          }
          if (comm.rank() == 0) {
            std::lock_guard lock(mutex);
            result = std::move(mine);
          }
        });
        return result;
      };
      const TrainResult alone = train(1), bucketed = train(2);
      // Engine::average_across_ranks all-reduces in fp32 (world 1 returns the double itself).
      for (std::size_t s = 0; s < alone.losses.size(); ++s)
        EXPECT_EQ(static_cast<float>(alone.losses[s]), static_cast<float>(bucketed.losses[s]))
            << what << " step " << s;
      EXPECT_EQ(alone.grad_norms, bucketed.grad_norms) << what;
      EXPECT_EQ(alone.params, bucketed.params) << what;
      EXPECT_LT(alone.losses.back(), alone.losses.front()) << what;
    }
}

// Long runs (200 steps, stage 2, world 2; ~1.5 s in all) track the fp32 run: measured max |loss
// - fp32| 1.8e-2 for bf16 and 1.5e-3 for fp16 (16-bit parameters move the loss by ~2^-8 resp.
// 2^-11 relative and the trajectories drift apart slowly); bounds 5e-2 and 1e-2. Both learn
// (the last loss below half the first, as fp32's).
TEST(GPT2MixedPrecision, LongRunTracksFp32) {
  constexpr int kSteps = 200;
  GPT2Run fp32 = mixed_run(DType::kFloat32, 2, 1, kSteps);
  const TrainResult expected = train_gpt2_on_threads(fp32, 2);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const TrainResult result = train_gpt2_on_threads(mixed_run(dtype, 2, 1, kSteps), 2);
    ASSERT_EQ(result.losses.size(), expected.losses.size());
    const double tolerance = dtype == DType::kBFloat16 ? 5e-2 : 1e-2;
    for (std::size_t s = 0; s < expected.losses.size(); ++s)
      EXPECT_NEAR(result.losses[s], expected.losses[s], tolerance) << name(dtype) << " step " << s;
    EXPECT_LT(result.losses.back(), 0.5 * result.losses.front()) << name(dtype);
    std::printf("%s vs fp32 over %d steps: max |loss - fp32| %.2e (fp32 last %.4f, %s last %.4f)\n",
                name(dtype), kSteps, max_loss_deviation(result, expected), expected.losses.back(),
                name(dtype), result.losses.back());
  }
}

// An inf in rank 1's fp16 gradients at chosen steps: the all-reduced overflow flag skips the
// step on every rank (parameters and LR schedule unchanged, skipped_steps counted) and the
// scale follows DeepSpeed's DynamicLossScaler with hysteresis 2: the first overflow uses up
// hysteresis, the second halves the scale; a halving at the next overflow after that.
TEST(GPT2MixedPrecision, InducedFp16OverflowSkipsStepAndMovesScaleWithHysteresis) {
  for (int stage : {0, 1, 2, 3}) {
    const OverflowRun run = run_with_overflows(stage, 2, {3, 4, 7}, 8, 3, 2, false, 10);
    // Steps 0..9 (one boundary each), window 3, hysteresis 2, scale 2^8 at first.
    const std::vector<bool> expected_overflows = {false, false, false, true,  true,
                                                  false, false, true,  false, false};
    EXPECT_EQ(run.overflows, expected_overflows) << "stage " << stage;
    // DeepSpeed 0.19 (tests/golden/loss_scaler_reference.py gives the same):
    //   0: 256 (stable 0)  1: 256  2: 256  3: overflow, hysteresis 2 → 1, 256
    //   4: overflow → 128  5: stable 0  6: 1  7: overflow (hysteresis 1) → 64  8: 0  9: 1
    const std::vector<double> expected_scales = {256, 256, 256, 256, 128, 128, 128, 64, 64, 64};
    EXPECT_EQ(run.scales, expected_scales) << "stage " << stage;
    EXPECT_EQ(run.skipped_steps, 3) << "stage " << stage;
    EXPECT_EQ(run.global_steps, 10) << "stage " << stage;
    EXPECT_TRUE(run.params_unchanged_on_skips) << "stage " << stage;
    EXPECT_TRUE(run.lr_unchanged_on_skips) << "stage " << stage;
  }
}

// Checkpoint state in 16-bit training is the fp32 master and moments: shards read at stage 3
// after 4 of 12 steps and written into a fresh stage 2 engine (same world: the same arithmetic, see
// StageThreeIsBitwiseStageTwo) continue bitwise as the uninterrupted stage 2 run, loss scale
// included (refresh_params converts the master and re-gathers the 16-bit copy).
TEST(GPT2MixedPrecision, CheckpointOfMasterWeightsResumesBitwise) {
  constexpr int kWorld = 2, kSteps = 12, kSaved = 4;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    const TrainResult uninterrupted = train_gpt2_on_threads(mixed_run(dtype, 2, 1, kSteps), kWorld);
    std::map<std::string, std::vector<float>> params;
    std::map<std::string, std::map<std::string, std::vector<float>>> states;
    TrainingState training;
    std::mutex mutex;
    auto steps = [&](Engine& engine, GPT2EngineDriver& model, Communicator& comm, int first,
                     int count, std::vector<double>* losses) {
      const GPT2Run run = mixed_run(dtype, 2, 1, kSteps);
      const int rows = run.global_batch / comm.world_size();
      for (int step = first; step < first + count; ++step) {
        const int sample = comm.rank() * rows;
        const double loss =
            model.micro_step(make_token_batch(run.config, run.seq_len, step, sample, rows),
                             {run.seed, static_cast<std::uint64_t>(step), sample, true});
        engine.step();
        const double mean = engine.average_across_ranks(loss);
        if (losses) losses->push_back(mean);
      }
    };
    run_ranks(kWorld, [&](Communicator& comm) {
      omp_set_num_threads(1);
      const GPT2Run run = mixed_run(dtype, 3, 1, kSteps);
      std::unique_ptr<Engine> engine = make_engine(run.options, comm);
      GPT2EngineDriver model(*engine, run.config, run.global_batch / kWorld, run.seq_len, run.seed);
      steps(*engine, model, comm, 0, kSaved, nullptr);
      std::lock_guard lock(mutex);
      for (const ShardState& shard : engine->shard_states()) {
        const std::size_t size = engine->layout(engine->unit(shard.unit)).num_elements();
        params[shard.unit].resize(size);
        std::copy(shard.params.begin(), shard.params.end(),
                  params[shard.unit].begin() + shard.range.begin);
        for (const auto& [state_name, values] : shard.optimizer_state) {
          auto& state = states[shard.unit][state_name];
          state.resize(size);
          std::copy(values.begin(), values.end(), state.begin() + shard.range.begin);
        }
      }
      training = engine->training_state();
    });
    std::vector<double> resumed;
    run_ranks(kWorld, [&](Communicator& comm) {
      omp_set_num_threads(1);
      const GPT2Run run = mixed_run(dtype, 2, 1, kSteps);
      std::unique_ptr<Engine> engine = make_engine(run.options, comm);
      GPT2EngineDriver model(*engine, run.config, run.global_batch / kWorld, run.seq_len, run.seed);
      for (ShardState& shard : engine->shard_states()) {
        const auto& saved = params.at(shard.unit);
        std::copy(saved.begin() + shard.range.begin, saved.begin() + shard.range.end,
                  shard.params.begin());
        for (auto& [state_name, values] : shard.optimizer_state) {
          const auto& state = states.at(shard.unit).at(state_name);
          std::copy(state.begin() + shard.range.begin, state.begin() + shard.range.end,
                    values.begin());
        }
      }
      engine->set_training_state(training);
      engine->refresh_params();
      std::vector<double> losses;
      steps(*engine, model, comm, kSaved, kSteps - kSaved, &losses);
      if (comm.rank() == 0) resumed = losses;
    });
    ASSERT_EQ(resumed.size(), static_cast<std::size_t>(kSteps - kSaved));
    // The run learns (frozen 16-bit parameters would agree with themselves too).
    EXPECT_LT(uninterrupted.losses.back(), uninterrupted.losses.front() - 0.1) << name(dtype);
    for (int s = kSaved; s < kSteps; ++s)
      EXPECT_EQ(resumed[s - kSaved], uninterrupted.losses[s]) << name(dtype) << " step " << s;
  }
}

// 16-bit accumulated gradients reach the optimizer in fp32 one unit at a time (engine_step.cc):
// the device workspace holds the largest unit's owned elements in fp32, not the whole partition
// (4 bytes a parameter; 25 GiB at Llama-2-7B's stage 0, benchmarks/RESULTS.md). The ledger's
// workspace peak after steps at stage 0 (the engine's own: the model's scratch is in the
// driver's ledger) is that buffer, for fp16 (16-bit accumulation by default) and for bf16 with
// data_types.grad_accum_dtype bf16.
TEST(GPT2MixedPrecision, SixteenBitGradientsReachTheOptimizerThroughOneUnitsWorkspace) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    run_ranks(1, [&](Communicator& comm) {
      GPT2Run run = mixed_run(dtype, 0, 2);
      run.options.grad_accum_dtype = dtype;
      std::unique_ptr<Engine> engine = make_engine(run.options, comm);
      GPT2EngineDriver model(*engine, run.config, 4, 16, 7);
      for (int micro = 0; micro < 4; ++micro) {
        model.micro_step(make_token_batch(run.config, 16, micro / 2, 4 * (micro % 2), 4),
                         {7, static_cast<std::uint64_t>(micro / 2), 4 * (micro % 2), true});
        engine->step();
      }
      std::size_t largest = 0, total = 0;
      for (std::size_t count : unit_sizes(*engine)) {
        const std::size_t owned = padded_num_elements(count, 1, run.options.alignment_elements);
        largest = std::max(largest, owned);
        total += owned;
      }
      ASSERT_LT(2 * largest, total);  // several units: the whole partition would differ
      EXPECT_EQ(engine->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).peak_bytes,
                static_cast<std::int64_t>(largest * sizeof(float)))
          << name(dtype);
    });
  }
}

// The ledger: model-state bytes equal the formula (the ZeRO paper's 2Ψ+2Ψ+12Ψ, 4Ψ+12Ψ/N,
// 2Ψ+14Ψ/N, 16Ψ/N with 16-bit accumulation; bf16's default fp32 accumulation adds its
// gradient bytes) after steps at every stage and world.
// The second parameter swaps the accumulation dtype from the default (fp16: fp16, bf16: fp32)
// to the other one through data_types.grad_accum_dtype.
class MixedLedger : public ::testing::TestWithParam<std::tuple<DType, bool, int, int>> {};

TEST_P(MixedLedger, ModelStatesEqualFormula) {
  const auto [dtype, other_accumulation, stage, world] = GetParam();
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    GPT2Run run = mixed_run(dtype, stage, 1);
    const DType default_accumulation = dtype == DType::kFloat16 ? dtype : DType::kFloat32;
    const DType accumulation = !other_accumulation             ? default_accumulation
                               : default_accumulation == dtype ? DType::kFloat32
                                                               : dtype;
    if (other_accumulation) run.options.grad_accum_dtype = accumulation;
    std::unique_ptr<Engine> engine = make_engine(run.options, comm);
    const int rows = 4;
    GPT2EngineDriver model(*engine, run.config, rows, 16, 7);
    for (int step = 0; step < 2; ++step) {
      const int first = comm.rank() * rows;
      model.micro_step(make_token_batch(run.config, 16, step, first, rows),
                       {7, static_cast<std::uint64_t>(step), first, true});
      engine->step();
    }
    const MeasuredModelStates here = check_ledger_against_formula(*engine);
    // The paper's coefficients, byte for byte: Ψ padded, N = world.
    const std::vector<std::size_t> sizes = unit_sizes(*engine);
    std::int64_t psi = 0;
    for (std::size_t count : sizes)
      psi += static_cast<std::int64_t>(
          padded_num_elements(count, world, run.options.alignment_elements));
    const std::int64_t shard = psi / world;
    const std::int64_t extra = accumulation == DType::kFloat32 ? 2 : 0;  // fp32 gradients
    const std::int64_t expected[] = {(16 + extra) * psi, (4 + extra) * psi + 12 * shard,
                                     2 * psi + (14 + extra) * shard, (16 + extra) * shard};
    EXPECT_EQ(here.model.total(), expected[stage])
        << name(dtype) << " accumulating in " << name_of(accumulation) << ", stage " << stage
        << " world " << world;
  });
}

INSTANTIATE_TEST_SUITE_P(All, MixedLedger,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat16),
                                            ::testing::Bool(), ::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2, 4)));

}  // namespace
}  // namespace zero::testing
