// Offloaded engine state beyond the parity runs (engine_offload_test): the checkpoint view of an
// offloaded engine resumes bitwise; a failing swap read stops the step naming rank, step and file;
// the pinned space is page-locked on the CPU backend; what offload cannot run is refused by name.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "memory_swap_store.h"
#include "offload_modes.h"
#include "shard_image.h"
#include "test_model.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/device_context.h"
#include "zero/optim/optimizers.h"

namespace zero::testing {
namespace {

// ---- checkpoint state ----

// shard_states() of an offloaded engine (host master, or nvme regions read into a host copy and
// written back on load) saved after 3 steps and loaded into a fresh engine continue as the
// uninterrupted run, bitwise.
TEST(EngineOffload, CheckpointStateResumesBitwise) {
  for (Mode mode : {Mode::kCpu, Mode::kNvme, Mode::kNvmeParams, Mode::kCpuRatio, Mode::kParamsNvme,
                    Mode::kCpuRatioParamsNvme}) {
    EngineOptions options = parity_options(3, 1);
    options.scheduler.total_num_steps = 6;
    apply_offload(options, mode, 1300, 160);
    auto train = [&](Engine& engine, TinyStack& model, Communicator& comm, int first, int count) {
      for (int step = first; step < first + count; ++step) {
        model.micro_step(engine, make_batch({}, step, comm.rank() * 12, 12));
        engine.step();
      }
    };
    std::vector<std::vector<float>> uninterrupted, resumed;
    std::vector<ShardImage> images(2);
    std::vector<TrainingState> training(2);
    run_ranks(2, [&](Communicator& comm) {
      std::unique_ptr<Engine> engine = make_engine(options, comm);
      engine->set_swap_store_factory(memory_swap_store_factory());
      TinyStack model;
      model.register_units(*engine);
      train(*engine, model, comm, 0, 3);
      images[static_cast<std::size_t>(comm.rank())] = take_shard_image(*engine);
      training[static_cast<std::size_t>(comm.rank())] = engine->training_state();
      train(*engine, model, comm, 3, 3);  // continues after shard_states() (nvme: written back)
      std::vector<std::vector<float>> params = gathered_parameters(*engine);
      if (comm.rank() == 0) uninterrupted = std::move(params);
    });
    run_ranks(2, [&](Communicator& comm) {
      std::unique_ptr<Engine> engine = make_engine(options, comm);
      engine->set_swap_store_factory(memory_swap_store_factory());
      TinyStack model;
      model.register_units(*engine);
      put_shard_image(*engine, images[static_cast<std::size_t>(comm.rank())]);
      engine->set_training_state(training[static_cast<std::size_t>(comm.rank())]);
      engine->refresh_params();
      train(*engine, model, comm, 3, 3);
      std::vector<std::vector<float>> params = gathered_parameters(*engine);
      if (comm.rank() == 0) resumed = std::move(params);
    });
    ASSERT_EQ(resumed.size(), uninterrupted.size());
    for (std::size_t u = 0; u < resumed.size(); ++u)
      EXPECT_EQ(resumed[u], uninterrupted[u]) << name_of(mode) << " unit " << u;
  }
}

// A failing swap read (a short read, as a truncated swap file gives) stops step() with an error
// naming the rank, the step and the store's file; later calls fail too (sticky).
TEST(EngineOffload, SwapErrorStopsTheStepNamingRankStepAndFile) {
  EngineOptions options = parity_options(2, 1);
  apply_offload(options, Mode::kNvme, 1300, 0);
  SwapStoreCounters counters;
  counters.fail_read = 18;  // in the second step (5 sub-groups × master, state, gradients)
  run_ranks(1, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    engine->set_swap_store_factory(memory_swap_store_factory(&counters));
    TinyStack model;
    model.register_units(*engine);
    model.micro_step(*engine, make_batch({}, 0, 0, 24));
    EXPECT_TRUE(engine->step());
    model.micro_step(*engine, make_batch({}, 1, 0, 24));
    try {
      engine->step();
      ADD_FAILURE() << "step() succeeded after a failed read";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("rank 0/1, stage 2"), std::string::npos) << message;
      EXPECT_NE(message.find("global step 2"), std::string::npos) << message;
      EXPECT_NE(message.find("short read of /offload-test/optimizer/"), std::string::npos)
          << message;
    }
    EXPECT_THROW(engine->shard_states(), Error);  // sticky
  });
}

// ---- pinned host memory (CPU backend) ----

// VmLck of this process in KiB (/proc/self/status), -1 where unknown.
long locked_kib() {
  std::FILE* file = std::fopen("/proc/self/status", "r");
  if (file == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, file) != nullptr)
    if (std::sscanf(line, "VmLck: %ld kB", &kib) == 1) break;
  std::fclose(file);
  return kib;
}

