// zero::train on a CUDA device (label cuda; every case skips without one): trainer_test's tiny
// GPT-2 at ZeRO stages 0 and 3, world 1 over NCCL with the model, states and collective buffers in
// device memory, logs the losses of the same run on the CPU. fp32 within 1e-4 (cuBLASLt's GEMMs
// and the kernels' reductions sum in other orders than the CPU's), bf16 within 2e-2; each step's
// two losses and their relative difference are printed, the largest as "measured: ..."
// (tests/common/measured.h) beside its bound, for the GPU log. A run saved
// at step 10 (its states read from device memory) and resumed on the device (written back into
// it) continues the uninterrupted device run bit for bit: losses and saved model. ZeRO-1, 2 and 3
// at worlds 2 and 4 on one device (thread ranks over one CUDA context's streams: the thread
// communicator, since NCCL refuses two ranks on one GPU) within the same bounds of the thread
// communicator's CPU run at the same world. fp16, and bf16 accumulating in bf16, step unit by unit
// through one workspace on the device, within the bf16 bound of the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../common/measured.h"
#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

std::vector<double> run_on(train::TrainingArguments arguments, DeviceKind kind) {
  arguments.use_cpu = kind == DeviceKind::kCpu;
  std::unique_ptr<Communicator> communicator = make_communicator(kind);
  EXPECT_EQ(communicator->world_size(), 1);
  const train::TrainResult result = train::train(arguments, *communicator, {.print = false});
  EXPECT_EQ(result.global_step, arguments.max_steps);
  return logged_losses(result.log_history);
}

// Each of `cpu` and `cuda`'s values within `bound` of the CPU's, relative: a table of both columns
// and the relative difference, and the largest difference printed beside the bound.
void expect_losses_near(const std::vector<double>& cpu, const std::vector<double>& cuda,
                        double bound, const std::string& what) {
  ASSERT_EQ(cuda.size(), cpu.size()) << what;
  double largest = 0.0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    const double relative = std::fabs(cuda[i] - cpu[i]) / std::fabs(cpu[i]);
    std::printf("%s %zu: cpu %.6f cuda %.6f relative difference %.2e\n", what.c_str(), i + 1,
                cpu[i], cuda[i], relative);
    if (relative >= largest) {
      largest = relative;
      at = i + 1;
    }
    EXPECT_NEAR(cuda[i], cpu[i], bound * std::fabs(cpu[i])) << what << " " << i + 1;
  }
  print_measured(what + " losses, the largest relative difference (at " + std::to_string(at) +
                     " of " + std::to_string(cpu.size()) + ")",
                 largest, bound);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

// At stages 0 and 3 on `kind`: 20 steps saving checkpoint-10, and a run resumed from it, log the
// same losses of steps 11-20 and save the same model.safetensors, bit for bit.
void expect_resume_continues_bitwise(const fs::path& folder, bool bf16, DeviceKind kind) {
  write_corpus(folder / "corpus.txt", 600);
  for (const int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const fs::path straight = folder / ("straight_s" + std::to_string(stage));
    train::TrainingArguments arguments = tiny_arguments(folder / "corpus.txt", straight);
    arguments.deepspeed = write_ds_config(folder, stage, /*precision_auto=*/bf16).string();
    arguments.bf16 = bf16;
    arguments.save_strategy = train::IntervalStrategy::kSteps;
    arguments.save_steps = 10;
    const std::vector<double> expected = run_on(arguments, kind);
    ASSERT_TRUE(fs::exists(straight / "checkpoint-10"));
    const fs::path resumed = folder / ("resumed_s" + std::to_string(stage));
    arguments.output_dir = resumed.string();
    arguments.resume_from_checkpoint = (straight / "checkpoint-10").string();
    const std::vector<double> losses = run_on(arguments, kind);
    ASSERT_EQ(expected.size(), 20u);
    ASSERT_EQ(losses.size(), expected.size());
    for (std::size_t step = 10; step < expected.size(); ++step)
      EXPECT_EQ(losses[step], expected[step]) << "step " << step + 1;
    EXPECT_EQ(file_bytes(resumed / "model.safetensors"), file_bytes(straight / "model.safetensors"))
        << "the resumed run saved another model";
  }
}

