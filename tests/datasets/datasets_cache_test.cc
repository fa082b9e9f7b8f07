// --dataset_name NAME --dataset_config_name CONFIG found in HF datasets' cache as its offline
// load_dataset finds it (zero/train/datasets_cache.h), over the cache datasets wrote in
// fixtures/cache: the configuration asked for, the newest complete folder, the splits and shards
// of dataset_info.json, the refusals naming what is there; the Hub cache's parquet refused with
// a load_dataset command that keeps the configuration; and a run trained from the cache.
#include "zero/train/datasets_cache.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "../common/test_data.h"
#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/train/hub_cache.h"
#include "zero/train/input_error.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = ZERO_ARROW_FIXTURES;

// The fixture cache copied into `folder`/cache; returns the copy.
fs::path copy_cache(const fs::path& folder) {
  const fs::path cache = folder / "cache";
  fs::copy(kFixtures / "cache", cache, fs::copy_options::recursive);
  return cache;
}

// The one prepared <hash> folder of `config` in `cache`.
fs::path prepared_folder(const fs::path& cache, const std::string& config) {
  for (const auto& entry : fs::directory_iterator(cache / "tiny_corpus" / config / "0.0.0"))
    if (entry.is_directory()) return entry.path();
  return {};
}

std::vector<std::string> file_names(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const std::string& path : paths) names.push_back(fs::path(path).filename().string());
  return names;
}

TEST(DatasetsCache, FindsTheConfigurationAskedForAndNamesTheOthers) {
  zero::testing::TempFolder folder("datasets_cache_configs");
  const fs::path cache = copy_cache(folder.path());
  EXPECT_EQ(find_prepared_dataset("tiny_corpus", "raw-v1", cache),
            prepared_folder(cache, "raw-v1"));
  EXPECT_EQ(find_prepared_dataset("tiny_corpus", "large", cache), prepared_folder(cache, "large"));
  EXPECT_EQ(find_prepared_dataset("TinyCorpus", "large", cache), prepared_folder(cache, "large"))
      << "datasets' folder is the name in snake case";
  EXPECT_FALSE(find_prepared_dataset("someone/tiny_corpus", "raw-v1", cache))
      << "a namespace is a folder someone___tiny_corpus";
  EXPECT_FALSE(find_prepared_dataset("absent", "", cache));
  const std::string several =
      zero::testing::error_of([&] { find_prepared_dataset("tiny_corpus", "", cache); });
  EXPECT_NE(several.find("several of its configurations (large, raw-v1)"), std::string::npos)
      << several;
  const std::string missing = zero::testing::error_of(
      [&] { find_prepared_dataset("tiny_corpus", "wikitext-103-raw-v1", cache); });
  EXPECT_NE(missing.find("configurations prepared there: large, raw-v1"), std::string::npos)
      << missing;
  EXPECT_NE(missing.find("datasets.load_dataset('tiny_corpus', 'wikitext-103-raw-v1')"),
            std::string::npos)
      << missing;
}

// datasets' _find_hash_in_cache: the most recently modified folder whose dataset_info.json names
// the configuration; one still being written (.incomplete, or no dataset_info.json) is skipped.
TEST(DatasetsCache, TheNewestCompleteFolderOfTheConfigurationWins) {
  zero::testing::TempFolder folder("datasets_cache_newest");
  const fs::path cache = copy_cache(folder.path());
  const fs::path original = prepared_folder(cache, "raw-v1");
  const fs::path versions = original.parent_path();
  const fs::path newer = versions / "1111111111111111";
  fs::copy(original, newer, fs::copy_options::recursive);
  const fs::path incomplete = versions / "2222222222222222.incomplete";
  fs::copy(original, incomplete, fs::copy_options::recursive);
  const fs::path unfinished = versions / "3333333333333333";  // no dataset_info.json yet
  fs::create_directories(unfinished);
  // A folder of another configuration's info in raw-v1's place (not raw-v1's: skipped).
  const fs::path other = versions / "4444444444444444";
  fs::copy(prepared_folder(cache, "large"), other, fs::copy_options::recursive);
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(original, now - std::chrono::hours(2));
  fs::last_write_time(newer, now - std::chrono::hours(1));
  fs::last_write_time(incomplete, now);
  fs::last_write_time(unfinished, now);
  fs::last_write_time(other, now);
  EXPECT_EQ(find_prepared_dataset("tiny_corpus", "raw-v1", cache), newer);
  fs::last_write_time(original, now + std::chrono::hours(1));
  EXPECT_EQ(find_prepared_dataset("tiny_corpus", "raw-v1", cache), original);
}

