// The plan of a whole run (zero/train/plan.h): its phases, the node's memory (node_memory.h), the
// fit against it with settings found by re-planning, the NVMe free-space check, and zero::train
// refusing a run whose plan cannot finish before anything is allocated.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../offload/swap_test_dir.h"
#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/node_memory.h"
#include "zero/gpt2/compute.h"
#include "zero/train/estimate.h"
#include "zero/train/plan.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;
using testing::TempFolder;

std::int64_t reserved(const RankPlan& plan, Phase phase, MemorySpace space) {
  return plan.phase(phase).in(space);
}

// GPT-2 of `shape` (by default 8 layers of width 256), blocks of `block` tokens, stage 3, every
// state on NVMe (a path that is never touched) in sub-groups of `sub_group`, fp32 or bf16.
PlanSetup nvme_setup(const fs::path& swap, bool bf16 = false,
                     const std::string& shape = "n_layer=8,n_embd=256,n_head=4,n_positions=32",
                     std::int64_t block = 32, const std::string& sub_group = "100000") {
  TrainingArguments arguments;
  arguments.config_overrides = shape;
  arguments.output_dir = (swap / "out").string();
  arguments.train_files = {(swap / "corpus.txt").string()};  // never read by a plan
  arguments.block_size = block;
  arguments.per_device_train_batch_size = 1;
  arguments.do_train = true;
  arguments.max_steps = 4;
  arguments.save_steps = 2;
  arguments.save_strategy = IntervalStrategy::kSteps;
  arguments.bf16 = bf16;
  PlanSetup setup = plan_setup(arguments, 1,
                               R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {
      "stage": 3, "sub_group_size": )" +
                                   sub_group + R"(,
      "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                                   swap.string() + R"("},
      "offload_param": {"device": "nvme", "nvme_path": ")" +
                                   swap.string() + R"(", "max_in_cpu": 0}}})");
  return setup;
}

TEST(NodeMemory, ReadsMemTotalAndTheSmallestCgroupLimitOverTheAncestors) {
  TempFolder root("cgroups");
  const fs::path v1 = root.path() / "memory" / "jobs" / "job1";
  fs::create_directories(v1);
  std::ofstream(root.path() / "memory" / "memory.limit_in_bytes") << "9223372036854771712\n";
  std::ofstream(root.path() / "memory" / "jobs" / "memory.limit_in_bytes") << "2147483648\n";
  std::ofstream(v1 / "memory.limit_in_bytes") << "4294967296\n";
  const std::string meminfo = "MemTotal:       24684504 kB\nMemAvailable:   23000000 kB\n";
  const NodeMemory v1_node =
      parse_node_memory(meminfo, "5:devices:/\n4:memory:/jobs/job1\n0::/\n", root.path());
  EXPECT_EQ(v1_node.total_bytes, 24684504ll * 1024);
  EXPECT_EQ(v1_node.available_bytes, 23000000ll * 1024);
  EXPECT_EQ(v1_node.cgroup_limit_bytes, 2147483648ll);  // the parent's is smaller
  EXPECT_EQ(v1_node.limit_bytes(), 2147483648ll);
  EXPECT_NE(v1_node.describe().find("jobs/memory.limit_in_bytes"), std::string::npos)
      << v1_node.describe();

  const fs::path v2 = root.path() / "user.slice" / "run";
  fs::create_directories(v2);
  std::ofstream(v2 / "memory.max") << "1073741824\n";
  std::ofstream(root.path() / "user.slice" / "memory.max") << "max\n";
  const NodeMemory v2_node = parse_node_memory(meminfo, "0::/user.slice/run\n", root.path());
  EXPECT_EQ(v2_node.limit_bytes(), 1073741824ll);

  const NodeMemory free_node = parse_node_memory(meminfo, "0::/user.slice\n", root.path());
  EXPECT_EQ(free_node.cgroup_limit_bytes, 0);
  EXPECT_EQ(free_node.limit_bytes(), 24684504ll * 1024);
  EXPECT_THROW(parse_node_memory("MemFree: 1 kB\n", "", root.path()), Error);
}

