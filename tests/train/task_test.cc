// The Tasks without the Trainer (train/src/task/task.h, kind/task_kind.h): task_kind's choice and
// what each kind says before a model exists, make_task's choice, the causal LM's validation the
// same at worlds 1 and 2, the classification task's training counts and its epoch line.
#include "task/task.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "prepare/prepare.h"
#include "train_test_util.h"
#include "zero/comm/thread_communicator.h"
#include "zero/factory/engine_factory.h"

namespace zero::testing {
namespace {

using train::detail::Console;
using train::detail::make_task;
using train::detail::MicroBatch;
using train::detail::Prepared;
using train::detail::Task;
using train::detail::TrainerProgress;

// One rank's task over an engine built from prepare()'s options, as the Trainer builds them.
struct TaskOnRank {
  TaskOnRank(const train::TrainingArguments& arguments, Communicator& communicator)
      : prepared(
            train::detail::prepare(train::make_run_config(arguments, communicator.world_size()),
                                   communicator.rank(), Console(false))),
        engine(make_engine(prepared.engine.options, communicator)),
        task(make_task({arguments, prepared, *engine, communicator, Console(false)})) {}
  Prepared prepared;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Task> task;
};

// 64 lines "<words>,<label>": each label's own words among shared ones.
void write_labelled_csv(const fs::path& file) {
  static const char* kTopics[3] = {"sea ship wave", "sword battle king", "heart love thee"};
  static const char* kNames[3] = {"sea", "war", "love"};
  std::ofstream out(file);
  out << "text,label\n";
  for (int i = 0; i < 64; ++i)
    out << "\"the " << kTopics[i % 3] << " and a " << i << "\"," << kNames[i % 3] << "\n";
}

train::TrainingArguments classification_arguments(const fs::path& folder) {
  write_labelled_csv(folder / "labelled.csv");
  train::TrainingArguments arguments;
  arguments.task = "text-classification";
  arguments.train_files = {(folder / "labelled.csv").string()};
  arguments.validation_files = arguments.train_files;
  arguments.text_column_names = "text";
  arguments.max_seq_length = 12;
  arguments.config_overrides = "n_layer=1,n_embd=32,n_head=2,n_positions=16";
  arguments.tokenizer_vocab_size = 300;
  arguments.output_dir = (folder / "out").string();
  arguments.do_train = arguments.do_eval = true;
  arguments.per_device_train_batch_size = 8;  // 64 examples: 8 steps per epoch
  arguments.num_train_epochs = 1;
  arguments.plot = false;
  return arguments;
}

TEST(Task, MakeTaskBuildsTheTaskTheArgumentsName) {
  TempFolder folder("task_choice");
  write_corpus(folder.path() / "corpus.txt", 300);
  const train::TrainingArguments lm =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "lm");
  const train::TrainingArguments classification = classification_arguments(folder.path());
  run_ranks(1, [&](Communicator& communicator) {
    const TaskOnRank lm_task(lm, communicator);
    EXPECT_EQ(lm_task.task->model_class(), "GPT2LMHeadModel");
    EXPECT_FALSE(lm_task.task->evaluates_every_epoch());
    const TaskOnRank classification_task(classification, communicator);
    EXPECT_EQ(classification_task.task->model_class(), "GPT2ForSequenceClassification");
    EXPECT_TRUE(classification_task.task->evaluates_every_epoch());
  });
}

// task_kind is the one place that reads --task: each kind names itself, its flags' rules, its
// evaluation metrics and whether the planner models it; an unknown task names both.
TEST(Task, TaskKindIsChosenByNameAndSaysWhatItTakes) {
  using train::detail::task_kind;
  const train::detail::TaskKind& lm = task_kind("causal-lm");
  const train::detail::TaskKind& classification = task_kind("text-classification");
  EXPECT_EQ(lm.name(), "causal-lm");
  EXPECT_EQ(classification.name(), "text-classification");
  EXPECT_EQ(lm.evaluation_metrics(), (std::vector<std::string>{"eval_loss"}));
  EXPECT_EQ(classification.evaluation_metrics(),
            (std::vector<std::string>{"eval_loss", "eval_accuracy", "eval_mse", "eval_f1"}));
  EXPECT_TRUE(lm.planned());
  EXPECT_FALSE(classification.planned());
  try {
    task_kind("summarization");
    ADD_FAILURE() << "an unknown task was chosen";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "--task 'summarization' is not a task (causal-lm or text-classification)");
  }
  train::TrainingArguments arguments;
  arguments.do_predict = true;
  EXPECT_THROW(lm.check_arguments(arguments), Error);
  EXPECT_NO_THROW(classification.check_arguments(arguments));
  arguments.do_predict = false;
  arguments.streaming = true;
  EXPECT_NO_THROW(lm.check_arguments(arguments));
  EXPECT_THROW(classification.check_arguments(arguments), Error);
  arguments.streaming = false;
  arguments.max_seq_length = 0;
  EXPECT_NO_THROW(lm.check_arguments(arguments));
  EXPECT_THROW(classification.check_arguments(arguments), Error);
  // prepare() holds the kind --task named, and make_task asks it.
  TempFolder folder("task_kind_prepared");
  write_corpus(folder.path() / "corpus.txt", 300);
  const train::TrainingArguments lm_arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "lm");
  EXPECT_EQ(train::detail::prepare(train::make_run_config(lm_arguments, 1), 0, Console(false)).task,
            &lm);
  EXPECT_EQ(
      train::detail::prepare(train::make_run_config(classification_arguments(folder.path()), 1), 0,
                             Console(false))
          .task,
      &classification);
}