TEST(DatasetsCache, SplitsAndShardsAsDatasetInfoNamesThem) {
  zero::testing::TempFolder folder("datasets_cache_splits");
  const fs::path cache = copy_cache(folder.path());
  const fs::path raw = prepared_folder(cache, "raw-v1");
  ASSERT_TRUE(is_prepared_dataset(raw));
  const DatasetSplits splits = prepared_dataset_splits("tiny_corpus", raw, "raw-v1");
  EXPECT_EQ(splits.format, "arrow");
  EXPECT_EQ(file_names(splits.train),
            (std::vector<std::string>{"tiny_corpus-train-00000-of-00002.arrow",
                                      "tiny_corpus-train-00001-of-00002.arrow"}));
  EXPECT_EQ(file_names(splits.validation),
            (std::vector<std::string>{"tiny_corpus-validation.arrow"}));
  EXPECT_TRUE(splits.test.empty());
  const DatasetSplits large =
      dataset_splits("tiny_corpus", prepared_folder(cache, "large"), "");  // the folder itself
  EXPECT_EQ(file_names(large.test), (std::vector<std::string>{"tiny_corpus-test.arrow"}));
  const std::string wrong =
      zero::testing::error_of([&] { prepared_dataset_splits("tiny_corpus", raw, "large"); });
  EXPECT_NE(wrong.find("holds configuration raw-v1"), std::string::npos) << wrong;
  fs::remove(raw / "tiny_corpus-train-00001-of-00002.arrow");
  const std::string shard =
      zero::testing::error_of([&] { prepared_dataset_splits("tiny_corpus", raw, "raw-v1"); });
  EXPECT_NE(shard.find("tiny_corpus-train-00001-of-00002.arrow, of split train"), std::string::npos)
      << shard;
}

