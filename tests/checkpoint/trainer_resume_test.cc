// zero::train's checkpoints through the library call (thread ranks): a run preempted by a signal
// saves, returns with `preempted` and gives the process its own handlers back; the resumed run
// at another world size and stage logs the uninterrupted losses; resumes that cannot continue the
// run are refused before anything is written.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "../train/train_test_util.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

volatile std::sig_atomic_t g_own_handler_calls = 0;
extern "C" void own_handler(int) { g_own_handler_calls = g_own_handler_calls + 1; }

class TrainerResume : public ::testing::Test {
 protected:
  void SetUp() override { write_corpus(corpus_, 400); }
  train::TrainingArguments arguments(const fs::path& output, int world, int stage) {
    train::TrainingArguments a = tiny_arguments(corpus_, output);
    a.per_device_train_batch_size = 8 / world;
    a.deepspeed = write_ds_config(folder_.path(), stage).string();
    return a;
  }
  TempFolder folder_{"trainer_resume"};
  fs::path corpus_ = folder_.path() / "corpus.txt";
};

TEST_F(TrainerResume, PreemptedRunSavesRestoresHandlersAndResumesElsewhere) {
  const train::TrainResult straight = train_on(1, arguments(folder_.path() / "straight", 1, 0));
  const std::vector<double> expected = logged_losses(straight.log_history);
  ASSERT_EQ(expected.size(), 20u);

  struct sigaction own {
  }, previous{};
  own.sa_handler = own_handler;
  sigemptyset(&own.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &own, &previous), 0);
  ASSERT_EQ(setenv("ZERO_TEST_PREEMPT_AT_STEP", "7", 1), 0);
  const fs::path output = folder_.path() / "run";
  const train::TrainResult stopped = train_on(2, arguments(output, 2, 3));
  unsetenv("ZERO_TEST_PREEMPT_AT_STEP");
  struct sigaction after {};
  sigaction(SIGUSR1, nullptr, &after);
  sigaction(SIGUSR1, &previous, nullptr);
  EXPECT_EQ(after.sa_handler, &own_handler) << "train() did not restore the SIGUSR1 handler";
  EXPECT_EQ(g_own_handler_calls, 0) << "the signal reached the process's own handler";
  EXPECT_TRUE(stopped.preempted);
  EXPECT_EQ(stopped.global_step, 7);
  EXPECT_TRUE(fs::exists(output / "checkpoint-7" / "zero_checkpoint.json"));
  EXPECT_FALSE(fs::exists(output / "model.safetensors")) << "a preempted run wrote its final model";

  train::TrainingArguments resume = arguments(output, 4, 1);
  resume.resume_from_checkpoint = "latest";
  const train::TrainResult resumed = train_on(4, resume);
  EXPECT_FALSE(resumed.preempted);
  const std::vector<double> losses = logged_losses(resumed.log_history);
  ASSERT_EQ(losses.size(), expected.size());
  for (std::size_t s = 0; s < expected.size(); ++s)
    EXPECT_NEAR(losses[s], expected[s], 1e-5) << "step " << s + 1;
  EXPECT_NEAR(*resumed.train_loss, *straight.train_loss, 1e-6);
}

TEST_F(TrainerResume, ResumesThatCannotContinueTheRunAreRefused) {
  ASSERT_EQ(setenv("ZERO_TEST_PREEMPT_AT_STEP", "3", 1), 0);
  const fs::path output = folder_.path() / "run";
  train_on(1, arguments(output, 1, 0));
  unsetenv("ZERO_TEST_PREEMPT_AT_STEP");
  auto refusal = [&](train::TrainingArguments a) -> std::string {
    try {
      train_on(1, a);
    } catch (const Error& error) {  // run_ranks rethrows an InputError as zero::Error
      return error.what();
    }
    return "(accepted)";
  };
  train::TrainingArguments other_batch = arguments(output, 1, 0);
  other_batch.per_device_train_batch_size = 4;
  other_batch.resume_from_checkpoint = "latest";
  EXPECT_NE(refusal(other_batch).find("global batch of 8 samples"), std::string::npos)
      << refusal(other_batch);
  train::TrainingArguments other_model = arguments(output, 1, 0);
  other_model.config_overrides = "n_layer=3,n_embd=32,n_head=4,n_positions=16";
  other_model.resume_from_checkpoint = (output / "checkpoint-3").string();
  EXPECT_NE(refusal(other_model).find("n_layer 2"), std::string::npos) << refusal(other_model);
  train::TrainingArguments nowhere = arguments(output, 1, 0);
  nowhere.resume_from_checkpoint = (folder_.path() / "nowhere").string();
  EXPECT_NE(refusal(nowhere).find("nowhere"), std::string::npos) << refusal(nowhere);
  fs::remove(output / "checkpoint-3" / "zero_trainer_state.json");
  train::TrainingArguments incomplete = arguments(output, 1, 0);
  incomplete.resume_from_checkpoint = (output / "checkpoint-3").string();
  EXPECT_NE(refusal(incomplete).find("zero_trainer_state.json is missing"), std::string::npos)
      << refusal(incomplete);
  // run_clm: a non-empty output_dir without a checkpoint is still refused.
  const fs::path other = folder_.path() / "other";
  fs::create_directories(other);
  std::ofstream(other / "notes.txt") << "x";
  EXPECT_NE(refusal(arguments(other, 1, 0)).find("already exists and is not empty"),
            std::string::npos);
}

}  // namespace
}  // namespace zero::testing