TEST(NodeMemory, ReadsThisProcessAndResetsItsPeak) {
  EXPECT_GT(read_node_memory().total_bytes, 0);
  const ProcessMemory before = read_process_memory();
  ASSERT_GT(before.resident_bytes, 0);
  ASSERT_GE(before.peak_resident_bytes, before.resident_bytes);
  {
    std::vector<char> touched(256u << 20, 1);  // a peak 256 MiB above
    ASSERT_EQ(touched[12345], 1);
  }
  const ProcessMemory high = read_process_memory();
  EXPECT_GE(high.peak_resident_bytes, before.resident_bytes + (200ll << 20));
  if (!reset_peak_resident()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  EXPECT_LT(read_process_memory().peak_resident_bytes, high.peak_resident_bytes - (200ll << 20));
}

// `zero estimate` describes GPU ranks (--num_gpus_per_node of --gpu_memory) and plans them with the
// CUDA kernels' activation layout wherever it runs: on this machine (no GPU) it once planned the
// CPU kernels' softmax (B·NH·T·T floats a layer: 9.7 GB at GPT-2 124M, B 16, T 1024) for an
// 80 GiB GPU. --use_cpu plans CPU ranks.
TEST(Estimate, PlansGpuRanksWithTheCudaKernelsLayoutWhereverItRuns) {
  const std::int64_t B = 4, T = 256;
  auto estimate_with = [&](bool use_cpu) {
    TrainingArguments arguments;
    arguments.dry_run = true;  // as `zero estimate` sets it
    arguments.config_overrides = "n_layer=2,n_embd=128,n_head=4,n_positions=256";
    arguments.per_device_train_batch_size = B;
    arguments.block_size = T;
    arguments.bf16 = true;
    arguments.use_cpu = use_cpu;
    std::vector<std::string> notes;
    return estimate_run(arguments, EstimateArguments{}, notes);
  };
  auto layout = [&](const Estimate& estimate, DeviceKind device) {
    return gpt2::GPT2Compute::plan(*estimate.setup.model, B, T,
                                   {.param_dtype = DType::kBFloat16, .device = device})
        .total_bytes();
  };
  const Estimate gpu = estimate_with(false), cpu = estimate_with(true);
  ASSERT_TRUE(gpu.plan.activation_parts && cpu.plan.activation_parts);
  const std::size_t cuda_bytes = layout(gpu, DeviceKind::kCuda);
  const std::size_t cpu_bytes = layout(cpu, DeviceKind::kCpu);
  ASSERT_LT(cuda_bytes, cpu_bytes);  // the CPU keeps the softmax, CUDA a log-sum-exp per row
  EXPECT_FALSE(gpu.setup.device_is_host);
  EXPECT_EQ(gpu.plan.activation_parts->total_bytes(), cuda_bytes);
  EXPECT_TRUE(cpu.setup.device_is_host);
  EXPECT_EQ(cpu.plan.activation_parts->total_bytes(), cpu_bytes);
}

TEST(RunPlan, PlansEveryPhaseTheRunEntersInItsOrder) {
  TrainingArguments arguments;
  arguments.do_train = true;
  arguments.do_eval = true;
  arguments.save_strategy = IntervalStrategy::kSteps;
  arguments.save_steps = 2;
  PhaseSchedule schedule = plan_phases(arguments, 4, 10);
  EXPECT_TRUE(schedule.train && schedule.evaluate && schedule.checkpoint);
  EXPECT_TRUE(schedule.step_after_checkpoint && schedule.checkpoint_at_last_step);
  schedule = plan_phases(arguments, 3, 10);
  EXPECT_TRUE(schedule.step_after_checkpoint && !schedule.checkpoint_at_last_step);
  schedule = plan_phases(arguments, 1, 10);
  EXPECT_FALSE(schedule.checkpoint);
  schedule = plan_phases(arguments, 0, 0);  // unknown length: planned to save
  EXPECT_TRUE(schedule.checkpoint && schedule.checkpoint_at_last_step);
  arguments.save_strategy = IntervalStrategy::kNo;
  EXPECT_FALSE(plan_phases(arguments, 4, 10).checkpoint);
}

TEST(RunPlan, TheCheckpointPhaseStreamsNvmeStates) {
  TempFolder swap("plan_swap");
  const PlanSetup setup = nvme_setup(swap.path());
  const RankPlan plan = plan_rank(setup, 1, 0);
  for (Phase phase : {Phase::kLoad, Phase::kTrain, Phase::kCheckpoint, Phase::kFinalSave})
    EXPECT_TRUE(plan.phase(phase).runs) << name_of(phase);
  EXPECT_FALSE(plan.phase(Phase::kEvaluation).runs);
  // Saving a checkpoint streams master and moments from NVMe one sub-group at a time
  // (Engine::visit_shard_states), never the whole checkpoint view ((1 + 2) x 4 bytes per owned
  // element with Adam) in host memory at once.
  const std::int64_t view = 12 * plan.padded_parameters;
  EXPECT_LT(reserved(plan, Phase::kCheckpoint, MemorySpace::kHost) +
                reserved(plan, Phase::kCheckpoint, MemorySpace::kHostPinned),
            reserved(plan, Phase::kLoad, MemorySpace::kHost) +
                reserved(plan, Phase::kLoad, MemorySpace::kHostPinned) + view);
  EXPECT_GT(reserved(plan, Phase::kCheckpoint, MemorySpace::kNvme), 0);
  EXPECT_GT(plan.phase(Phase::kFinalSave).outside_host_bytes, 0);
  // The run's peaks are the largest over the phases.
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s)
    for (std::size_t p = 0; p < kNumPhases; ++p)
      EXPECT_GE(plan.peaks.reserved[s], plan.phases[p].reserved[s]);
  EXPECT_NE(format_phases(plan, true).find("checkpoint"), std::string::npos);
}

