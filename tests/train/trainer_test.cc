// zero::train through the library: the same losses at every world size and stage, the output
// files, pretrained round trips, the schedules, and bad input (exit-2 errors, nothing written).
#include "zero/train/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/train/monitors.h"

namespace zero::testing {
namespace {

using nlohmann::json;

train::TrainResult run_world(const train::TrainingArguments& arguments, int world) {
  std::vector<train::TrainResult> results(static_cast<std::size_t>(world));
  run_ranks(world, [&](Communicator& comm) {
    results[static_cast<std::size_t>(comm.rank())] =
        train::train(arguments, comm, {.print = false});
  });
  for (int rank = 1; rank < world; ++rank)
    EXPECT_EQ(logged_losses(results[rank].log_history), logged_losses(results[0].log_history))
        << "rank " << rank << " logged other losses";
  return results[0];
}

// The same global batch (8 blocks per step) at worlds 1, 2, 4 and stages 0-3 logs the same losses.
TEST(Trainer, SameLossesAtEveryWorldSizeAndStage) {
  TempFolder folder("parity");
  write_corpus(folder.path() / "corpus.txt", 600);
  std::vector<double> reference;
  for (const int world : {1, 2, 4})
    for (int stage = 0; stage <= 3; ++stage) {
      train::TrainingArguments arguments = tiny_arguments(
          folder.path() / "corpus.txt",
          folder.path() / ("out_w" + std::to_string(world) + "_s" + std::to_string(stage)));
      arguments.per_device_train_batch_size = 8 / world;
      arguments.deepspeed = write_ds_config(folder.path(), stage).string();
      const std::vector<double> losses = logged_losses(run_world(arguments, world).log_history);
      ASSERT_EQ(losses.size(), 20u);
      if (reference.empty()) {
        reference = losses;
        EXPECT_LT(losses.back(), losses.front() - 0.5) << "the loss should fall in 20 steps";
        continue;
      }
      for (std::size_t step = 0; step < losses.size(); ++step)
        EXPECT_NEAR(losses[step], reference[step], 1e-5)
            << "world " << world << " stage " << stage << " step " << step + 1;
    }
}

// --gradient_checkpointing recomputes each block in backward, --recompute_blocks 1 the first:
// the same numbers (the first bit for bit).
TEST(Trainer, GradientCheckpointingKeepsTheLosses) {
  TempFolder folder("checkpointing");
  write_corpus(folder.path() / "corpus.txt", 600);
  train::TrainingArguments plain =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "a");
  plain.max_steps = 6;
  plain.per_device_train_batch_size = 4;
  plain.deepspeed = write_ds_config(folder.path(), 3).string();
  train::TrainingArguments recomputed = plain;
  recomputed.output_dir = (folder.path() / "b").string();
  recomputed.gradient_checkpointing = true;
  train::TrainingArguments partial = plain;  // --recompute_blocks 1: the first of 2 blocks
  partial.output_dir = (folder.path() / "c").string();
  partial.recompute_blocks = "1";
  const std::vector<double> a = logged_losses(run_world(plain, 2).log_history);
  const std::vector<double> b = logged_losses(run_world(recomputed, 2).log_history);
  const std::vector<double> c = logged_losses(run_world(partial, 2).log_history);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-6) << "step " << i + 1;
    EXPECT_EQ(a[i], c[i]) << "step " << i + 1 << ", the first block recomputed";
  }
}

// Gradient accumulation: 4 per rank x 2 micro-steps equals 8 per rank in one.
TEST(Trainer, AccumulationMatchesTheLargerBatch) {
  TempFolder folder("accumulation");
  write_corpus(folder.path() / "corpus.txt", 600);
  train::TrainingArguments one = tiny_arguments(folder.path() / "corpus.txt", folder.path() / "a");
  one.max_steps = 8;
  train::TrainingArguments two = one;
  two.output_dir = (folder.path() / "b").string();
  two.per_device_train_batch_size = 4;
  two.gradient_accumulation_steps = 2;
  const std::vector<double> a = logged_losses(run_world(one, 1).log_history);
  const std::vector<double> b = logged_losses(run_world(two, 1).log_history);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
}

