// Issue 23: the Hugging Face flags that need the training loop, each with a value that changes
// something observable: the log history, trainer_state.json, train_results.json, the checkpoint
// folders, the data order, the batch the planner fits.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plan/auto_batch_size.h"
#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string error_of(const train::TrainingArguments& arguments) {
  try {
    run_one(arguments);
  } catch (const train::InputError& error) {
    return error.what();
  }
  return "";
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::int64_t> steps_with(const std::vector<train::LogEntry>& history,
                                     std::optional<double> train::LogEntry::*field) {
  std::vector<std::int64_t> steps;
  for (const train::LogEntry& entry : history)
    if (entry.*field) steps.push_back(entry.step);
  return steps;
}

class LoopFlags : public TinyRunTest {
 protected:
  LoopFlags() : TinyRunTest("hf_loop_flags", 5) {}
};

TEST_F(LoopFlags, LoggingFirstStepAndLoggingStrategy) {
  using Entry = train::LogEntry;
  EXPECT_EQ(steps_with(run_one(arguments("steps")).log_history, &Entry::loss),
            (std::vector<std::int64_t>{5, 10}));
  train::TrainingArguments first = arguments("first");
  first.logging_first_step = true;
  EXPECT_EQ(steps_with(run_one(first).log_history, &Entry::loss),
            (std::vector<std::int64_t>{1, 5, 10}));
  train::TrainingArguments none = arguments("none");
  none.logging_strategy = train::IntervalStrategy::kNo;
  const train::TrainResult quiet = run_one(none);
  EXPECT_TRUE(steps_with(quiet.log_history, &Entry::loss).empty());
  EXPECT_TRUE(quiet.train_loss.has_value()) << "the train summary still has the mean loss";
  train::TrainingArguments epoch = arguments("epoch", -1);
  epoch.max_train_samples = 24;  // 3 steps of 8 per epoch, 2 epochs
  epoch.num_train_epochs = 2;
  epoch.logging_steps = 1;
  epoch.logging_strategy = train::IntervalStrategy::kEpoch;
  EXPECT_EQ(steps_with(run_one(epoch).log_history, &Entry::loss),
            (std::vector<std::int64_t>{3, 6}));
}

TEST_F(LoopFlags, TokensPerSecondAndInputTokensSeen) {
  train::TrainingArguments plain = arguments("plain");
  run_one(plain);
  EXPECT_FALSE(read_json(folder_.path() / "plain" / "train_results.json")
                   .contains("train_tokens_per_second"));
  EXPECT_EQ(read_json(folder_.path() / "plain" / "trainer_state.json")["num_input_tokens_seen"], 0);

  train::TrainingArguments counted = arguments("counted");
  counted.include_tokens_per_second = true;
  counted.include_num_input_tokens_seen = "all";
  const train::TrainResult result = run_one(counted);
  const json results = read_json(folder_.path() / "counted" / "train_results.json");
  ASSERT_TRUE(results.contains("train_tokens_per_second"));
  // 10 steps x 8 blocks x 16 tokens over the runtime.
  EXPECT_NEAR(
      results["train_tokens_per_second"].get<double>() * results["train_runtime"].get<double>(),
      1280.0, 1e-6 * 1280.0);
  for (const train::LogEntry& entry : result.log_history) {
    ASSERT_TRUE(entry.num_input_tokens_seen) << "step " << entry.step;
    EXPECT_EQ(*entry.num_input_tokens_seen, static_cast<double>(entry.step * 8 * 16));
  }
  const json state = read_json(folder_.path() / "counted" / "trainer_state.json");
  EXPECT_EQ(state["num_input_tokens_seen"], 1280);
  EXPECT_EQ(state["log_history"][0]["num_input_tokens_seen"], 5 * 8 * 16);
}

TEST_F(LoopFlags, EvalOnStartEvaluatesAtStepZero) {
  train::TrainingArguments a = arguments("start");
  a.do_eval = true;
  a.eval_strategy = train::IntervalStrategy::kSteps;
  a.eval_steps = 5;
  a.eval_on_start = true;
  const train::TrainResult result = run_one(a);
  EXPECT_EQ(steps_with(result.log_history, &train::LogEntry::eval_loss),
            (std::vector<std::int64_t>{0, 5, 10}));
  EXPECT_EQ(result.log_history.front().step, 0);
  EXPECT_EQ(result.log_history.front().epoch, 0.0);
  const json state = read_json(folder_.path() / "start" / "trainer_state.json");
  EXPECT_EQ(state["log_history"][0]["step"], 0);
  EXPECT_TRUE(state["log_history"][0].contains("eval_loss"));

  train::TrainingArguments delayed = arguments("delayed");
  delayed.do_eval = true;
  delayed.eval_strategy = train::IntervalStrategy::kSteps;
  delayed.eval_steps = 2;
  delayed.eval_delay = 5;
  EXPECT_EQ(steps_with(run_one(delayed).log_history, &train::LogEntry::eval_loss),
            (std::vector<std::int64_t>{6, 8, 10}));

  train::TrainingArguments without_eval = arguments("no_eval");
  without_eval.eval_on_start = true;
  EXPECT_NE(error_of(without_eval).find("--eval_on_start needs --do_eval"), std::string::npos);
}