// checkpoint-N/ holds the model files the final save writes (each unit's fp32 master gathered in
// turn), so the checkpoint phase holds at least what the final save holds in the ledger, with the
// writer's buffers outside it; the trainer is back in its train phase after a save with what the
// save reserved still reserved, so training is planned at least that high (measured at the XL
// shape: checkpoint and train 6632 MiB, planned 5965 before, 6783 with both).
TEST(RunPlan, TheCheckpointPhaseWritesTheModelAndTrainingKeepsItsReserve) {
  TempFolder swap("plan_swap_model");
  // The measured run (benchmarks/beyond_memory.sh SHAPE=xl): bf16, sub-groups of 1e8, where the
  // save's host buffer of a sub-group's fp32 master comes on top of what training reserves.
  PlanSetup setup =
      nvme_setup(swap.path(), /*bf16=*/true, "n_embd=1600,n_layer=48,n_head=25,n_positions=1024",
                 128, "100000000");
  for (bool step_after : {true, false}) {
    setup.phases.step_after_checkpoint = step_after;  // 2 of 4 steps, or at the last step
    const RankPlan plan = plan_rank(setup, 1, 0);
    for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
      const auto space = static_cast<MemorySpace>(s);
      if (space == MemorySpace::kNvme) continue;
      EXPECT_GE(reserved(plan, Phase::kCheckpoint, space), reserved(plan, Phase::kFinalSave, space))
          << name_of(space);
      EXPECT_GE(reserved(plan, Phase::kTrain, space), reserved(plan, Phase::kCheckpoint, space))
          << name_of(space);
    }
    EXPECT_EQ(plan.phase(Phase::kCheckpoint).outside_host_bytes,
              plan.phase(Phase::kFinalSave).outside_host_bytes);
  }
}

// A resume reads the checkpoint into the states one NVMe sub-group slot at a time
// (Engine::fill_shard_states), so its load phase holds what a fresh run's does (the initialisation
// already uses such a slot), not the whole checkpoint view (12 bytes per owned element).
TEST(RunPlan, TheLoadPhaseOfAResumeStreamsNvmeStates) {
  TempFolder swap("plan_swap");
  PlanSetup setup = nvme_setup(swap.path());
  const RankPlan fresh = plan_rank(setup, 1, 0);
  setup.phases.resume = true;
  const RankPlan resumed = plan_rank(setup, 1, 0);
  auto host = [](const RankPlan& plan, Phase phase) {
    return reserved(plan, phase, MemorySpace::kHost) +
           reserved(plan, phase, MemorySpace::kHostPinned);
  };
  const std::int64_t view = 12 * fresh.padded_parameters;
  EXPECT_GE(host(resumed, Phase::kLoad), host(fresh, Phase::kLoad));
  EXPECT_LT(host(resumed, Phase::kLoad) - host(fresh, Phase::kLoad), view / 8);
  EXPECT_LT(host(resumed, Phase::kTrain) - host(fresh, Phase::kTrain), view / 8);
}

TEST(RunPlan, ADoesNotFitNamesThePhaseAndTheProposalIsPlannedAgain) {
  TempFolder swap("plan_swap");
  PlanSetup setup = nvme_setup(swap.path());
  setup.engine.offload_optimizer.device = config::OffloadDevice::kNone;
  setup.engine.offload_param.device = config::OffloadDevice::kNone;
  setup.engine.sub_group_size = 1'000'000'000;
  // No checkpoints: saving one from NVMe reads every optimizer state into host memory (the
  // engine's checkpoint view), which no setting tried here removes.
  setup.phases.checkpoint = false;
  RankPlan plan = plan_rank(setup, 1, 0);
  plan.baseline_bytes = 1 << 20;
  NodeMemory node;
  node.total_bytes = planned_resident_bytes(plan, Phase::kTrain, true) / 2;
  const NodeFit fit = node_fit(plan, 1, node, true);
  ASSERT_FALSE(fit.fits);
  EXPECT_EQ(fit.phase, Phase::kLoad);  // the first phase already holds every state
  EXPECT_EQ(fit.message().rfind("does not fit: load needs ", 0), 0u) << fit.message();
  EXPECT_NE(fit.message().find("the node has"), std::string::npos);
  EXPECT_FALSE(node_fit(plan, 1, node, true).fits);
  const NodeFit two = node_fit(plan, 2, node, true);
  EXPECT_EQ(two.needed_bytes, 2 * two.rank_bytes);

  const FitProposal proposal = propose_fit(setup, 1, 1, node, true, plan.baseline_bytes);
  ASSERT_TRUE(proposal.found);
  EXPECT_TRUE(proposal.fit.fits);
  EXPECT_LE(proposal.fit.needed_bytes, node.total_bytes);
  std::string settings;
  for (const std::string& setting : proposal.settings) settings += setting + "; ";
  EXPECT_NE(settings.find("offload_optimizer.device"), std::string::npos) << settings;

  node.total_bytes = 1;  // nothing fits one byte
  EXPECT_FALSE(propose_fit(setup, 1, 1, node, true, plan.baseline_bytes).found);
}