// --bf16 / --fp16 (through the default config's "enabled": "auto", or a --deepspeed config's)
// train in 16 bits: the losses fall and stay within 16-bit tolerance of the fp32 run's (measured
// over these 12 steps: bf16 4.8e-4, fp16 1.1e-4 from fp32; bounds 5e-3 and 2e-3), and bf16 at
// world 2 / stage 2 gives stage 0 / world 1's losses (measured 4.6e-5; bound 1e-3).
TEST(Trainer, SixteenBitTrainingRuns) {
  TempFolder folder("sixteen");
  write_corpus(folder.path() / "corpus.txt", 600);
  train::TrainingArguments fp32 = tiny_arguments(folder.path() / "corpus.txt", folder.path() / "a");
  fp32.max_steps = 12;
  const std::vector<double> expected = logged_losses(run_world(fp32, 1).log_history);
  ASSERT_EQ(expected.size(), 12u);
  for (const bool bf16 : {true, false}) {
    train::TrainingArguments arguments = fp32;
    arguments.output_dir = (folder.path() / (bf16 ? "bf16" : "fp16")).string();
    arguments.bf16 = bf16;
    arguments.fp16 = !bf16;
    const std::vector<double> losses = logged_losses(run_world(arguments, 1).log_history);
    ASSERT_EQ(losses.size(), expected.size());
    double deviation = 0.0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
      EXPECT_NEAR(losses[i], expected[i], bf16 ? 5e-3 : 2e-3)
          << (bf16 ? "bf16" : "fp16") << " step " << i + 1;
      deviation = std::max(deviation, std::abs(losses[i] - expected[i]));
    }
    std::printf("%s: max |loss - fp32| %.2e\n", bf16 ? "bf16" : "fp16", deviation);
    EXPECT_LT(losses.back(), losses.front() - 0.3);
  }
  train::TrainingArguments sharded = fp32;
  sharded.output_dir = (folder.path() / "bf16_stage2").string();
  sharded.bf16 = true;
  sharded.per_device_train_batch_size = fp32.per_device_train_batch_size / 2;
  // A --deepspeed config enables bf16 only where it says "bf16": {"enabled": "auto"} (or true).
  auto with_bf16 = [&](int stage) {
    json config = read_json(write_ds_config(folder.path(), stage));
    config["bf16"] = {{"enabled", "auto"}};
    const fs::path path = folder.path() / ("ds_bf16_stage" + std::to_string(stage) + ".json");
    std::ofstream(path) << config.dump();
    return path.string();
  };
  sharded.deepspeed = with_bf16(2);
  train::TrainingArguments single = sharded;
  single.output_dir = (folder.path() / "bf16_stage0").string();
  single.per_device_train_batch_size = fp32.per_device_train_batch_size;
  single.deepspeed = with_bf16(0);
  const std::vector<double> a = logged_losses(run_world(single, 1).log_history);
  const std::vector<double> b = logged_losses(run_world(sharded, 2).log_history);
  ASSERT_EQ(a.size(), b.size());
  double deviation = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-3) << "step " << i + 1;
    deviation = std::max(deviation, std::abs(a[i] - b[i]));
  }
  std::printf("bf16 stage 2 world 2 vs stage 0 world 1: max |loss difference| %.2e\n", deviation);
}

// Reads a TFRecord file back: every record's two masked CRC32Cs check; returns the payloads.
std::vector<std::string> read_records(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at + 12 <= bytes.size()) {
    std::uint64_t length = 0;
    std::uint32_t crc = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(crc, train::masked_crc32c(std::string_view(bytes).substr(at, 8)));
    const std::string payload = bytes.substr(at + 12, length);
    std::memcpy(&crc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(crc, train::masked_crc32c(payload));
    records.push_back(payload);
    at += 16 + length;
  }
  EXPECT_EQ(at, bytes.size()) << "trailing bytes in " << path;
  return records;
}

// Every scalar of the event files in `folder` as tensorboard's EventAccumulator reads them, tag ->
// (step, value)s, through ZERO_PYTHON; nullopt with `why` where ZERO_PYTHON is unset or has no
// tensorboard package (the venv of scripts/setup_venv.sh has it).
using Scalars = std::map<std::string, std::vector<std::pair<std::int64_t, double>>>;
std::optional<Scalars> tensorboard_scalars(const fs::path& folder, const fs::path& scratch,
                                           std::string& why) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr || *python == '\0') {
    why = "ZERO_PYTHON unset: tensorboard's reading of the event file not checked";
    return std::nullopt;
  }
  std::ofstream(scratch / "scalars.py")
      << "import sys\ntry:\n"
         "    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
         "except Exception:\n    sys.exit(3)\n"
         "a = EventAccumulator(sys.argv[1])\na.Reload()\n"
         "with open(sys.argv[2], 'w') as out:\n"
         "    for tag in a.Tags()['scalars']:\n"
         "        for e in a.Scalars(tag):\n"
         "            out.write('%s %d %.9g\\n' % (tag, e.step, e.value))\n";
  const std::string command = std::string(python) + " '" + (scratch / "scalars.py").string() +
                              "' '" + folder.string() + "' '" + (scratch / "scalars.txt").string() +
                              "' > /dev/null 2>&1";
  const int status = std::system(command.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3) {
    why = std::string("tensorboard is not importable by ") + python;
    return std::nullopt;
  }
  EXPECT_EQ(code, 0) << "tensorboard's EventAccumulator did not read " << folder;
  Scalars scalars;
  std::ifstream in(scratch / "scalars.txt");
  std::string tag;
  std::int64_t step = 0;
  double value = 0.0;
  while (in >> tag >> step >> value) scalars[tag].emplace_back(step, value);
  return scalars;
}

