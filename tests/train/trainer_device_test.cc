// zero::train on a device context of the caller's (RunOptions::make_device_context): the CPU
// backend in asynchronous mode under stream stress, its device space a TrackingDeviceAllocator,
// and a communicator that checks every buffer of every collective of the run (the engine's and
// the trainer's own: auto batch size, preemption flag, losses, memory peaks, evaluation, the best
// model, checkpoint saves and resumes, classification predictions) against that allocator, when
// called and again when run, and that train() returns with none of them still queued. Worlds 1,
// 2 and 4 (threads); the losses equal, bit for bit, those of the same arguments on train()'s own
// context (host mode).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../classify/classify_test_util.h"
#include "../engine/checking_communicator.h"
#include "train_test_util.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

// What one rank's checked run left: its result and what the checking communicator saw.
struct CheckedRank {
  train::TrainResult result;
  std::vector<std::string> violations;
  std::int64_t buffers_checked = 0;
  std::uint64_t collectives_pending = 0;  // when train() returned
};

// The rank's device as train() makes it through RunOptions::make_device_context: the CPU backend
// in asynchronous mode under stream stress, with a tracking device allocator. holds() answers the
// checking communicator, on any thread, while the context lives; once train() has destroyed it, a
// collective that runs still finds no live block.
class RankDevice {
 public:
  std::unique_ptr<DeviceContext> make(const Device& device) {
    EXPECT_EQ(device, Device::cpu());
    auto context = std::make_unique<Watched>(*this);
    std::lock_guard lock(mutex_);
    tracking_ = &context->tracking();
    return context;
  }
  bool holds(const void* data, std::size_t size_bytes) const {
    std::lock_guard lock(mutex_);
    return tracking_ != nullptr && tracking_->device_allocator().holds(data, size_bytes);
  }

 private:
  class Watched final : public ForwardingContext {
   public:
    explicit Watched(RankDevice& owner)
        : ForwardingContext(std::make_unique<TrackingDeviceContext>(CpuContextOptions{
              .stress = {20261126, std::chrono::microseconds(30)}, .asynchronous = true})),
          owner_(owner) {}
    ~Watched() override {
      std::lock_guard lock(owner_.mutex_);
      owner_.tracking_ = nullptr;
    }
    const TrackingDeviceContext& tracking() {
      return static_cast<const TrackingDeviceContext&>(inner());
    }

   private:
    RankDevice& owner_;
  };

  mutable std::mutex mutex_;
  const TrackingDeviceContext* tracking_ = nullptr;
};

// `arguments` on `world` thread ranks, each on its RankDevice through a CheckingCommunicator over
// that device's allocator.
std::vector<CheckedRank> run_checked(const train::TrainingArguments& arguments, int world) {
  std::vector<CheckedRank> ranks(static_cast<std::size_t>(world));
  run_ranks(world, [&](Communicator& inner) {
    RankDevice device;
    CheckingCommunicator checking(inner, [&device](const void* data, std::size_t size_bytes) {
      return device.holds(data, size_bytes);
    });
    train::RunOptions options{.print = false};
    options.make_device_context = [&device](const Device& chosen) { return device.make(chosen); };
    CheckedRank& rank = ranks[static_cast<std::size_t>(inner.rank())];
    rank.result = train::train(arguments, checking, options);
    rank.collectives_pending = checking.collectives_pending();
    checking.synchronize();  // what train() left queued runs (and is checked) before both go
    rank.violations = checking.violations();
    rank.buffers_checked = checking.buffers_checked();
  });
  return ranks;
}

// Every rank's collectives handed the communicator device buffers only; rank 0's result.
train::TrainResult expect_clean(const std::vector<CheckedRank>& ranks, const std::string& what) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    EXPECT_GT(ranks[r].buffers_checked, 0) << what << " rank " << r;
    EXPECT_EQ(ranks[r].collectives_pending, 0u)
        << what << " rank " << r << ": train() returned before its collectives ran";
    EXPECT_TRUE(ranks[r].violations.empty())
        << what << " rank " << r << ": " << ranks[r].violations.size() << " violations, first "
        << ranks[r].violations.front();
  }
  return ranks.front().result;
}

// The same numbers as the run on train()'s own context, bit for bit.
void expect_same_run(const train::TrainResult& checked, const train::TrainResult& plain,
                     const std::string& what) {
  EXPECT_EQ(logged_losses(checked.log_history), logged_losses(plain.log_history)) << what;
  EXPECT_EQ(eval_losses(checked), eval_losses(plain)) << what;
  EXPECT_EQ(checked.train_loss, plain.train_loss) << what;
  EXPECT_EQ(checked.eval_loss, plain.eval_loss) << what;
}