class TrainCuda : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_P(TrainCuda, LossesMatchTheCpuRunAtStages0And3) {
  const bool bf16 = GetParam();
  TempFolder folder(bf16 ? "cuda_bf16" : "cuda_fp32");
  write_corpus(folder.path() / "corpus.txt", 600);
  for (const int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    train::TrainingArguments arguments = tiny_arguments(
        folder.path() / "corpus.txt", folder.path() / ("cpu_s" + std::to_string(stage)));
    arguments.deepspeed = write_ds_config(folder.path(), stage, /*precision_auto=*/bf16).string();
    arguments.bf16 = bf16;
    const std::vector<double> cpu = run_on(arguments, DeviceKind::kCpu);
    arguments.output_dir = (folder.path() / ("cuda_s" + std::to_string(stage))).string();
    const std::vector<double> cuda = run_on(arguments, DeviceKind::kCuda);
    ASSERT_EQ(cpu.size(), 20u);
    ASSERT_EQ(cuda.size(), cpu.size());
    EXPECT_LT(cuda.back(), cuda.front() - 0.5) << "the loss should fall in 20 steps on the device";
    expect_losses_near(cpu, cuda, bf16 ? 2e-2 : 1e-4, "stage " + std::to_string(stage) + " step");
  }
}

TEST_P(TrainCuda, ResumingFromADeviceCheckpointContinuesTheRunBitwise) {
  const bool bf16 = GetParam();
  TempFolder folder(bf16 ? "cuda_resume_bf16" : "cuda_resume_fp32");
  expect_resume_continues_bitwise(folder.path(), bf16, DeviceKind::kCuda);
}

// `arguments` trained by `world` thread ranks on `kind`, the communicator's collectives stream
// work of a CPU context or of one CUDA context on device 0 (every rank's model on cuda:0 too);
// rank 0's logged losses.
std::vector<double> run_ranks_on(train::TrainingArguments arguments, int world, DeviceKind kind) {
  arguments.use_cpu = kind == DeviceKind::kCpu;
  std::unique_ptr<DeviceContext> context =
      kind == DeviceKind::kCpu ? make_cpu_context() : make_cuda_context(0);
  std::vector<double> losses;
  run_ranks(
      world,
      [&](Communicator& communicator) {
        EXPECT_EQ(communicator.buffers(), kind);
        const train::TrainResult result = train::train(arguments, communicator, {.print = false});
        EXPECT_EQ(result.global_step, arguments.max_steps);
        if (communicator.rank() == 0) losses = logged_losses(result.log_history);
      },
      {}, context.get());
  return losses;
}

TEST_P(TrainCuda, ZeroStagesAtWorlds2And4OnOneDeviceMatchTheCpuThreadRun) {
  const bool bf16 = GetParam();
  TempFolder folder(bf16 ? "cuda_worlds_bf16" : "cuda_worlds_fp32");
  write_corpus(folder.path() / "corpus.txt", 600);
  for (const int stage : {1, 2, 3}) {
    for (const int world : {2, 4}) {
      const std::string what = "stage " + std::to_string(stage) + " world " + std::to_string(world);
      const std::string run = "s" + std::to_string(stage) + "_w" + std::to_string(world);
      SCOPED_TRACE(what);
      train::TrainingArguments arguments =
          tiny_arguments(folder.path() / "corpus.txt", folder.path() / ("cpu_" + run));
      arguments.deepspeed = write_ds_config(folder.path(), stage, /*precision_auto=*/true).string();
      arguments.bf16 = bf16;
      arguments.per_device_train_batch_size = 8 / world;
      const std::vector<double> cpu = run_ranks_on(arguments, world, DeviceKind::kCpu);
      arguments.output_dir = (folder.path() / ("cuda_" + run)).string();
      const std::vector<double> cuda = run_ranks_on(arguments, world, DeviceKind::kCuda);
      ASSERT_EQ(cpu.size(), 20u);
      ASSERT_EQ(cuda.size(), cpu.size());
      EXPECT_LT(cuda.back(), cuda.front() - 0.5) << "the loss should fall in 20 steps";
      expect_losses_near(cpu, cuda, bf16 ? 2e-2 : 1e-4, what + " step");
    }
  }
}