std::vector<std::int64_t> steps_of(const Scalars& scalars, const std::string& tag) {
  std::vector<std::int64_t> steps;
  if (const auto found = scalars.find(tag); found != scalars.end())
    for (const auto& [step, value] : found->second) steps.push_back(step);
  return steps;
}

TEST(Trainer, Crc32cMatchesTheStandardCheckValue) {
  EXPECT_EQ(train::crc32c("123456789"), 0xE3069283u);  // CRC-32C's catalogued check value
  EXPECT_EQ(train::crc32c(""), 0u);
}

// Everything a run writes: results, trainer_state, metrics.jsonl, checkpoints (rotated), the HF
// checkpoint, csv_monitor and TensorBoard files.
TEST(Trainer, WritesTheFilesHuggingFaceAndDeepSpeedUsersExpect) {
  TempFolder folder("outputs");
  write_corpus(folder.path() / "corpus.txt", 600);
  const fs::path out = folder.path() / "out";
  train::TrainingArguments arguments = tiny_arguments(folder.path() / "corpus.txt", out);
  arguments.do_eval = true;
  arguments.logging_steps = 5;
  arguments.eval_strategy = train::IntervalStrategy::kSteps;
  arguments.eval_steps = 10;
  arguments.save_strategy = train::IntervalStrategy::kSteps;
  arguments.save_steps = 5;
  arguments.save_total_limit = 2;
  const fs::path config = folder.path() / "ds.json";
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": "auto",
    "zero_optimization": {"stage": 2},
    "csv_monitor": {"enabled": true, "job_name": "csv_job"},
    "tensorboard": {"enabled": true, "output_path": ")"
                        << (folder.path() / "tb").string() << R"(", "job_name": "tb_job"}})";
  arguments.deepspeed = config.string();
  const train::TrainResult result = run_world(arguments, 2);
  EXPECT_EQ(result.global_step, 20);
  ASSERT_TRUE(result.eval_loss.has_value());

  for (const char* name : {"config.json", "model.safetensors", "vocab.json", "merges.txt",
                           "tokenizer_config.json", "trainer_state.json", "train_results.json",
                           "eval_results.json", "all_results.json", "metrics.jsonl"})
    EXPECT_TRUE(fs::exists(out / name)) << name;
  EXPECT_FALSE(fs::exists(out / "checkpoint-5")) << "save_total_limit 2 keeps the last two";
  EXPECT_FALSE(fs::exists(out / "checkpoint-10"));
  for (const char* name : {"checkpoint-15", "checkpoint-20"}) {
    EXPECT_TRUE(fs::exists(out / name / "model.safetensors")) << name;
    EXPECT_TRUE(fs::exists(out / name / "vocab.json")) << name;
  }

  const json eval = read_json(out / "eval_results.json");
  EXPECT_NEAR(eval["eval_loss"].get<double>(), *result.eval_loss, 1e-12);
  EXPECT_NEAR(eval["perplexity"].get<double>(), std::exp(*result.eval_loss), 1e-9);
  const json all = read_json(out / "all_results.json");
  EXPECT_TRUE(all.contains("train_loss") && all.contains("eval_loss"));
  const json state = read_json(out / "trainer_state.json");
  EXPECT_EQ(state["global_step"].get<int>(), 20);
  int logs = 0, evals = 0;
  for (const json& entry : state["log_history"]) {
    logs += entry.contains("loss");
    evals += entry.contains("eval_loss");
  }
  EXPECT_EQ(logs, 4);   // steps 5, 10, 15, 20
  EXPECT_EQ(evals, 2);  // steps 10 and 20 (the final evaluation is step 20's)
  std::ifstream metrics(out / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    const json entry = json::parse(line);
    EXPECT_TRUE(entry.contains("step"));
    ++lines;
  }
  EXPECT_EQ(lines, 6);

  // csv_monitor: output_path empty, so under output_dir/job_name; DeepSpeed's file names.
  std::ifstream csv(out / "csv_job" / "Train_Samples_train_loss.csv");
  std::getline(csv, line);
  EXPECT_EQ(line, "step,train_loss");
  std::getline(csv, line);
  EXPECT_EQ(line.substr(0, 3), "80,") << "step 5 x 16 samples";
  EXPECT_TRUE(fs::exists(out / "csv_job" / "Eval_Samples_eval_loss.csv"));

  // TensorBoard: one event file whose records all check, read back by the tensorboard package
  // (the venv of scripts/setup_venv.sh has it; the test skips without it, which CI refuses).
  std::vector<fs::path> events;
  for (const auto& entry : fs::directory_iterator(folder.path() / "tb" / "tb_job"))
    events.push_back(entry.path());
  ASSERT_EQ(events.size(), 1u);
  const std::vector<std::string> records = read_records(events[0]);
  EXPECT_EQ(records.size(), 1u + 4 * 3 + 2 * 2);  // version; loss, lr, scale x4; eval x2 x2
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  {
    // Every TensorFlow-written event file starts with these 12 bytes: the 24-byte version record's
    // length and its masked CRC-32C.
    std::ifstream in(events[0], std::ios::binary);
    char head[12];
    in.read(head, 12);
    const unsigned char expected[12] = {0x18, 0, 0, 0, 0, 0, 0, 0, 0xA3, 0x7F, 0x4B, 0x22};
    EXPECT_EQ(std::memcmp(head, expected, 12), 0) << "not TensorFlow's first record framing";
  }
  std::string why;
  const std::optional<Scalars> scalars =
      tensorboard_scalars(events[0].parent_path(), folder.path(), why);
  if (!scalars) GTEST_SKIP() << why;
  EXPECT_EQ(steps_of(*scalars, "Train/Samples/train_loss"),
            (std::vector<std::int64_t>{80, 160, 240, 320}))
      << "DeepSpeed's monitor writes against samples (16 a step)";
  for (const auto& [tag, points] : *scalars)
    EXPECT_TRUE(tag.starts_with("Train/Samples/") || tag.starts_with("Eval/Samples/"))
        << tag << ": --report_to none writes no Hugging Face tags";
}