// The Hub cache's parquet files: refused, with the load_dataset command that keeps the config.
TEST(DatasetsCache, HubParquetIsRefusedWithACommandKeepingTheConfiguration) {
  zero::testing::TempFolder folder("datasets_cache_hub_parquet");
  const fs::path hub = folder.path() / "hub";
  const fs::path repo = hub / "datasets--someone--wiki";
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << std::string(40, 'b');
  const fs::path snapshot = repo / "snapshots" / std::string(40, 'b');
  fs::create_directories(snapshot / "wiki-2-raw-v1");
  std::ofstream(snapshot / "wiki-2-raw-v1" / "train-00000-of-00001.parquet") << "PAR1";
  TrainingArguments arguments;
  arguments.dataset_name = "someone/wiki";
  arguments.dataset_config_name = "wiki-2-raw-v1";
  arguments.cache_dir = "";
  resolve_hub_names(arguments, {{"HF_HUB_CACHE", hub.string()},
                                {"HF_DATASETS_CACHE", (folder.path() / "datasets").string()}});
  EXPECT_EQ(fs::path(arguments.dataset_name), snapshot);
  const std::string message = zero::testing::error_of(
      [&] { dataset_splits(arguments.dataset_name, arguments.dataset_name, "wiki-2-raw-v1"); });
  EXPECT_NE(message.find("--dataset_name someone/wiki: its data files are parquet"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("python -c \"import datasets; datasets.load_dataset('someone/wiki', "
                         "'wiki-2-raw-v1')\""),
            std::string::npos)
      << message;
  const std::string with_cache = zero::testing::error_of([&] {
    dataset_splits(arguments.dataset_name, arguments.dataset_name, "wiki-2-raw-v1", "/c");
  });
  EXPECT_NE(with_cache.find("'wiki-2-raw-v1', cache_dir='/c')"), std::string::npos) << with_cache;
  EXPECT_EQ(load_dataset_command("a", "it's", ""),
            "python -c \"import datasets; datasets.load_dataset('a', 'it\\\\'s')\"");
}

// --dataset_name tiny_corpus --dataset_config_name raw-v1 resolved in HF_DATASETS_CACHE and
// trained on: the prepared folder is preferred to the Hub cache, as datasets reloads offline.
TEST(DatasetsCache, ResolvesThePreparedFolderAndTrains) {
  zero::testing::TempFolder folder("datasets_cache_train");
  const fs::path cache = copy_cache(folder.path());
  TrainingArguments arguments =
      zero::testing::tiny_arguments(folder.path() / "unused.txt", folder.path() / "out");
  arguments.train_files.clear();
  arguments.dataset_name = "tiny_corpus";
  arguments.dataset_config_name = "raw-v1";
  arguments.block_size = 4;
  arguments.max_steps = 2;
  arguments.do_eval = true;
  TrainingArguments by_home = arguments;  // HF_HOME/datasets without HF_DATASETS_CACHE
  fs::create_directories(folder.path() / "home");
  fs::create_directory_symlink(cache, folder.path() / "home" / "datasets");
  resolve_hub_names(by_home, {{"HF_HOME", (folder.path() / "home").string()}});
  EXPECT_EQ(
      fs::path(by_home.dataset_name),
      folder.path() / "home" / "datasets" / fs::relative(prepared_folder(cache, "raw-v1"), cache));
  const std::vector<std::string> lines = resolve_hub_names(
      arguments,
      {{"HF_DATASETS_CACHE", cache.string()}, {"HF_HUB_CACHE", (folder.path() / "hub").string()}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("(prepared by datasets)"), std::string::npos) << lines[0];
  EXPECT_EQ(fs::path(arguments.dataset_name), prepared_folder(cache, "raw-v1"));
  std::unique_ptr<Communicator> local = make_local_communicator();
  const TrainResult result = train(arguments, *local, {.print = false});
  EXPECT_EQ(result.global_step, 2);
  EXPECT_TRUE(result.eval_loss) << "the validation split is evaluated";

  // "large" has train and test only: run_clm holds out --validation_split_percentage of train.
  TrainingArguments held_out =
      zero::testing::tiny_arguments(folder.path() / "unused.txt", folder.path() / "out_large");
  held_out.train_files.clear();
  held_out.dataset_name = "tiny_corpus";
  held_out.dataset_config_name = "large";
  held_out.block_size = 4;
  held_out.max_steps = 1;
  held_out.do_eval = true;
  held_out.validation_split_percentage = 50;
  held_out.cache_dir = cache.string();  // run_clm's --cache_dir: load_dataset's cache_dir
  resolve_hub_names(held_out, {{"HF_DATASETS_CACHE", (folder.path() / "elsewhere").string()}});
  EXPECT_EQ(fs::path(held_out.dataset_name), prepared_folder(cache, "large"));
  const TrainResult large = train(held_out, *local, {.print = false});
  EXPECT_TRUE(large.eval_loss) << "evaluated on the held-out half of train";
  held_out.validation_split_percentage = 0;  // no validation: --do_eval has nothing to evaluate
  held_out.overwrite_output_dir = true;
  const std::string none =
      zero::testing::error_of([&] { train(held_out, *local, {.print = false}); });
  EXPECT_NE(none.find("--do_eval: the validation data holds no block"), std::string::npos) << none;
}

}  // namespace
}  // namespace zero::train
