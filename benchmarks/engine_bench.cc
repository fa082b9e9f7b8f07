// Step time of ZeRO-3 against stages 0 and 1 at 2 and 4 ranks (thread communicator, one
// process), with and without overlap (overlap_comm: prefetch + reductions on the comm stream), on
// a 21M-parameter stack of 20 linear+tanh units (H = 1024). Reported: seconds per optimizer step
// on rank 0.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <vector>

#include "zero/comm/thread_communicator.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"

namespace {

constexpr int kHidden = 1024;  // H
constexpr int kUnits = 20;     // L: 20 × (H² + H) = 21.0M parameters
constexpr int kRows = 16;      // rows per rank and micro-step
constexpr int kMeasuredSteps = 5;

// One micro-step of the stack: forward gathers units 0..L-1, backward L-1..0.
void micro_step(zero::Engine& engine, const std::vector<zero::UnitId>& units) {
  constexpr int H = kHidden, R = kRows;
  std::vector<std::vector<float>> acts(kUnits + 1, std::vector<float>(R * H));
  for (int i = 0; i < R * H; ++i) acts[0][i] = std::sin(0.01f * i);
  for (int l = 0; l < kUnits; ++l) {
    zero::GatheredUnit p = engine.gather(units[l]);
    const float* w = p.tensor("weight").data();  // (H_in, H_out)
    const float* b = p.tensor("bias").data();
    float* y = acts[l + 1].data();
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < H; ++j) y[r * H + j] = b[j];
    for (int i = 0; i < H; ++i) {  // each weight row is read once and used for every row of x
      const float* row = w + static_cast<std::size_t>(i) * H;
      for (int r = 0; r < R; ++r) {
        const float x = acts[l][r * H + i];
        float* out = y + r * H;
#pragma omp simd
        for (int j = 0; j < H; ++j) out[j] += x * row[j];
      }
    }
    for (int k = 0; k < R * H; ++k) y[k] = std::tanh(y[k]);
  }
  std::vector<float> dy(acts[kUnits]), dx(R * H);
  for (int l = kUnits - 1; l >= 0; --l) {
    zero::GatheredUnit p = engine.gather(units[l]);
    const float* w = p.tensor("weight").data();
    zero::GradientBuffer g = engine.grads(units[l]);
    float* gw = g.tensor("weight").data();
    float* gb = g.tensor("bias").data();
    const float* y = acts[l + 1].data();
    for (int k = 0; k < R * H; ++k) dy[k] *= 1.0f - y[k] * y[k];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < H; ++j) gb[j] += dy[r * H + j];
    for (int i = 0; i < H; ++i) {
      const float* row = w + static_cast<std::size_t>(i) * H;
      float* grow = gw + static_cast<std::size_t>(i) * H;
      for (int r = 0; r < R; ++r) {
        const float x = acts[l][r * H + i];
        const float* dz = dy.data() + r * H;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < H; ++j) {
          grow[j] += x * dz[j];
          sum += row[j] * dz[j];
        }
        dx[r * H + i] = sum;
      }
    }
    p.release();
    engine.reduce_grads(units[l]);
    dy.swap(dx);
  }
}

void BM_EngineStep(benchmark::State& state) {
  const int world = static_cast<int>(state.range(0));
  const int stage = static_cast<int>(state.range(1));
  const bool overlap = state.range(2) != 0;
  zero::EngineOptions options;
  options.stage = stage;
  options.overlap_comm = overlap;
  options.reduce_bucket_size = 4'000'000;
  options.prefetch_bucket_size = 3'000'000;
  options.max_live_parameters = 6'000'000;
  options.param_persistence_threshold = 0;
  options.gradient_clipping = 1.0;
  options.optimizer.type = zero::config::OptimizerType::kAdamW;
  double seconds = 0.0, forward_backward = 0.0;
  std::mutex mutex;
  for (auto _ : state) {
    zero::run_ranks(world, [&](zero::Communicator& comm) {
      omp_set_num_threads(1);  // ranks are the parallelism
      const std::unique_ptr<zero::Engine> owner = zero::make_engine(options, comm);
      zero::Engine& engine = *owner;
      std::vector<zero::UnitId> units;
      for (int l = 0; l < kUnits; ++l)
        units.push_back(engine.register_unit("linear." + std::to_string(l),
                                             {{"weight", {kHidden, kHidden}}, {"bias", {kHidden}}},
                                             [](const zero::TensorSlot&, std::span<float> values) {
                                               for (std::size_t i = 0; i < values.size(); ++i)
                                                 values[i] = 0.02f * std::sin(0.37f * i);
                                             }));
      micro_step(engine, units);  // warm-up: first gathers record the prefetch trace
      engine.step();
      engine.average_across_ranks(0.0);
      using Clock = std::chrono::steady_clock;
      const auto start = Clock::now();
      double micro_seconds = 0.0;
      for (int s = 0; s < kMeasuredSteps; ++s) {
        const auto micro_start = Clock::now();
        micro_step(engine, units);
        micro_seconds += std::chrono::duration<double>(Clock::now() - micro_start).count();
        engine.step();
      }
      engine.average_across_ranks(0.0);
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      if (comm.rank() == 0) {
        std::lock_guard lock(mutex);
        seconds = elapsed / kMeasuredSteps;
        forward_backward = micro_seconds / kMeasuredSteps;
      }
    });
    state.SetIterationTime(seconds);
  }
  state.counters["params_M"] = kUnits * (kHidden * kHidden + kHidden) / 1e6;
  state.counters["step_s"] = seconds;
  // Forward + backward with the gathers and reductions they wait for; the rest is step().
  state.counters["fwd_bwd_s"] = forward_backward;
}

}  // namespace

// Args: world, stage, overlap.
BENCHMARK(BM_EngineStep)
    ->ArgsProduct({{2, 4}, {0, 1, 3}, {0, 1}})
    ->ArgNames({"world", "stage", "overlap"})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