// --report_to tensorboard without a monitor in the config: Hugging Face's TensorBoardCallback's
// tags against the global step in --logging_dir (train/loss, train/learning_rate,
// train/grad_norm, train/epoch at each log; eval/loss at each evaluation), no DeepSpeed tags.
TEST(Trainer, ReportToTensorBoardWritesHuggingFaceTagsAgainstTheStep) {
  TempFolder folder("report_to");
  write_corpus(folder.path() / "corpus.txt", 600);
  const fs::path out = folder.path() / "out";
  train::TrainingArguments arguments = tiny_arguments(folder.path() / "corpus.txt", out);
  arguments.do_eval = true;
  arguments.logging_steps = 5;
  arguments.eval_strategy = train::IntervalStrategy::kSteps;
  arguments.eval_steps = 10;
  arguments.report_to = "tensorboard";
  arguments.logging_dir = (folder.path() / "runs").string();
  const train::TrainResult result = run_world(arguments, 1);
  ASSERT_EQ(result.global_step, 20);

  std::vector<fs::path> events;
  for (const auto& entry : fs::recursive_directory_iterator(folder.path()))
    if (entry.path().filename().string().starts_with("events.out.tfevents"))
      events.push_back(entry.path());
  ASSERT_EQ(events.size(), 1u) << "one event file: --logging_dir's, none of DeepSpeed's";
  EXPECT_EQ(events[0].parent_path(), folder.path() / "runs");
  EXPECT_GT(read_records(events[0]).size(), 1u);  // every record's CRCs check

  std::string why;
  const std::optional<Scalars> scalars =
      tensorboard_scalars(events[0].parent_path(), folder.path(), why);
  if (!scalars) GTEST_SKIP() << why;
  const std::vector<std::int64_t> logs = {5, 10, 15, 20};
  for (const char* tag : {"train/loss", "train/learning_rate", "train/grad_norm"})
    EXPECT_EQ(steps_of(*scalars, tag), logs) << tag;
  EXPECT_EQ(steps_of(*scalars, "eval/loss"), (std::vector<std::int64_t>{10, 20}));
  EXPECT_EQ(steps_of(*scalars, "train/epoch").size(), 4u + 2u + 1u);
  EXPECT_EQ(steps_of(*scalars, "train/train_loss"), (std::vector<std::int64_t>{20}));
  for (const auto& [tag, points] : *scalars)
    EXPECT_FALSE(tag.starts_with("Train/") || tag.starts_with("Eval/"))
        << tag << ": DeepSpeed's tags only where the config's monitor asks";
  std::size_t at = 0;
  for (const train::LogEntry& entry : result.log_history) {
    if (!entry.loss) continue;
    ASSERT_LT(at, scalars->at("train/loss").size());
    EXPECT_NEAR(scalars->at("train/loss")[at].second, *entry.loss, 1e-5 * *entry.loss);
    EXPECT_NEAR(scalars->at("train/grad_norm")[at].second, *entry.grad_norm,
                1e-5 * *entry.grad_norm);
    ++at;
  }
}