TEST_F(LoopFlags, SaveOnlyModelWritesTheModelAndRefusesTheResume) {
  train::TrainingArguments a = arguments("model_only");
  a.save_strategy = train::IntervalStrategy::kSteps;
  a.save_steps = 5;
  a.save_only_model = true;
  run_one(a);
  const fs::path checkpoint = folder_.path() / "model_only" / "checkpoint-5";
  EXPECT_TRUE(fs::exists(checkpoint / "model.safetensors"));
  EXPECT_TRUE(fs::exists(checkpoint / "config.json"));
  EXPECT_TRUE(fs::exists(checkpoint / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(checkpoint / "zero_checkpoint.json")) << "no engine state";
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint))
    EXPECT_EQ(entry.path().filename().string().find("shard"), std::string::npos) << entry.path();

  train::TrainingArguments resume = arguments("model_only");
  resume.resume_from_checkpoint = checkpoint.string();
  resume.max_steps = 12;
  const std::string error = error_of(resume);
  EXPECT_NE(error.find("saved with --save_only_model"), std::string::npos) << error;
  EXPECT_NE(error.find("can't resume"), std::string::npos) << error;

  train::TrainingArguments full = arguments("full");
  full.save_strategy = train::IntervalStrategy::kSteps;
  full.save_steps = 5;
  run_one(full);
  EXPECT_TRUE(fs::exists(folder_.path() / "full" / "checkpoint-5" / "zero_checkpoint.json"));
}

// greater_is_better with the loss makes the first checkpoint the best (the loss falls): it is kept
// from save_total_limit 1 and the final model is its model, byte for byte.
TEST_F(LoopFlags, LoadBestModelAtEndEndsWithTheBestCheckpoint) {
  train::TrainingArguments a = arguments("best", 8);
  a.do_eval = true;
  a.eval_strategy = a.save_strategy = train::IntervalStrategy::kSteps;
  a.eval_steps = a.save_steps = 2;
  a.save_total_limit = 1;
  a.load_best_model_at_end = true;
  a.given_flags = std::vector<std::string>{"greater_is_better"};
  a.greater_is_better = true;
  const train::TrainResult result = run_one(a);
  const fs::path out = folder_.path() / "best";
  const json state = read_json(out / "trainer_state.json");
  EXPECT_EQ(state["best_model_checkpoint"], (out / "checkpoint-2").string());
  EXPECT_EQ(state["best_global_step"], 2);
  const double best = state["best_metric"];
  for (const train::LogEntry& entry : result.log_history) {
    if (entry.step == 2 && entry.eval_loss) {
      EXPECT_EQ(best, *entry.eval_loss);
    }
  }
  std::set<std::string> checkpoints;
  for (const fs::directory_entry& entry : fs::directory_iterator(out))
    if (entry.path().filename().string().starts_with("checkpoint-"))
      checkpoints.insert(entry.path().filename().string());
  EXPECT_EQ(checkpoints, (std::set<std::string>{"checkpoint-2"}));
  EXPECT_EQ(read_bytes(out / "model.safetensors"),
            read_bytes(out / "checkpoint-2" / "model.safetensors"))
      << "the final model is the best checkpoint's";
  ASSERT_TRUE(result.eval_loss);
  EXPECT_NEAR(*result.eval_loss, best, 1e-6) << "the final evaluation is the best model's";

  // By default the metric is the loss, lower is better: the best is the lowest saved eval_loss.
  train::TrainingArguments lowest = a;
  lowest.output_dir = (folder_.path() / "lowest").string();
  lowest.given_flags = std::vector<std::string>{};
  lowest.save_total_limit = 2;
  const train::TrainResult low = run_one(lowest);
  double minimum = 1e30;
  for (const train::LogEntry& entry : low.log_history)
    if (entry.eval_loss && entry.step % 2 == 0 && entry.step > 0)
      minimum = std::min(minimum, *entry.eval_loss);
  const json low_state = read_json(folder_.path() / "lowest" / "trainer_state.json");
  EXPECT_EQ(low_state["best_metric"].get<double>(), minimum);

  train::TrainingArguments mismatched = a;
  mismatched.save_strategy = train::IntervalStrategy::kEpoch;
  EXPECT_NE(error_of(mismatched).find("requires the save and eval strategy to match"),
            std::string::npos);
  train::TrainingArguments unknown = a;
  unknown.output_dir = (folder_.path() / "unknown").string();
  unknown.metric_for_best_model = "bleu";
  EXPECT_NE(error_of(unknown).find("'eval_bleu' is not found in the evaluation metrics"),
            std::string::npos);
}

