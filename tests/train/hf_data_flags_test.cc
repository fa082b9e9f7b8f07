// Issue 23: the Hugging Face flags left from the first pass, each with a value that changes
// something observable: --overwrite_cache (the token cache file in the datasets cache or in
// --cache_dir, never beside the data), 5.x's fractional --warmup_steps (the learning rates),
// --include_num_input_tokens_seen all/non_padding (the counts) and --label_smoothing_factor (the
// losses).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/comm/thread_communicator.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The token cache files in `folder` (none when it does not exist).
std::vector<fs::path> cache_files(const fs::path& folder) {
  std::vector<fs::path> files;
  if (!fs::exists(folder)) return files;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder))
    if (entry.path().extension() == ".bin") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

ino_t inode_of(const fs::path& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return info.st_ino;
}

class DataFlags : public TinyRunTest {
 protected:
  DataFlags() : TinyRunTest("hf_data_flags", 1) {}
};

// HF_HOME set to `value` while it lives (the previous value back after).
class HfHome {
 public:
  explicit HfHome(const fs::path& value) {
    if (const char* was = std::getenv("HF_HOME")) previous_ = was;
    ::setenv("HF_HOME", value.c_str(), 1);
  }
  ~HfHome() {
    if (previous_) {
      ::setenv("HF_HOME", previous_->c_str(), 1);
    } else {
      ::unsetenv("HF_HOME");
    }
  }

 private:
  std::optional<std::string> previous_;
};

// The names in `folder`, recursively, with their sizes and times.
std::vector<std::string> listing(const fs::path& folder) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::recursive_directory_iterator(folder))
    names.push_back(fs::relative(entry.path(), folder).string() + " " +
                    std::to_string(entry.is_regular_file() ? entry.file_size() : 0) + " " +
                    std::to_string(entry.last_write_time().time_since_epoch().count()));
  std::sort(names.begin(), names.end());
  return names;
}

// run_clm's tokenized data is cached in the datasets cache (HF_HOME/datasets/zero_tokens), as
// datasets keeps what load_dataset prepares, never beside the data: the second run maps the same
// file (not rewritten: same inode) and trains the same; --overwrite_cache writes a new one;
// another --keep_linebreaks, a touched file or --cache_dir each have their own.
TEST_F(DataFlags, TokenCacheIsReusedAndOverwriteCacheRebuildsIt) {
  const HfHome home(folder_.path() / "hf_home");
  const fs::path cache = folder_.path() / "hf_home" / "datasets" / "zero_tokens";
  const fs::path data = folder_.path() / "data";
  fs::create_directories(data);
  fs::rename(corpus(), data / "corpus.txt");
  auto on_data = [&](const std::string& out, std::int64_t steps) {
    train::TrainingArguments a = arguments(out, steps);
    a.train_files = {(data / "corpus.txt").string()};
    return a;
  };
  const std::vector<std::string> data_before = listing(data);
  const train::TrainResult first = run_one(on_data("first", 3));
  const std::vector<fs::path> files = cache_files(cache);
  ASSERT_EQ(files.size(), 1u) << "the train file's stream (validation is split from it)";
  const ino_t written = inode_of(files[0]);
  const auto written_time = fs::last_write_time(files[0]);

  const train::TrainResult second = run_one(on_data("second", 3));
  EXPECT_EQ(cache_files(cache), files);
  EXPECT_EQ(inode_of(files[0]), written) << "the cache was used, not rewritten";
  EXPECT_EQ(fs::last_write_time(files[0]), written_time);
  EXPECT_EQ(logged_losses(second.log_history), logged_losses(first.log_history));

  train::TrainingArguments overwrite = on_data("overwrite", 3);
  overwrite.overwrite_cache = true;
  const train::TrainResult rebuilt = run_one(overwrite);
  EXPECT_EQ(cache_files(cache), files);
  EXPECT_NE(inode_of(files[0]), written) << "--overwrite_cache wrote the file again";
  EXPECT_EQ(logged_losses(rebuilt.log_history), logged_losses(first.log_history));

  train::TrainingArguments stripped = on_data("stripped", 1);
  stripped.keep_linebreaks = false;
  run_one(stripped);
  EXPECT_EQ(cache_files(cache).size(), 2u) << "--keep_linebreaks False: other ids, other file";
  EXPECT_EQ(listing(data), data_before) << "nothing written beside the data";

  fs::last_write_time(data / "corpus.txt",
                      fs::last_write_time(data / "corpus.txt") + std::chrono::seconds(5));
  run_one(on_data("touched", 1));
  EXPECT_EQ(cache_files(cache).size(), 3u) << "a touched data file is not trusted";

  train::TrainingArguments elsewhere = on_data("elsewhere", 1);
  elsewhere.cache_dir = (folder_.path() / "hf_cache").string();
  run_one(elsewhere);
  EXPECT_EQ(cache_files(folder_.path() / "hf_cache" / "zero_tokens").size(), 1u);
  EXPECT_EQ(cache_files(cache).size(), 3u);
}