// 16-bit accumulated gradients (fp16, and bf16 with data_types.grad_accum_dtype bf16) reach the
// optimizer one unit at a time through a workspace of the largest unit (engine_step.cc's
// device_step), on the device's compute stream: stages 0 and 3 against the CPU's run of the same
// configuration, fp16 within the bf16 bound (its loss scale starts at 2^16 and halves on overflow
// on both sides).
TEST(TrainCudaSixteenBitAccumulation, UnitByUnitStepsMatchTheCpuRunAtStages0And3) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  TempFolder folder("cuda_16bit_accumulation");
  write_corpus(folder.path() / "corpus.txt", 600);
  for (const bool fp16 : {true, false}) {
    for (const int stage : {0, 3}) {
      const std::string what = std::string(fp16 ? "fp16" : "bf16 (bf16 accumulation)") + " stage " +
                               std::to_string(stage);
      const std::string run = std::string(fp16 ? "fp16" : "bf16") + "_s" + std::to_string(stage);
      SCOPED_TRACE(what);
      const fs::path config = folder.path() / (run + ".json");
      std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},)"
                            << (fp16 ? "" : R"( "data_types": {"grad_accum_dtype": "bf16"},)")
                            << R"( "optimizer": {"type": "AdamW", "params": {"lr": "auto",
        "weight_decay": "auto"}}, "zero_optimization": {"stage": )"
                            << stage << "}}";
      train::TrainingArguments arguments =
          tiny_arguments(folder.path() / "corpus.txt", folder.path() / ("cpu_" + run));
      arguments.deepspeed = config.string();
      arguments.fp16 = fp16;
      arguments.bf16 = !fp16;
      arguments.gradient_accumulation_steps = 2;
      const std::vector<double> cpu = run_on(arguments, DeviceKind::kCpu);
      arguments.output_dir = (folder.path() / ("cuda_" + run)).string();
      const std::vector<double> cuda = run_on(arguments, DeviceKind::kCuda);
      ASSERT_EQ(cpu.size(), 20u);
      EXPECT_LT(cuda.back(), cuda.front() - 0.5) << "the loss should fall in 20 steps";
      expect_losses_near(cpu, cuda, 2e-2, what + " step");
    }
  }
}

std::vector<double> eval_losses_on(train::TrainingArguments arguments, DeviceKind kind) {
  arguments.use_cpu = kind == DeviceKind::kCpu;
  std::unique_ptr<Communicator> communicator = make_communicator(kind);
  const train::TrainResult result = train::train(arguments, *communicator, {.print = false});
  std::vector<double> losses;
  for (const train::LogEntry& entry : result.log_history)
    if (entry.eval_loss) losses.push_back(*entry.eval_loss);
  return losses;
}

// ZeRO-Offload at stage 3 with the parameters on the device: the host optimizer's step overlaps
// the next forward, its sub-groups' parameters copied to the device on the copy stream; an
// evaluation right after a step (the step settled first) must gather the copied parameters. The
// evaluation losses within the tolerances above of the CPU run's.
TEST_P(TrainCuda, EvaluationAfterAnOverlappedOffloadStepMatchesTheCpu) {
  const bool bf16 = GetParam();
  TempFolder folder(bf16 ? "cuda_offload_eval_bf16" : "cuda_offload_eval_fp32");
  write_corpus(folder.path() / "corpus.txt", 600);
  const fs::path config = folder.path() / "ds_offload.json";
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
    "zero_optimization": {"stage": 3, "sub_group_size": 2000, "stage3_param_persistence_threshold": 0,
      "offload_optimizer": {"device": "cpu", "pin_memory": true}}})";
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "cpu");
  arguments.deepspeed = config.string();
  arguments.bf16 = bf16;
  arguments.do_eval = true;
  arguments.eval_strategy = train::IntervalStrategy::kSteps;
  arguments.eval_steps = 5;
  const std::vector<double> cpu = eval_losses_on(arguments, DeviceKind::kCpu);
  arguments.output_dir = (folder.path() / "cuda").string();
  const std::vector<double> cuda = eval_losses_on(arguments, DeviceKind::kCuda);
  ASSERT_GE(cpu.size(), 4u);
  expect_losses_near(cpu, cuda, bf16 ? 2e-2 : 1e-4, "evaluation");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TrainCuda, ::testing::Values(false, true),
                         [](const auto& instance) { return instance.param ? "bf16" : "fp32"; });

}  // namespace
}  // namespace zero::testing
