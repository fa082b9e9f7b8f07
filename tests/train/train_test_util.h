// Shared pieces of the trainer tests: a small deterministic corpus, a tiny model's arguments, a
// DeepSpeed config per stage, temporary folders, one-rank and thread-rank runs, the logged losses
// and a JSON file's contents.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/train/arguments.h"
#include "zero/train/trainer.h"

namespace zero::testing {

namespace fs = std::filesystem;

// `arguments` trained by one rank, quietly.
inline train::TrainResult run_one(const train::TrainingArguments& arguments) {
  std::unique_ptr<Communicator> local = make_local_communicator();
  return train::train(arguments, *local, {.print = false});
}

// The JSON document in `path` (an expectation fails when it cannot be opened).
inline nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// A fresh folder under the system temp dir, removed by the destructor.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("zero_train_" + name + "_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// `lines` sentences of 4 to 11 words drawn from a small word list by a fixed generator.
inline void write_corpus(const fs::path& file, int lines, std::uint64_t seed = 1) {
  static const char* kWords[] = {"the",   "king",  "queen", "speaks", "of",   "a",     "night",
                                 "sword", "crown", "and",   "dark",   "sea",  "fair",  "lord",
                                 "my",    "heart", "doth",  "love",   "thee", "to",    "battle",
                                 "wind",  "star",  "gold",  "is",     "not",  "where", "home"};
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::ofstream out(file);
  for (int line = 0; line < lines; ++line) {
    const int words = 4 + static_cast<int>(next() % 8);
    for (int w = 0; w < words; ++w)
      out << (w ? " " : "") << kWords[next() % (sizeof(kWords) / sizeof(kWords[0]))];
    out << (next() % 3 == 0 ? ".\n" : ",\n");
  }
}

// A DeepSpeed config with every trainer value "auto" at ZeRO `stage`. Without `precision_auto` it
// has no "bf16"/"fp16" sections, so the run trains in fp32 whatever --bf16 says (as DeepSpeed's
// config decides); with it, both are {"enabled": "auto"} and --bf16/--fp16 fill them.
inline fs::path write_ds_config(const fs::path& folder, int stage, bool precision_auto = false) {
  const fs::path path = folder / ("ds_stage" + std::to_string(stage) +
                                  (precision_auto ? "_precision_auto" : "") + ".json");
  std::ofstream(path) << R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",)"
                      << (precision_auto
                              ? R"( "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},)"
                              : "")
                      << R"(
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                            "weight_decay": "auto"}},
  "zero_optimization": {"stage": )"
                      << stage
                      << R"(, "reduce_bucket_size": 4096, "stage3_prefetch_bucket_size": 4096,
                         "stage3_param_persistence_threshold": 0}})";
  return path;
}

// A tiny GPT-2 from scratch (2 layers, width 32, context 16) on `corpus` with a 300-token BPE
// learned on it; 5% of the lines validate.
inline train::TrainingArguments tiny_arguments(const fs::path& corpus, const fs::path& output_dir) {
  train::TrainingArguments arguments;
  arguments.train_files = {corpus.string()};
  arguments.config_overrides = "n_layer=2,n_embd=32,n_head=4,n_positions=16";
  arguments.tokenizer_vocab_size = 300;
  arguments.block_size = 16;
  arguments.output_dir = output_dir.string();
  arguments.do_train = true;
  arguments.max_steps = 20;
  arguments.logging_steps = 1;
  arguments.learning_rate = 3e-3;
  arguments.warmup_steps = 2;
  arguments.weight_decay = 0.01;
  arguments.per_device_train_batch_size = 8;
  arguments.save_strategy = train::IntervalStrategy::kNo;
  arguments.plot = false;
  return arguments;
}

inline std::vector<double> logged_losses(const std::vector<train::LogEntry>& history) {
  std::vector<double> losses;
  for (const train::LogEntry& entry : history)
    if (entry.loss) losses.push_back(*entry.loss);
  return losses;
}

inline std::vector<double> eval_losses(const train::TrainResult& result) {
  std::vector<double> losses;
  for (const train::LogEntry& entry : result.log_history)
    if (entry.eval_loss) losses.push_back(*entry.eval_loss);
  return losses;
}

// `arguments` trained by `world` thread ranks, quietly; rank 0's result.
inline train::TrainResult train_on(int world, const train::TrainingArguments& arguments) {
  train::TrainResult first;
  run_ranks(world, [&](Communicator& comm) {
    train::TrainResult result = train::train(arguments, comm, {.print = false});
    if (comm.rank() == 0) first = std::move(result);
  });
  return first;
}

// A test in a folder of its own with trainer_test's corpus: arguments(out, steps) is
// tiny_arguments() training `steps` steps into `out`, logging every `logging_steps`.
class TinyRunTest : public ::testing::Test {
 protected:
  TinyRunTest(const std::string& name, std::int64_t logging_steps)
      : folder_(name), logging_steps_(logging_steps) {}
  void SetUp() override { write_corpus(corpus(), 600); }
  fs::path corpus() const { return folder_.path() / "corpus.txt"; }
  train::TrainingArguments arguments(const std::string& out, std::int64_t steps = 10) {
    train::TrainingArguments a = tiny_arguments(corpus(), folder_.path() / out);
    a.max_steps = steps;
    a.logging_steps = logging_steps_;
    return a;
  }
  TempFolder folder_;
  std::int64_t logging_steps_;
};

}  // namespace zero::testing