class TrainerDevice : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { write_corpus(folder_.path() / "corpus.txt", 300); }

  // A global batch of 8 in 2 micro-steps, logged, evaluated and saved every 2 steps, the best
  // checkpoint loaded at the end, the batch planned with --auto_find_batch_size; ZeRO-3.
  train::TrainingArguments lm_arguments(const std::string& out, std::int64_t steps) const {
    const int world = GetParam();
    train::TrainingArguments a = tiny_arguments(folder_.path() / "corpus.txt",
                                                folder_.path() / (out + std::to_string(world)));
    a.use_cpu = true;
    a.max_steps = steps;
    a.per_device_train_batch_size = 4 / world;
    a.gradient_accumulation_steps = 2;
    a.logging_steps = 2;
    a.do_eval = true;
    a.eval_strategy = a.save_strategy = train::IntervalStrategy::kSteps;
    a.eval_steps = a.save_steps = 2;
    a.max_eval_samples = 8;
    a.load_best_model_at_end = true;
    a.auto_find_batch_size = true;
    a.deepspeed = write_ds_config(folder_.path(), 3).string();
    return a;
  }

  TempFolder folder_{"trainer_device"};
};

TEST_P(TrainerDevice, LanguageModelRunHandsOnlyDeviceBuffersAndKeepsItsLosses) {
  const train::TrainingArguments arguments = lm_arguments("checked", 4);
  const train::TrainResult checked = expect_clean(run_checked(arguments, GetParam()), "LM run");
  train::TrainingArguments plain = arguments;
  plain.output_dir = (folder_.path() / "plain").string();
  expect_same_run(checked, train_on(GetParam(), plain), "LM run");
  EXPECT_EQ(logged_losses(checked.log_history).size(), 2u);
  EXPECT_EQ(eval_losses(checked).size(), 3u);  // steps 2 and 4, and the best model's at the end
}

// Rank 0 signals itself after step 2: every rank agrees, saves checkpoint-2 and stops; the resume
// loads it and trains on to step 4 with the losses of the run that was never stopped.
TEST_P(TrainerDevice, PreemptedRunAndItsResumeHandOnlyDeviceBuffers) {
  const train::TrainingArguments arguments = lm_arguments("preempted", 4);
  ASSERT_EQ(setenv("ZERO_TEST_PREEMPT_AT_STEP", "2", 1), 0);
  const train::TrainResult stopped = expect_clean(run_checked(arguments, GetParam()), "stopped");
  unsetenv("ZERO_TEST_PREEMPT_AT_STEP");
  EXPECT_TRUE(stopped.preempted);
  EXPECT_EQ(stopped.global_step, 2);
  train::TrainingArguments resume = arguments;
  resume.resume_from_checkpoint = "latest";
  const train::TrainResult resumed = expect_clean(run_checked(resume, GetParam()), "resumed");
  EXPECT_FALSE(resumed.preempted);
  train::TrainingArguments straight = arguments;
  straight.output_dir = (folder_.path() / "straight").string();
  expect_same_run(resumed, train_on(GetParam(), straight), "resumed run");
}

TEST_P(TrainerDevice, ClassificationRunHandsOnlyDeviceBuffersAndKeepsItsReport) {
  write_labelled_csv(folder_.path() / "train.csv", 32, 1);
  write_labelled_csv(folder_.path() / "validation.csv", 13, 2);
  write_labelled_csv(folder_.path() / "test.csv", 11, 3);
  train::TrainingArguments arguments =
      classify_arguments(folder_.path(), folder_.path() / "classify_checked");
  arguments.use_cpu = true;
  arguments.num_train_epochs = 1;
  const train::TrainResult checked =
      expect_clean(run_checked(arguments, GetParam()), "classification run");
  train::TrainingArguments plain = arguments;
  plain.output_dir = (folder_.path() / "classify_plain").string();
  const train::TrainResult reference = train_on(GetParam(), plain);
  expect_same_run(checked, reference, "classification run");
  ASSERT_TRUE(checked.test_report && reference.test_report);
  EXPECT_EQ(checked.test_loss, reference.test_loss);
  EXPECT_EQ(checked.eval_accuracy, reference.eval_accuracy);
}

INSTANTIATE_TEST_SUITE_P(Worlds, TrainerDevice, ::testing::Values(1, 2, 4));

// A factory that makes no context is refused before anything runs or is written.
TEST(TrainerDeviceFactory, NoContextIsRefused) {
  TempFolder folder("trainer_device_factory");
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "out");
  arguments.use_cpu = true;
  train::RunOptions options{.print = false};
  options.make_device_context = [](const Device&) { return std::unique_ptr<DeviceContext>(); };
  std::unique_ptr<Communicator> local = make_local_communicator();
  try {
    train::train(arguments, *local, options);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("make_device_context returned no context for cpu"),
              std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(fs::exists(folder.path() / "out"));
  EXPECT_EQ(local->sequence(), 0u);
}

}  // namespace
}  // namespace zero::testing