// The cache is named by the data's content: a file of the same name in another folder, other
// text, tokenized by the same tokenizer, gets its own cache file rather than the first's tokens.
TEST_F(DataFlags, TwoDataFilesOfOneNameHaveTheirOwnCache) {
  const HfHome home(folder_.path() / "hf_home");
  const fs::path cache = folder_.path() / "hf_home" / "datasets" / "zero_tokens";
  run_one(arguments("tokenizer", 1));  // learns the tokenizer both runs below load
  for (const char* other : {"a", "b"}) fs::create_directories(folder_.path() / other);
  fs::copy_file(corpus(), folder_.path() / "a" / "corpus.txt");
  write_corpus(folder_.path() / "b" / "corpus.txt", 600, 2);
  const std::size_t before = cache_files(cache).size();
  std::vector<std::vector<double>> losses;
  for (const char* other : {"a", "b"}) {
    train::TrainingArguments a = arguments(std::string("out_") + other, 2);
    a.train_files = {(folder_.path() / other / "corpus.txt").string()};
    a.tokenizer_name = (folder_.path() / "tokenizer").string();
    losses.push_back(logged_losses(run_one(a).log_history));
  }
  EXPECT_EQ(cache_files(cache).size(), before + 2) << "a/corpus.txt and b/corpus.txt";
  EXPECT_NE(losses[0], losses[1]) << "b trained on a's tokens";
}

// A cache folder that cannot be created is a warning, not a failed run.
TEST_F(DataFlags, AnUnwritableCacheStillTrains) {
  std::ofstream(folder_.path() / "not_a_folder") << "x";
  train::TrainingArguments a = arguments("unwritable", 2);
  a.cache_dir = (folder_.path() / "not_a_folder").string();
  EXPECT_EQ(logged_losses(run_one(a).log_history).size(), 2u);
}

// 5.x: --warmup_steps below 1 is the fraction of the total steps; 0.5 of 10 warms up as 5 does.
TEST_F(DataFlags, FractionalWarmupStepsIsARatioOfTheTotalSteps) {
  auto rates = [](const train::TrainResult& result) {
    std::vector<double> lr;
    for (const train::LogEntry& entry : result.log_history)
      if (entry.learning_rate) lr.push_back(*entry.learning_rate);
    return lr;
  };
  train::TrainingArguments fraction = arguments("fraction"), steps = arguments("steps"),
                           none = arguments("none");
  fraction.warmup_steps = 0.5;
  steps.warmup_steps = 5;
  none.warmup_steps = 0;
  const std::vector<double> by_fraction = rates(run_one(fraction));
  ASSERT_EQ(by_fraction.size(), 10u);
  EXPECT_EQ(by_fraction, rates(run_one(steps)));
  EXPECT_NE(by_fraction, rates(run_one(none)));
  EXPECT_DOUBLE_EQ(by_fraction[0], 3e-3 * 1 / 5) << "step 1 of a 5-step warmup";
  train::TrainingArguments negative = arguments("negative");
  negative.warmup_steps = -0.5;
  EXPECT_THROW(run_one(negative), train::InputError);
}