// A saved checkpoint loads back (sharded at stage 3 over 2 ranks) and evaluates to the same loss.
TEST(Trainer, SavedCheckpointEvaluatesToTheSameLoss) {
  TempFolder folder("roundtrip");
  write_corpus(folder.path() / "corpus.txt", 600);
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "trained");
  arguments.do_eval = true;
  arguments.max_steps = 10;
  const train::TrainResult trained = run_world(arguments, 1);
  train::TrainingArguments evaluate;
  evaluate.model_name_or_path = arguments.output_dir;
  evaluate.train_files = arguments.train_files;
  evaluate.block_size = 16;
  evaluate.do_eval = true;
  evaluate.per_device_eval_batch_size = 3;  // another batching: the same mean
  evaluate.output_dir = (folder.path() / "evaluated").string();
  evaluate.deepspeed = write_ds_config(folder.path(), 3).string();
  evaluate.plot = false;
  const train::TrainResult evaluated = run_world(evaluate, 2);
  ASSERT_TRUE(trained.eval_loss && evaluated.eval_loss);
  EXPECT_NEAR(*evaluated.eval_loss, *trained.eval_loss, 1e-6);
  EXPECT_FALSE(fs::exists(fs::path(evaluate.output_dir) / "model.safetensors"))
      << "eval only saves no model";
}

// A host program's hooks (the Python module's): every rank's on_log sees each entry of its own
// history as it is recorded, and rank 0's lines, the dry run's too, go to print_line alone.
class HostHooks : public TinyRunTest {
 protected:
  HostHooks() : TinyRunTest("host_hooks", 1) {}
};