TEST(EngineOffload, PinnedSpaceIsPageLockedOnTheCpuBackend) {
  const long before = locked_kib();
  if (before < 0) GTEST_SKIP() << "no VmLck in /proc/self/status";
  std::unique_ptr<DeviceContext> context = make_cpu_context();
  rlimit limit{};
  getrlimit(RLIMIT_MEMLOCK, &limit);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < (2u << 20))
    GTEST_SKIP() << "RLIMIT_MEMLOCK below 2 MiB";
  {
    Buffer pinned = context->allocator(MemorySpace::kHostPinned)
                        .allocate(1 << 20, MemoryCategory::kOptimizerState);
    EXPECT_GE(locked_kib() - before, 1024);
    EXPECT_EQ(context->ledger()
                  .entry(MemorySpace::kHostPinned, MemoryCategory::kOptimizerState)
                  .current_bytes,
              1 << 20);
  }
  context->allocator(MemorySpace::kHostPinned).release_cached();
  EXPECT_EQ(locked_kib(), before);        // unlocked when returned to the system
  if (limit.rlim_cur != RLIM_INFINITY) {  // past the limit: plain pages (one warning), no error
    Buffer large = context->allocator(MemorySpace::kHostPinned)
                       .allocate(limit.rlim_cur + (1 << 20), MemoryCategory::kOptimizerState);
    EXPECT_NE(large.data(), nullptr);
  }
}

// ---- errors ----

TEST(EngineOffload, RefusesWhatItCannotRun) {
  auto message_of = [](const EngineOptions& options) -> std::string {
    try {
      validate(options);
    } catch (const Error& error) {
      return error.what();
    }
    return "";
  };
  EngineOptions options = parity_options(0, 1);
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  EXPECT_NE(message_of(options).find("needs ZeRO stage 1, 2 or 3"), std::string::npos);
  options.stage = 2;
  options.offload_optimizer.device = config::OffloadDevice::kNvme;
  EXPECT_NE(message_of(options).find("offload_optimizer.nvme_path is required"), std::string::npos);
  options.offload_optimizer.nvme_path = "/x";
  options.offload_optimizer.ratio = 0.5;  // partial offload: stage 3 and cpu only
  EXPECT_NE(message_of(options).find("partial offload needs stage 3"), std::string::npos);
  options.stage = 3;  // nvme still refused, naming the field; offload_param may join a ratio
  EXPECT_NE(message_of(options).find("offload_optimizer.device \"cpu\" (got stage 3, device "
                                     "\"nvme\")"),
            std::string::npos);
  options.offload_optimizer.device = config::OffloadDevice::kCpu;
  options.offload_param.device = config::OffloadDevice::kNvme;
  options.offload_param.nvme_path = "/x";
  EXPECT_EQ(message_of(options), "");
  options.offload_param.device = config::OffloadDevice::kNone;
  options.offload_optimizer.device = config::OffloadDevice::kNvme;
  options.stage = 2;
  options.offload_optimizer.ratio = 1.0;
  options.optimizer.type = config::OptimizerType::kLamb;
  EXPECT_NE(message_of(options).find("Lamb"), std::string::npos);
  options = parity_options(3, 1);
  options.offload_param.device = config::OffloadDevice::kNvme;
  EXPECT_NE(message_of(options).find("offload_param.nvme_path is required"), std::string::npos);

  // nvme without a swap store in this build and none injected: the key and what is missing.
  options = parity_options(2, 1);
  apply_offload(options, Mode::kNvme, 1300, 0);
  run_ranks(1, [&](Communicator& comm) {
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    engine->set_swap_store_factory([](const NvmeSwapOptions& store) -> std::unique_ptr<SwapStore> {
      ZERO_THROW("cannot open ", store.nvme_path.string(), " (test)");
    });
    TinyStack model;
    model.register_units(*engine);
    try {
      engine->initialize();
      ADD_FAILURE() << "initialize() succeeded without a swap store";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("offload_optimizer.nvme_path '/offload-test/optimizer'"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("(test)"), std::string::npos) << message;
    }
  });
}

// An engine built without zero::make_engine has no swap store factory: nvme offload is refused at
// initialize(), naming the key and the two ways to give it one (zero::core knows no store).
TEST(EngineOffload, NvmeWithoutAStoreFactoryNamesWhatToDo) {
  EngineOptions options = parity_options(3, 1);
  apply_offload(options, Mode::kNvme, 1300, 0);
  run_ranks(1, [&](Communicator& comm) {
    Engine engine(options, comm, optim::make_optimizer(options.optimizer));
    TinyStack model;
    model.register_units(engine);
    try {
      engine.initialize();
      ADD_FAILURE() << "initialize() succeeded without a swap store factory";
    } catch (const Error& error) {
      const std::string message = error.what();
      for (const char* expected :
           {"offload_optimizer.device is \"nvme\"", "no swap store factory", "zero::make_engine",
            "set_swap_store_factory(zero::make_nvme_swap_store)"})
        EXPECT_NE(message.find(expected), std::string::npos) << expected << " in " << message;
    }
  });
}

}  // namespace
}  // namespace zero::testing