// A causal LM block has no padding: non_padding counts what all counts, every rank's.
TEST_F(DataFlags, InputTokensSeenNonPaddingEqualsAllForBlocks) {
  for (const char* mode : {"all", "non_padding", "True"}) {
    SCOPED_TRACE(mode);
    train::TrainingArguments a = arguments(std::string("seen_") + mode, 4);
    a.include_num_input_tokens_seen = mode;
    a.per_device_train_batch_size = 4;
    run_ranks(2,
              [&](Communicator& communicator) { train::train(a, communicator, {.print = false}); });
    const json state = read_json(a.output_dir + "/trainer_state.json");
    EXPECT_EQ(state["num_input_tokens_seen"], 4 * 4 * 2 * 16) << "4 steps x 4 rows x 2 ranks";
    EXPECT_EQ(state["log_history"][0]["num_input_tokens_seen"], 4 * 2 * 16);
  }
  train::TrainingArguments bad = arguments("bad");
  bad.include_num_input_tokens_seen = "some";
  EXPECT_THROW(run_one(bad), train::InputError);
}

// A resumed run counts on from the checkpoint's trainer_state.json.
TEST_F(DataFlags, InputTokensSeenContinuesOnResume) {
  train::TrainingArguments first = arguments("counted", 4);
  first.include_num_input_tokens_seen = "all";
  first.save_strategy = train::IntervalStrategy::kSteps;
  first.save_steps = 2;
  run_one(first);
  EXPECT_EQ(
      read_json(first.output_dir + "/checkpoint-2/trainer_state.json")["num_input_tokens_seen"],
      2 * 8 * 16);
  train::TrainingArguments resumed = first;
  resumed.output_dir = (folder_.path() / "resumed").string();
  resumed.resume_from_checkpoint = first.output_dir + "/checkpoint-2";
  run_one(resumed);
  EXPECT_EQ(read_json(resumed.output_dir + "/trainer_state.json")["num_input_tokens_seen"],
            4 * 8 * 16);
}

// Classification rows are padded to --max_seq_length: non_padding counts the tokens before each
// row's padding, the same at worlds 1 and 2; all counts the padded rows.
TEST_F(DataFlags, InputTokensSeenNonPaddingSkipsClassificationPadding) {
  {
    std::ofstream out(folder_.path() / "labelled.csv");
    out << "text,label\n";
    for (int i = 0; i < 32; ++i)
      out << (i % 2 ? "the sea and the ship" : "a king of swords and crowns in battle") << " " << i
          << "," << (i % 2 ? "sea" : "war") << "\n";
  }
  auto seen = [&](const std::string& mode, int world) {
    train::TrainingArguments a = arguments("classify_" + mode + std::to_string(world), 4);
    a.task = "text-classification";
    a.train_files = {(folder_.path() / "labelled.csv").string()};
    a.text_column_names = "text";
    a.max_seq_length = 16;
    a.per_device_train_batch_size = 8 / world;
    a.include_num_input_tokens_seen = mode;
    run_ranks(world,
              [&](Communicator& communicator) { train::train(a, communicator, {.print = false}); });
    return read_json(a.output_dir + "/trainer_state.json")["num_input_tokens_seen"]
        .get<std::int64_t>();
  };
  EXPECT_EQ(seen("all", 1), 4 * 8 * 16);
  const std::int64_t non_padding = seen("non_padding", 1);
  EXPECT_GT(non_padding, 4 * 8 * 3);
  EXPECT_LT(non_padding, 4 * 8 * 16);
  EXPECT_EQ(seen("non_padding", 2), non_padding);
}

// --label_smoothing_factor smooths the training loss (and so the model) and the evaluation loss.
TEST_F(DataFlags, LabelSmoothingChangesTheLosses) {
  train::TrainingArguments plain = arguments("plain", 3), smoothed = arguments("smoothed", 3);
  plain.do_eval = smoothed.do_eval = true;
  smoothed.label_smoothing_factor = 0.1;
  const train::TrainResult a = run_one(plain), b = run_one(smoothed);
  ASSERT_EQ(logged_losses(a.log_history).size(), 3u);
  EXPECT_NE(logged_losses(a.log_history), logged_losses(b.log_history));
  ASSERT_TRUE(a.eval_loss && b.eval_loss);
  EXPECT_NE(*a.eval_loss, *b.eval_loss);
  train::TrainingArguments bad = arguments("bad");
  bad.label_smoothing_factor = 1.0;
  EXPECT_THROW(run_one(bad), train::InputError);
}

}  // namespace
}  // namespace zero::testing