// The same initial weights (same seed) give the same token-weighted validation loss whether one
// rank or two evaluate the blocks; its perplexity is exp(loss); every rank gets the same entry.
TEST(Task, LmEvaluationIsTheSameAtWorldsOneAndTwo) {
  TempFolder folder("task_lm_eval");
  write_corpus(folder.path() / "corpus.txt", 400);
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "out");
  arguments.do_eval = true;
  arguments.per_device_eval_batch_size = 3;  // rows past the blocks padded at both worlds
  std::vector<double> losses;
  for (const int world : {1, 2}) {
    std::vector<train::detail::Evaluation> evaluations(static_cast<std::size_t>(world));
    run_ranks(world, [&](Communicator& communicator) {
      TaskOnRank rank(arguments, communicator);
      ASSERT_GT(rank.prepared.eval_blocks, 2u);
      evaluations[static_cast<std::size_t>(communicator.rank())] = rank.task->evaluate(4);
    });
    for (const train::detail::Evaluation& evaluation : evaluations) {
      ASSERT_TRUE(evaluation.entry.eval_loss && evaluation.entry.perplexity);
      EXPECT_EQ(evaluation.entry.step, 4);
      EXPECT_EQ(*evaluation.entry.eval_loss, *evaluations[0].entry.eval_loss);
      EXPECT_DOUBLE_EQ(*evaluation.entry.perplexity, std::exp(*evaluation.entry.eval_loss));
      EXPECT_FALSE(evaluation.entry.eval_accuracy);
    }
    losses.push_back(*evaluations[0].entry.eval_loss);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-6 * losses[0]);
}

// Training micro-steps count every labelled row into the epoch; end_step writes the epoch's line
// only at the epoch's end, with the mean loss and accuracy, and starts the next epoch at zero.
TEST(Task, ClassificationCountsTheEpochAndClosesItAtItsEnd) {
  TempFolder folder("task_classification");
  const train::TrainingArguments arguments = classification_arguments(folder.path());
  run_ranks(1, [&](Communicator& communicator) {
    TaskOnRank rank(arguments, communicator);
    const std::int64_t steps = rank.prepared.steps_per_epoch;
    ASSERT_EQ(steps, 8);
    text::DistributedSampler sampler({.num_blocks = rank.prepared.train_blocks,
                                      .global_batch_size = 8,
                                      .world_size = 1,
                                      .rank = 0,
                                      .seed = arguments.seed});
    TrainerProgress progress;
    MicroBatch batch;
    for (std::int64_t step = 1; step <= steps; ++step) {
      rank.task->next_train_batch(sampler, batch);
      const gpt2::DropoutKey dropout{.seed = arguments.seed,
                                     .step = static_cast<std::uint64_t>(step - 1),
                                     .sample_offset = 0,
                                     .training = true};
      const double loss = rank.task->train_micro_step(batch, dropout, progress);
      rank.engine->step();
      EXPECT_TRUE(std::isfinite(loss));
      EXPECT_EQ(progress.epoch_counted, static_cast<double>(8 * step));
      progress.epoch_loss += loss;  // the Trainer's part
      ++progress.epoch_steps;
      if (step < steps) {
        EXPECT_FALSE(rank.task->end_step(step, nullptr, progress));
      }
    }
    const double correct = progress.epoch_correct, loss_sum = progress.epoch_loss;
    const std::optional<train::LogEntry> entry = rank.task->end_step(steps, nullptr, progress);
    ASSERT_TRUE(entry && entry->epoch_train_loss && entry->train_accuracy);
    EXPECT_EQ(entry->step, steps);
    EXPECT_DOUBLE_EQ(entry->epoch, 1.0);
    EXPECT_DOUBLE_EQ(*entry->epoch_train_loss, loss_sum / static_cast<double>(steps));
    EXPECT_DOUBLE_EQ(*entry->train_accuracy, correct / 64.0);
    EXPECT_EQ(progress.epoch_counted, 0.0);
    EXPECT_EQ(progress.epoch_correct, 0.0);
    EXPECT_EQ(progress.epoch_loss, 0.0);
    EXPECT_EQ(progress.epoch_steps, 0);
  });
}

}  // namespace
}  // namespace zero::testing