// At world 2 (threads) every rank agrees on the best and loads it: the same final model as world 1.
TEST_F(LoopFlags, LoadBestModelAtEndAtWorldTwo) {
  auto best_run = [&](const std::string& out, int world) {
    train::TrainingArguments a = arguments(out, 4);
    a.per_device_train_batch_size = 8 / world;
    a.do_eval = true;
    a.eval_strategy = a.save_strategy = train::IntervalStrategy::kSteps;
    a.eval_steps = a.save_steps = 2;
    a.load_best_model_at_end = true;
    a.given_flags = std::vector<std::string>{"greater_is_better"};
    a.greater_is_better = true;
    run_ranks(world, [&](Communicator& comm) { train::train(a, comm, {.print = false}); });
    return read_json(folder_.path() / out / "trainer_state.json");
  };
  const json one = best_run("world1", 1);
  const json two = best_run("world2", 2);
  EXPECT_EQ(two["best_global_step"], 2);
  EXPECT_NEAR(two["best_metric"].get<double>(), one["best_metric"].get<double>(), 1e-5);
  EXPECT_EQ(read_bytes(folder_.path() / "world2" / "model.safetensors"),
            read_bytes(folder_.path() / "world2" / "checkpoint-2" / "model.safetensors"));
}

// The data order follows --data_seed: from one pretrained model without dropout, --seed alone
// changes nothing else, so the losses show the order.
TEST_F(LoopFlags, DataSeedOrdersTheDataApartFromTheSeed) {
  train::TrainingArguments base = arguments("pretrained", 1);
  base.config_overrides += ",resid_pdrop=0,embd_pdrop=0,attn_pdrop=0";
  run_one(base);
  auto losses = [&](const std::string& out, std::uint64_t seed, std::int64_t data_seed) {
    train::TrainingArguments a = arguments(out, 6);
    a.config_overrides.clear();
    a.model_name_or_path = (folder_.path() / "pretrained").string();
    a.logging_steps = 1;
    a.seed = seed;
    a.data_seed = data_seed;
    return logged_losses(run_one(a).log_history);
  };
  const std::vector<double> reference = losses("a", 1, 7);
  EXPECT_EQ(losses("b", 2, 7), reference) << "another --seed, the same --data_seed";
  EXPECT_EQ(losses("c", 7, -1), reference) << "--seed 7 alone orders the data as --data_seed 7";
  EXPECT_NE(losses("d", 1, 8), reference) << "another --data_seed, another order";
  // 5.x's --train_sampling_strategy sequential: the data's own order, whatever the seeds.
  auto sequential = [&](const std::string& out, std::int64_t data_seed) {
    train::TrainingArguments a = arguments(out, 6);
    a.config_overrides.clear();
    a.model_name_or_path = (folder_.path() / "pretrained").string();
    a.logging_steps = 1;
    a.data_seed = data_seed;
    a.train_sampling_strategy = "sequential";
    return logged_losses(run_one(a).log_history);
  };
  const std::vector<double> in_order = sequential("e", 1);
  EXPECT_EQ(sequential("f", 2), in_order);
  EXPECT_NE(in_order, reference);
}

TEST_F(LoopFlags, DataloaderDropLastDropsTheIncompleteBatch) {
  train::TrainingArguments a = arguments("keep", -1);
  a.max_train_samples = 37;  // 4 full batches of 8 and 5 blocks
  a.num_train_epochs = 1;
  EXPECT_EQ(run_one(a).global_step, 5);
  a.output_dir = (folder_.path() / "drop").string();
  a.dataloader_drop_last = true;
  EXPECT_EQ(run_one(a).global_step, 4);
}

