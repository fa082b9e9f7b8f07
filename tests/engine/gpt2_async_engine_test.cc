// The CPU backend's asynchronous mode (CpuContextOptions::asynchronous: the model's kernels on the
// compute stream, ordered by events as on CUDA) through the engine, on GPT-2:
// - the parity matrix (stages 0-3, worlds 1, 2, 4, fp32 and bf16, offload none / optimizer cpu /
//   optimizer nvme / optimizer + params cpu / optimizer cpu at ratio 0.5 with params nvme) equals
//   host mode bit for bit, with the async
//   context's streams under stress (random delays), so a missing event wait shows as a difference;
// - the host waits a training step makes are counted and bounded, and do not grow with depth;
// - every buffer the engine hands to its communicator is the context's device memory.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "checking_communicator.h"
#include "gpt2_engine_driver.h"
#include "memory_swap_store.h"
#include "mixed_precision_runs.h"
#include "offload_runs.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/cpu_stream.h"
#include "zero/core/device_context.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/engine_model.h"

namespace zero::testing {
namespace {

enum class Offload {
  kNone,
  kOptimizerCpu,
  kOptimizerNvme,
  kOptimizerAndParamsCpu,
  kPartialAndParamsNvme
};

std::string name_of(Offload offload) {
  switch (offload) {
    case Offload::kNone: return "no offload";
    case Offload::kOptimizerCpu: return "optimizer cpu";
    case Offload::kOptimizerNvme: return "optimizer nvme";
    case Offload::kOptimizerAndParamsCpu: return "optimizer + params cpu";
    case Offload::kPartialAndParamsNvme: return "optimizer cpu ratio 0.5 + params nvme";
  }
  return "?";
}

void apply(EngineOptions& options, Offload offload) {
  using config::OffloadDevice;
  options.sub_group_size = 13'000;
  if (offload == Offload::kNone) return;
  options.offload_optimizer.pin_memory = true;
  if (offload == Offload::kOptimizerNvme) {
    options.offload_optimizer.device = OffloadDevice::kNvme;
    options.offload_optimizer.nvme_path = "/async-test/optimizer";
    options.offload_optimizer.pipeline_read = true;
    options.offload_optimizer.pipeline_write = true;
    return;
  }
  options.offload_optimizer.device = OffloadDevice::kCpu;
  if (offload == Offload::kOptimizerAndParamsCpu) {
    options.offload_param.device = OffloadDevice::kCpu;
    options.offload_param.pin_memory = true;
  }
  if (offload == Offload::kPartialAndParamsNvme) {  // the embeddings' sub-group on the device
    options.offload_optimizer.ratio = 0.5;
    options.offload_param.device = OffloadDevice::kNvme;
    options.offload_param.nvme_path = "/async-test/params";
    options.offload_param.max_in_cpu = 0;
  }
}

bool stage3_only(Offload offload) {
  return offload == Offload::kOptimizerAndParamsCpu || offload == Offload::kPartialAndParamsNvme;
}

// Stress of the asynchronous runs: ZERO_STREAM_STRESS's seed when set, else a fixed one.
StreamStress async_stress() {
  StreamStress stress = StreamStress::from_environment();
  if (!stress.enabled()) stress = {20261126, std::chrono::microseconds(30)};
  return stress;
}

// The engine's full parameters in fp32 (read on the host once the compute stream has run).
std::vector<std::vector<float>> parameters_of(Engine& engine) {
  std::vector<std::vector<float>> values;
  for (std::size_t u = 0; u < engine.num_units(); ++u) {
    GatheredUnit p = engine.gather(static_cast<UnitId>(u));
    engine.context().compute_stream().synchronize();
    std::vector<float> unit(p.layout().num_elements());
    convert(p.raw(), p.dtype(), unit.data(), DType::kFloat32, unit.size());
    values.push_back(std::move(unit));
  }
  return values;
}

struct AsyncRun {
  TrainResult result;
  std::vector<std::uint64_t> host_waits;  // rank 0's, per optimizer step (micro-steps + step())
};

// `steps` optimizer steps of GPT-2 (gpt2_parity_options, one micro-step each) on `world` thread
// ranks, each rank on its own CPU context in the given mode, then one evaluation (its loss is the
// last of `losses`, with a grad norm of 0) after the step has settled.
AsyncRun run(int stage, int world, DType dtype, Offload offload, bool asynchronous, int steps = 3,
             gpt2::GPT2Config config = tiny_gpt2_config()) {
  GPT2Run gpt2 = mixed_run(dtype, stage, 1, steps);
  gpt2.config = config;
  apply(gpt2.options, offload);
  AsyncRun outcome;
  std::mutex mutex;
  run_ranks(world, [&](Communicator& comm) {
    omp_set_num_threads(1);
    const std::unique_ptr<DeviceContext> context = make_cpu_context(
        {.stress = asynchronous ? async_stress() : StreamStress{}, .asynchronous = asynchronous});
    std::unique_ptr<Engine> engine = make_engine(gpt2.options, comm, {.context = context.get()});
    engine->set_swap_store_factory(memory_swap_store_factory());
    const int rows = gpt2.global_batch / world;
    // Activations in the context's device memory (asynchronous mode requires it).
    gpt2::EngineModel model(*engine, gpt2.config, rows, gpt2.seq_len, gpt2.seed,
                            engine->allocator());
    AsyncRun mine;
    for (int step = 0; step < gpt2.steps; ++step) {
      const int first = comm.rank() * rows;
      const TokenBatch batch = make_token_batch(gpt2.config, gpt2.seq_len, step, first, rows);
      const std::uint64_t waits_before = cpu_host_waits_on_this_thread();
      const double loss = model.train_micro_step(
          batch.tokens, batch.targets,
          {gpt2.seed, static_cast<std::uint64_t>(step), first, /*training=*/true});
      engine->step();
      mine.host_waits.push_back(cpu_host_waits_on_this_thread() - waits_before);
      // This rank's loss: averaging here would order the compute stream after the communication
      // stream every step, hiding a missing event wait of the next forward.
      mine.result.losses.push_back(loss);
      mine.result.grad_norms.push_back(engine->global_grad_norm());
    }
    // An evaluation after the last step has settled (as the trainer's evaluate and save do): its
    // gathers must follow the parameters the step copied to the device.
    engine->wait_for_step();
    const int first = comm.rank() * rows;
    const TokenBatch batch = make_token_batch(gpt2.config, gpt2.seq_len, gpt2.steps, first, rows);
    mine.result.losses.push_back(model.eval_loss(batch.tokens, batch.targets));
    mine.result.grad_norms.push_back(0.0);
    mine.result.params = parameters_of(*engine);
    engine.reset();  // before its context
    if (comm.rank() == 0) {
      std::lock_guard lock(mutex);
      outcome = std::move(mine);
    }
  });
  return outcome;
}

class AsyncMode : public ::testing::TestWithParam<std::tuple<int, int, DType>> {};

TEST_P(AsyncMode, EqualsHostModeBitwiseUnderStreamStress) {
  const auto [stage, world, dtype] = GetParam();
  for (Offload offload : {Offload::kNone, Offload::kOptimizerCpu, Offload::kOptimizerNvme,
                          Offload::kOptimizerAndParamsCpu, Offload::kPartialAndParamsNvme}) {
    if (stage == 0 && offload != Offload::kNone) continue;  // offload needs ZeRO (stage >= 1)
    if (stage3_only(offload) && stage != 3) continue;       // DeepSpeed's rule
    const std::string what = std::string(zero::name_of(dtype)) + " stage " + std::to_string(stage) +
                             " world " + std::to_string(world) + " " + name_of(offload);
    const AsyncRun host = run(stage, world, dtype, offload, false);
    const AsyncRun async = run(stage, world, dtype, offload, true);
    expect_bitwise(async.result, host.result, what);
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, AsyncMode,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3),
                                            ::testing::Values(1, 2, 4),
                                            ::testing::Values(DType::kFloat32, DType::kBFloat16)),
                         [](const auto& test) {
                           return "stage" + std::to_string(std::get<0>(test.param)) + "_world" +
                                  std::to_string(std::get<1>(test.param)) + "_" +
                                  std::string(zero::name_of(std::get<2>(test.param)));
                         });

// Asynchronous mode's host waits per step, measured at world 2 with 2 and 4 layers: 4 at stage 0,
// 5 at stage 3 (the inputs' reuse, the loss, the gradient norm, the step; host mode: 21 and 22).
constexpr std::uint64_t kMaxHostWaitsPerStep = 5;

// Host mode waits for the compute stream before every unit it hands the model; asynchronous mode
// waits only where the step needs a value on the host (the loss, the gradient norm), so its count
// stays bounded and does not grow with the number of layers.
TEST(AsyncModeHostWaits, ArePerStepBoundedAndIndependentOfDepth) {
  gpt2::GPT2Config deep = tiny_gpt2_config();
  deep.n_layer = 4;
  for (int stage : {0, 3}) {
    const std::string what = "stage " + std::to_string(stage);
    const AsyncRun shallow_async = run(stage, 2, DType::kFloat32, Offload::kNone, true);
    const AsyncRun deep_async = run(stage, 2, DType::kFloat32, Offload::kNone, true, 3, deep);
    const AsyncRun deep_host = run(stage, 2, DType::kFloat32, Offload::kNone, false, 3, deep);
    for (std::size_t step = 1; step < shallow_async.host_waits.size(); ++step) {
      EXPECT_LE(deep_async.host_waits[step], kMaxHostWaitsPerStep) << what << " step " << step;
      EXPECT_EQ(deep_async.host_waits[step], shallow_async.host_waits[step])
          << what << " step " << step << ": waits grow with the layers";
      EXPECT_GT(deep_host.host_waits[step], deep_async.host_waits[step]) << what;
    }
    std::printf("%s host waits per step (L=4): async %llu, host %llu\n", what.c_str(),
                static_cast<unsigned long long>(deep_async.host_waits.back()),
                static_cast<unsigned long long>(deep_host.host_waits.back()));
  }
}

// The engine's collectives (initial broadcast, gathers, reductions, the gradient norm, averages)
// take the context's device memory only: the buffers NCCL would be handed on a GPU.
TEST(AsyncModeCollectives, TakeOnlyTheContextsDeviceBuffers) {
  for (int stage : {0, 1, 2, 3, 4}) {  // 4: stage 3 with the partial offload and params on NVMe
    GPT2Run gpt2 = mixed_run(DType::kBFloat16, std::min(stage, 3), 1, 2);
    if (stage == 4) apply(gpt2.options, Offload::kPartialAndParamsNvme);
    std::mutex mutex;
    std::vector<std::string> violations;
    std::int64_t checked = 0;
    run_ranks(2, [&](Communicator& thread_comm) {
      omp_set_num_threads(1);
      TrackingDeviceContext context({.stress = async_stress(), .asynchronous = true});
      CheckingCommunicator comm(thread_comm, context.device_allocator());
      std::unique_ptr<Engine> engine = make_engine(gpt2.options, comm, {.context = &context});
      engine->set_swap_store_factory(memory_swap_store_factory());
      const int rows = gpt2.global_batch / 2;
      gpt2::EngineModel model(*engine, gpt2.config, rows, gpt2.seq_len, gpt2.seed,
                              engine->allocator());
      for (int step = 0; step < gpt2.steps; ++step) {
        const int first = comm.rank() * rows;
        const TokenBatch batch = make_token_batch(gpt2.config, gpt2.seq_len, step, first, rows);
        const double loss =
            model.train_micro_step(batch.tokens, batch.targets,
                                   {gpt2.seed, static_cast<std::uint64_t>(step), first, true});
        engine->step();
        engine->average_across_ranks(loss);
      }
      comm.synchronize();
      engine.reset();
      std::lock_guard lock(mutex);
      for (std::string& line : comm.violations()) violations.push_back(std::move(line));
      checked += comm.buffers_checked();
    });
    EXPECT_GT(checked, 0) << "stage " << stage;
    for (const std::string& line : violations) ADD_FAILURE() << "stage " << stage << ": " << line;
  }
}

}  // namespace
}  // namespace zero::testing