TEST_F(HostHooks, SeeEveryLogEntryAndTheLines) {
  train::TrainingArguments arguments = this->arguments("out", 4);
  arguments.do_eval = true;
  arguments.eval_strategy = train::IntervalStrategy::kSteps;
  arguments.eval_steps = 2;
  std::mutex mutex;
  std::vector<std::vector<train::LogEntry>> seen(2);
  std::vector<train::TrainResult> results(2);
  std::vector<std::string> lines(2);
  run_ranks(2, [&](Communicator& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    train::RunOptions options;
    options.print_line = [&, rank](std::string_view text) {
      const std::lock_guard lock(mutex);
      lines[rank] += text;
    };
    options.on_log = [&, rank](const train::LogEntry& entry) {
      ASSERT_LT(seen[rank].size(), 64u);
      seen[rank].push_back(entry);
    };
    results[rank] = train::train(arguments, comm, options);
  });
  for (std::size_t rank = 0; rank < 2; ++rank) {
    ASSERT_EQ(seen[rank].size(), results[rank].log_history.size()) << "rank " << rank;
    EXPECT_EQ(logged_losses(seen[rank]), logged_losses(results[rank].log_history));
    train::TrainResult from_hook;
    from_hook.log_history = seen[rank];
    EXPECT_EQ(eval_losses(from_hook), eval_losses(results[rank]));
    EXPECT_GE(eval_losses(from_hook).size(), 2u);
  }
  EXPECT_EQ(logged_losses(seen[0]).size(), 4u);
  EXPECT_NE(lines[0].find("step 4/4"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("eval_loss"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "") << "rank 1 prints nothing";

  arguments.dry_run = true;
  arguments.world_size = 4;
  std::string planned;
  train::RunOptions options;
  options.print_line = [&](std::string_view text) { planned += text; };
  run_ranks(1, [&](Communicator& comm) { train::train(arguments, comm, options); });
  EXPECT_EQ(planned.rfind("dry run: GPT-2 2 layers", 0), 0u) << planned;
  EXPECT_NE(planned.find("planned 4 rank(s)"), std::string::npos) << planned;
}

// CSV as run_clm reads it (the "text" column; quoted commas, quotes and line breaks) trains and
// evaluates exactly as the same rows in JSON Lines.
TEST(Trainer, CsvRowsAreTheSameExamplesAsJsonLines) {
  TempFolder folder("csv");
  write_corpus(folder.path() / "corpus.txt", 300);
  std::ifstream lines_in(folder.path() / "corpus.txt");
  std::ofstream csv(folder.path() / "data.csv"), jsonl(folder.path() / "data.jsonl");
  csv << "id,text\n";
  std::string line;
  for (int row = 0; std::getline(lines_in, line); ++row) {
    std::string text = line + (row % 7 == 0 ? ", \"quoted\"\nand on" : "");
    std::string escaped;
    for (const char c : text) escaped += c == '"' ? std::string("\"\"") : std::string(1, c);
    csv << row << ",\"" << escaped << "\"\n";
    jsonl << json{{"text", text}}.dump() << "\n";
  }
  csv.close();
  jsonl.close();
  std::vector<double> eval_losses;
  for (const char* name : {"data.csv", "data.jsonl"}) {
    train::TrainingArguments arguments =
        tiny_arguments(folder.path() / name, folder.path() / (std::string("out_") + name));
    arguments.max_steps = 3;
    arguments.do_eval = true;
    arguments.validation_split_percentage = 10;
    eval_losses.push_back(*run_world(arguments, 1).eval_loss);
  }
  EXPECT_EQ(eval_losses[0], eval_losses[1]);
  std::ofstream(folder.path() / "ragged.csv") << "a,text\n1,x\n2\n";
  train::TrainingArguments ragged =
      tiny_arguments(folder.path() / "ragged.csv", folder.path() / "out_ragged");
  std::unique_ptr<Communicator> local = make_local_communicator();
  try {
    train::train(ragged, *local, {.print = false});
    ADD_FAILURE() << "no error for a ragged CSV";
  } catch (const train::InputError& error) {
    EXPECT_NE(std::string(error.what()).find("ragged.csv: row 3 has 1 fields"), std::string::npos)
        << error.what();
  }
}

// --streaming: blocks in corpus order as training goes; the same losses at worlds 1 and 2, and a
// clear error without --max_steps.
TEST(Trainer, StreamingGivesTheSameLossesAtEveryWorldSize) {
  TempFolder folder("streaming");
  write_corpus(folder.path() / "corpus.txt", 600);
  write_corpus(folder.path() / "valid.txt", 60, 3);
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "w1");
  arguments.streaming = true;
  arguments.max_steps = 100;  // more than one pass over the stream (94 global batches)
  arguments.do_eval = true;
  arguments.validation_files = {(folder.path() / "valid.txt").string()};
  const train::TrainResult one = run_world(arguments, 1);
  train::TrainingArguments two = arguments;
  two.output_dir = (folder.path() / "w2").string();
  two.per_device_train_batch_size = 4;
  two.deepspeed = write_ds_config(folder.path(), 3).string();
  const train::TrainResult sharded = run_world(two, 2);
  const std::vector<double> a = logged_losses(one.log_history);
  const std::vector<double> b = logged_losses(sharded.log_history);
  ASSERT_EQ(a.size(), 100u);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  EXPECT_LT(a.back(), a.front());
  ASSERT_TRUE(one.eval_loss && sharded.eval_loss);
  EXPECT_NEAR(*one.eval_loss, *sharded.eval_loss, 1e-5);

  train::TrainingArguments no_steps = arguments;
  no_steps.max_steps = -1;
  no_steps.output_dir = (folder.path() / "none").string();
  std::unique_ptr<Communicator> local = make_local_communicator();
  try {
    train::train(no_steps, *local, {.print = false});
    ADD_FAILURE() << "no error";
  } catch (const train::InputError& error) {
    EXPECT_NE(std::string(error.what()).find("--streaming needs --max_steps"), std::string::npos);
  }
}

// Fractional epochs, max_train_samples and the "epoch" strategies: 16 blocks are 2 steps of 8, so
// 2.5 epochs are ceil(2.5 x 2) = 5 steps with evaluations and checkpoints at steps 2 and 4.
TEST(Trainer, EpochStrategiesAndFractionalEpochs) {
  TempFolder folder("epochs");
  write_corpus(folder.path() / "corpus.txt", 600);
  const fs::path out = folder.path() / "out";
  train::TrainingArguments arguments = tiny_arguments(folder.path() / "corpus.txt", out);
  arguments.max_steps = -1;
  arguments.num_train_epochs = 2.5;
  arguments.max_train_samples = 16;
  arguments.per_device_train_batch_size = 4;  // x 2 ranks
  arguments.do_eval = true;
  arguments.eval_strategy = train::IntervalStrategy::kEpoch;
  arguments.save_strategy = train::IntervalStrategy::kEpoch;
  const train::TrainResult result = run_world(arguments, 2);
  EXPECT_EQ(result.global_step, 5);
  EXPECT_DOUBLE_EQ(result.epoch, 2.5);
  std::vector<std::int64_t> eval_steps;
  for (const train::LogEntry& entry : result.log_history)
    if (entry.eval_loss) eval_steps.push_back(entry.step);
  EXPECT_EQ(eval_steps, (std::vector<std::int64_t>{2, 4, 5}));
  EXPECT_TRUE(fs::exists(out / "checkpoint-2" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-4" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / "checkpoint-5"));
}

// Hugging Face's schedules: linear warmup from 0, then linear decay / cosine to 0.
TEST(Trainer, HuggingFaceSchedules) {
  auto lrs = [](std::string_view type) {
    auto schedule = train::make_hf_schedule(type, 1.0, 2, 10);
    std::vector<double> values;
    for (int k = 0; k < 11; ++k) {
      values.push_back(schedule->lr());
      schedule->step();
    }
    return values;
  };
  const std::vector<double> linear = lrs("linear");
  EXPECT_DOUBLE_EQ(linear[0], 0.0);
  EXPECT_DOUBLE_EQ(linear[1], 0.5);
  EXPECT_DOUBLE_EQ(linear[2], 1.0);
  EXPECT_DOUBLE_EQ(linear[6], 0.5);
  EXPECT_DOUBLE_EQ(linear[10], 0.0);
  const std::vector<double> cosine = lrs("cosine");
  EXPECT_DOUBLE_EQ(cosine[2], 1.0);
  EXPECT_NEAR(cosine[6], 0.5, 1e-12);
  EXPECT_NEAR(cosine[10], 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(lrs("constant")[0], 1.0);
  EXPECT_DOUBLE_EQ(lrs("constant_with_warmup")[1], 0.5);
  EXPECT_DOUBLE_EQ(lrs("constant_with_warmup")[9], 1.0);
  EXPECT_THROW(train::make_hf_schedule("cosnie", 1.0, 0, 1), Error);
}

// ---- Bad input: InputError naming it, and nothing written to output_dir. ----

class TrainerInputErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    write_corpus(folder_.path() / "corpus.txt", 600);
    arguments_ = tiny_arguments(folder_.path() / "corpus.txt", folder_.path() / "out");
    arguments_.max_steps = 2;
  }
  // Runs alone (the error must be an InputError: exit 2) and at world 2 (every rank stops);
  // returns the message. output_dir must not have been written.
  std::string error_of(const train::TrainingArguments& arguments) {
    const bool existed = fs::exists(arguments.output_dir);
    std::string message;
    try {
      std::unique_ptr<Communicator> local = make_local_communicator();
      train::train(arguments, *local, {.print = false});
      ADD_FAILURE() << "no error";
    } catch (const train::InputError& error) {
      message = error.what();
    }
    try {
      run_world(arguments, 2);
      ADD_FAILURE() << "no error at world 2";
    } catch (const std::exception& error) {
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
    EXPECT_TRUE(existed || !fs::exists(arguments.output_dir)) << "output_dir was created";
    return message;
  }
  TempFolder folder_{"errors"};
  train::TrainingArguments arguments_;
};

TEST_F(TrainerInputErrors, MissingEmptyAndBinaryDataFiles) {
  train::TrainingArguments missing = arguments_;
  missing.train_files = {(folder_.path() / "absent.txt").string()};
  EXPECT_NE(error_of(missing).find("absent.txt"), std::string::npos);

  std::ofstream(folder_.path() / "empty.txt").flush();
  train::TrainingArguments empty = arguments_;
  empty.validation_files = {(folder_.path() / "empty.txt").string()};
  empty.do_eval = true;
  const std::string empty_message = error_of(empty);
  EXPECT_NE(empty_message.find("empty.txt"), std::string::npos) << empty_message;
  EXPECT_NE(empty_message.find("--validation_file"), std::string::npos) << empty_message;

  {
    std::ofstream binary(folder_.path() / "binary.txt", std::ios::binary);
    const char bytes[] = {'a', '\0', 'b', '\x01', '\xff'};
    binary.write(bytes, sizeof(bytes));
  }
  train::TrainingArguments binary = arguments_;
  binary.train_files = {(folder_.path() / "binary.txt").string()};
  const std::string binary_message = error_of(binary);
  EXPECT_NE(binary_message.find("binary.txt"), std::string::npos) << binary_message;
  EXPECT_NE(binary_message.find("binary"), std::string::npos) << binary_message;
}

TEST_F(TrainerInputErrors, BlockSizeLargerThanTheContext) {
  train::TrainingArguments arguments = arguments_;
  arguments.block_size = 17;
  const std::string message = error_of(arguments);
  EXPECT_NE(message.find("--block_size 17 is larger than the model's n_positions 16"),
            std::string::npos)
      << message;
}

TEST_F(TrainerInputErrors, ConfigThatContradictsAFlag) {
  train::TrainingArguments arguments = arguments_;
  const fs::path config = folder_.path() / "contradicts.json";
  std::ofstream(config) << R"({"train_micro_batch_size_per_gpu": 4,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}})";
  arguments.deepspeed = config.string();
  const std::string message = error_of(arguments);
  EXPECT_NE(message.find("contradicts.json"), std::string::npos) << message;
  EXPECT_NE(message.find("train_micro_batch_size_per_gpu"), std::string::npos) << message;
}

// A broken --deepspeed file is reported before any data is read (the config is resolved where
// the run starts): the train file named here does not exist, and the error is the JSON's.
TEST_F(TrainerInputErrors, BrokenDeepSpeedJsonIsReportedBeforeTheData) {
  train::TrainingArguments arguments = arguments_;
  const fs::path config = folder_.path() / "broken.json";
  std::ofstream(config) << R"({"zero_optimization": {"stage": 2,}})";
  arguments.deepspeed = config.string();
  arguments.train_files = {(folder_.path() / "absent.txt").string()};
  const std::string message = error_of(arguments);
  EXPECT_NE(message.find("--deepspeed " + config.string()), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  EXPECT_EQ(message.find("absent.txt"), std::string::npos) << "data read first: " << message;
}

TEST_F(TrainerInputErrors, NonEmptyOutputDirWithoutOverwrite) {
  fs::create_directories(arguments_.output_dir);
  std::ofstream(fs::path(arguments_.output_dir) / "keep.txt") << "mine";
  const std::string message = error_of(arguments_);
  EXPECT_NE(message.find("--overwrite_output_dir"), std::string::npos) << message;
  EXPECT_EQ(std::distance(fs::directory_iterator(arguments_.output_dir), fs::directory_iterator()),
            1)
      << "the folder was touched";
  train::TrainingArguments overwrite = arguments_;
  overwrite.overwrite_output_dir = true;
  EXPECT_EQ(run_world(overwrite, 1).global_step, 2);
  EXPECT_TRUE(fs::exists(fs::path(arguments_.output_dir) / "keep.txt"));
}

TEST_F(TrainerInputErrors, BadArgumentsNameTheFlag) {
  train::TrainingArguments arguments = arguments_;
  arguments.lr_scheduler_type = "cosnie";
  EXPECT_NE(error_of(arguments).find("cosnie"), std::string::npos);
  arguments = arguments_;
  arguments.do_train = false;
  EXPECT_NE(error_of(arguments).find("--do_train"), std::string::npos);
  arguments = arguments_;
  arguments.config_overrides = "n_layr=2";
  EXPECT_NE(error_of(arguments).find("n_layer"), std::string::npos);
}

// A communicator for device buffers, as NCCL: the CPU model's collectives would hand it host
// pointers, so the run is refused before any collective or file.
class DeviceBufferCommunicator final : public Communicator {
 public:
  DeviceBufferCommunicator() : Communicator(CommOptions::from_environment()) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "device-buffers"; }
  DeviceKind buffers() const override { return DeviceKind::kCuda; }

 protected:
  void run(const CollectiveInfo& info, const void*, void*) override {
    ADD_FAILURE() << "a collective ran: " << info.to_string();
  }
};

TEST_F(TrainerInputErrors, CommunicatorThatTakesOtherMemoryIsRefused) {
  DeviceBufferCommunicator communicator;
  try {
    train::train(arguments_, communicator, {.print = false});
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("make_communicator(DeviceKind::kCpu)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(fs::exists(arguments_.output_dir)) << "output_dir was created";
  EXPECT_EQ(communicator.sequence(), 0u);
}

}  // namespace
}  // namespace zero::testing