// Resumed at step 3 of an epoch of 30+ steps: the continuation is the uninterrupted run's, or,
// with --ignore_data_skip, the epoch's first batches again.
TEST_F(LoopFlags, IgnoreDataSkipRestartsTheEpochsData) {
  train::TrainingArguments straight = arguments("straight", 6);
  straight.logging_steps = 1;
  const std::vector<double> uninterrupted = logged_losses(run_one(straight).log_history);
  train::TrainingArguments first = straight;
  first.output_dir = (folder_.path() / "first").string();
  first.max_steps = 6;
  first.save_strategy = train::IntervalStrategy::kSteps;
  first.save_steps = 3;
  run_one(first);
  auto resumed = [&](bool ignore) {
    train::TrainingArguments a = straight;
    a.output_dir = (folder_.path() / (ignore ? "ignore" : "skip")).string();
    a.resume_from_checkpoint = (folder_.path() / "first" / "checkpoint-3").string();
    a.ignore_data_skip = ignore;
    std::vector<double> all = logged_losses(run_one(a).log_history);
    return std::vector<double>(all.begin() + 3, all.end());
  };
  const std::vector<double> tail(uninterrupted.begin() + 3, uninterrupted.end());
  const std::vector<double> skipped = resumed(false);
  ASSERT_EQ(skipped.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(skipped[i], tail[i], 1e-6);
  EXPECT_GT(std::abs(resumed(true)[0] - tail[0]), 1e-6) << "the epoch's first batch again";
}

// The planner fits the batch to the node before anything is allocated: with room for a batch of
// 4 but not 8, the run trains with 4.
TEST_F(LoopFlags, AutoFindBatchSizeHalvesUntilThePlanFits) {
  train::TrainingArguments a = arguments("auto", 2);
  const train::RunConfig run = train::make_run_config(a, 1);
  train::PlanSetup setup = train::plan_setup(run);
  const std::int64_t at_8 = train::detail::planned_node_bytes(setup, 1, 1);
  setup.batch_size = 4;
  const std::int64_t at_4 = train::detail::planned_node_bytes(setup, 1, 1);
  ASSERT_LT(at_4, at_8);
  std::string note;
  EXPECT_EQ(train::detail::fitting_batch_size(run, 1, (at_4 + at_8) / 2, note), 4);
  EXPECT_NE(note.find("per_device_train_batch_size 4"), std::string::npos) << note;
  EXPECT_EQ(train::detail::fitting_batch_size(run, 1, at_8, note), 8);
  const train::RunConfig four = train::with_micro_batch(run, 4);
  EXPECT_EQ(four.deepspeed.config.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(four.deepspeed.config.train_batch_size,
            4 * run.deepspeed.config.gradient_accumulation_steps);
  EXPECT_EQ(train::plan_setup(four).batch_size, 4);

  ::setenv("ZERO_NODE_MEMORY_BYTES", std::to_string((at_4 + at_8) / 2).c_str(), 1);
  a.auto_find_batch_size = true;
  run_one(a);
  ::unsetenv("ZERO_NODE_MEMORY_BYTES");
  EXPECT_EQ(read_json(folder_.path() / "auto" / "trainer_state.json")["train_batch_size"], 4);

  train::TrainingArguments written = a;
  std::ofstream(folder_.path() / "ds_micro.json") << R"({"train_micro_batch_size_per_gpu": 8})";
  written.deepspeed = (folder_.path() / "ds_micro.json").string();
  written.output_dir = (folder_.path() / "written").string();
  EXPECT_NE(error_of(written).find("writes train_micro_batch_size_per_gpu 8"), std::string::npos);

  train::TrainingArguments none = a;
  none.output_dir = (folder_.path() / "none").string();
  ::setenv("ZERO_NODE_MEMORY_BYTES", "1000", 1);
  EXPECT_NE(error_of(none).find("--auto_find_batch_size: no micro-batch fits"), std::string::npos);
  ::unsetenv("ZERO_NODE_MEMORY_BYTES");
}

// DeepSpeed's "wall_clock_breakdown": true adds to each log window a line of where a step's time
// went; without it, no such line.
TEST_F(LoopFlags, WallClockBreakdownSaysWhereTheStepsTimeWent) {
  const auto printed_lines = [&](const std::string& name, bool breakdown) {
    train::TrainingArguments a = arguments(name);
    const fs::path config = folder_.path() / (name + ".json");
    std::ofstream(config)
        << R"({"train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": )"
        << (breakdown ? "true" : "false") << "}";
    a.deepspeed = config.string();
    std::unique_ptr<Communicator> local = make_local_communicator();
    ::testing::internal::CaptureStdout();
    train::train(a, *local, {.print = true});
    std::istringstream out(::testing::internal::GetCapturedStdout());
    std::vector<std::string> lines;
    for (std::string line; std::getline(out, line);)
      if (line.rfind("time (ms) per step | data ", 0) == 0) lines.push_back(line);
    return lines;
  };
  EXPECT_TRUE(printed_lines("off", false).empty());
  const std::vector<std::string> lines = printed_lines("on", true);
  ASSERT_EQ(lines.size(), 2u) << "one per log window (steps 5 and 10)";
  for (const std::string& line : lines) {
    double data = -1, forward_backward = -1, step = -1, other = 0;
    ASSERT_EQ(std::sscanf(line.c_str(),
                          "time (ms) per step | data %lf | forward+backward %lf | step %lf | "
                          "other %lf",
                          &data, &forward_backward, &step, &other),
              4)
        << line;
    EXPECT_GE(data, 0.0) << line;
    EXPECT_GT(forward_backward, 0.0) << line;
    EXPECT_GT(step, 0.0) << line;
  }
}

}  // namespace
}  // namespace zero::testing