TEST(RunPlan, TheNvmeFreeSpaceCheckNamesThePathTheBytesNeededAndFree) {
  TempFolder swap("plan_swap");
  const PlanSetup setup = nvme_setup(swap.path());
  const RankPlan plan = plan_rank(setup, 1, 0);
  const std::vector<NvmeNeed> needs = nvme_needs(plan, setup.engine, 2);
  ASSERT_EQ(needs.size(), 1u);  // both offloads under one folder
  EXPECT_EQ(needs[0].bytes, 2 * plan.peaks.reserved_peak(MemorySpace::kNvme));
  EXPECT_NO_THROW(check_nvme_free_space(needs));
  const std::vector<NvmeNeed> huge{{swap.path().string(), std::int64_t{1} << 62}};
  try {
    check_nvme_free_space(huge);
    FAIL() << "4 EiB fitted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("nvme_path " + swap.path().string()), std::string::npos) << message;
    EXPECT_NE(message.find("4611686018427387904 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("free"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(check_nvme_free_space({{(swap.path() / "missing").string(), 1ll << 62}}));
}

// A 10B-parameter GPT-2 planned on this node: refused before anything is allocated (no output
// folder, no model-sized resident growth), naming the phase; --dry_run says the same and what
// makes it fit.
TEST(RunPlan, ZeroTrainRefusesARunWhosePlanCannotFinishBeforeAllocating) {
  TempFolder folder("refuse");
  const fs::path corpus = folder.path() / "corpus.txt";
  testing::write_corpus(corpus, 200);
  TrainingArguments arguments = testing::tiny_arguments(corpus, folder.path() / "out");
  arguments.config_overrides = "n_layer=48,n_embd=4096,n_head=32,n_positions=16";
  const NodeMemory node = read_node_memory();
  ASSERT_LT(node.limit_bytes(), 10'000'000'000ll * 16) << "a node with 160 GB holds this run";
  const std::unique_ptr<Communicator> communicator = make_local_communicator();
  const std::int64_t before = read_process_memory().resident_bytes;
  try {
    train(arguments, *communicator, {.print = false});
    FAIL() << "a run of 10B parameters was not refused";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("does not fit: load needs "), std::string::npos) << message;
    EXPECT_NE(message.find("the node has"), std::string::npos) << message;
    EXPECT_NE(message.find("--ignore_memory_plan"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(folder.path() / "out"));
  EXPECT_LT(read_process_memory().resident_bytes - before, 1ll << 30);
}

// zero train with its NVMe swap folder on a 1 MiB tmpfs (a private mount namespace): refused
// before anything is allocated, naming the folder, the bytes the plan swaps there and the free
// bytes.
TEST(RunPlan, ZeroTrainRefusesAnNvmePathWithoutRoomForThePlan) {
  TempFolder folder("nvme_room");
  const fs::path swap = folder.path() / "small";
  if (const std::string why = testing::mount_filesystem(swap, "tmpfs", "size=1m"); !why.empty())
    GTEST_SKIP() << why;
  struct Unmount {  // before the folder is removed, however the test ends
    fs::path path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{swap};
  const fs::path corpus = folder.path() / "corpus.txt";
  testing::write_corpus(corpus, 200);
  TrainingArguments arguments = testing::tiny_arguments(corpus, folder.path() / "out");
  arguments.config_overrides = "n_layer=2,n_embd=256,n_head=4,n_positions=16";
  const fs::path config = folder.path() / "nvme.json";
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {
      "stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": ")"
                        << swap.string() << R"("}}})";
  arguments.deepspeed = config.string();
  const std::unique_ptr<Communicator> communicator = make_local_communicator();
  try {
    train(arguments, *communicator, {.print = false});
    FAIL() << "a swap folder of 1 MiB was accepted";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("nvme_path " + swap.string() + ": the plan swaps "), std::string::npos)
        << message;
    EXPECT_NE(message.find("the filesystem has 1048576 bytes (1.0 MiB) free"), std::string::npos)
        << message;
  }
  EXPECT_FALSE(fs::exists(folder.path() / "out"));
}

}  // namespace
}  // namespace zero::train
