// --dataset_name (zero/train/dataset_folder.h, hub_cache.h): a folder of data files split as
// datasets' load_dataset(folder) splits it, a dataset in the Hub cache, the formats refused with
// the export one-liner, --dataset_config_name's subfolder, and a run that trains on a folder.
// (The datasets cache's Arrow files: tests/datasets.)
#include "zero/train/dataset_folder.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/train/hub_cache.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& path, const std::string& text = "one line\n") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::vector<std::string> names(const std::vector<std::string>& paths, const fs::path& root) {
  std::vector<std::string> out;
  for (const std::string& path : paths) out.push_back(fs::relative(path, root).generic_string());
  return out;
}

std::string error_of(const fs::path& folder, const std::string& config = "") {
  try {
    dataset_splits("my/dataset", folder, config);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(DatasetFolder, SplitsByFileNameAsLoadDatasetDoes) {
  zero::testing::TempFolder folder("dataset_names");
  const fs::path root = folder.path();
  touch(root / "train.txt");
  touch(root / "my_valid-1.txt");
  touch(root / "test" / "part0.txt");
  touch(root / "README.md", "# card\n");
  touch(root / ".hidden" / "train.txt");
  touch(root / "trainer_notes.txt");  // "trainer" is not the keyword "train": in no split
  const DatasetSplits splits = dataset_splits("local", root, "");
  EXPECT_EQ(splits.format, "text");
  EXPECT_EQ(names(splits.train, root), (std::vector<std::string>{"train.txt"}));
  EXPECT_EQ(names(splits.validation, root), (std::vector<std::string>{"my_valid-1.txt"}));
  EXPECT_EQ(names(splits.test, root), (std::vector<std::string>{"test/part0.txt"}));
}

TEST(DatasetFolder, HubLayoutAndTheMostCommonFormat) {
  zero::testing::TempFolder folder("dataset_hub_layout");
  const fs::path root = folder.path();
  touch(root / "data" / "train-00000-of-00002.jsonl", "{\"text\": \"a\"}\n");
  touch(root / "data" / "train-00001-of-00002.jsonl", "{\"text\": \"b\"}\n");
  touch(root / "data" / "validation-00000-of-00001.json", "{\"text\": \"c\"}\n");
  touch(root / "data" / "extra.csv", "text\nd\n");  // another builder's file: left out
  const DatasetSplits splits = dataset_splits("hub", root, "");
  EXPECT_EQ(splits.format, "json");
  EXPECT_EQ(names(splits.train, root),
            (std::vector<std::string>{"data/train-00000-of-00002.jsonl",
                                      "data/train-00001-of-00002.jsonl"}));
  EXPECT_EQ(names(splits.validation, root),
            (std::vector<std::string>{"data/validation-00000-of-00001.json"}));
  zero::testing::TempFolder plain("dataset_plain");
  touch(plain.path() / "a.csv", "text\nx\n");
  touch(plain.path() / "b.csv", "text\ny\n");
  const DatasetSplits all = dataset_splits("plain", plain.path(), "");
  EXPECT_EQ(all.format, "csv");
  EXPECT_EQ(names(all.train, plain.path()), (std::vector<std::string>{"a.csv", "b.csv"}))
      << "no split keyword anywhere: every file trains";
}

TEST(DatasetFolder, RefusesParquetAndMissingThings) {
  zero::testing::TempFolder folder("dataset_refused");
  touch(folder.path() / "data" / "train-00000-of-00001.parquet", "PAR1");
  const std::string parquet = error_of(folder.path());
  EXPECT_NE(parquet.find("its data files are parquet"), std::string::npos) << parquet;
  EXPECT_NE(parquet.find("from datasets import load_dataset"), std::string::npos) << parquet;
  EXPECT_NE(parquet.find(".to_json("), std::string::npos) << parquet;
  zero::testing::TempFolder arrow("dataset_arrow");  // read as datasets' arrow builder reads it
  touch(arrow.path() / "train" / "data-00000-of-00001.arrow", "x");
  EXPECT_EQ(dataset_splits("saved", arrow.path(), "").format, "arrow");
  zero::testing::TempFolder empty("dataset_empty");
  touch(empty.path() / "README.md");
  EXPECT_NE(error_of(empty.path()).find("holds no data file"), std::string::npos);
  // --dataset_config_name: the subfolder of that name (a Hub dataset's configs).
  touch(empty.path() / "wikitext-2-raw-v1" / "train.txt");
  EXPECT_EQ(dataset_splits("wikitext", empty.path(), "wikitext-2-raw-v1").train.size(), 1u);
  const std::string config = error_of(empty.path(), "wikitext-103-raw-v1");
  EXPECT_NE(config.find("no such configuration"), std::string::npos) << config;
  EXPECT_NE(config.find("wikitext-2-raw-v1"), std::string::npos) << "names the ones there";
}

// A dataset in the Hub cache as huggingface_hub lays it out, then a run on it.
TEST(DatasetFolder, ResolvesFromTheHubCacheAndTrains) {
  zero::testing::TempFolder folder("dataset_cache");
  const fs::path cache = folder.path() / "hub";
  const std::string commit(40, 'a');
  const fs::path repo = cache / "datasets--someone--tiny_corpus";
  fs::create_directories(repo / "refs");
  std::ofstream(repo / "refs" / "main") << commit;
  const fs::path snapshot = repo / "snapshots" / commit;
  fs::create_directories(snapshot);
  zero::testing::write_corpus(snapshot / "train.txt", 400);
  zero::testing::write_corpus(snapshot / "validation.txt", 60, 2);
  TrainingArguments arguments =
      zero::testing::tiny_arguments(snapshot / "unused.txt", folder.path() / "out");
  arguments.train_files.clear();
  arguments.dataset_name = "someone/tiny_corpus";
  arguments.do_eval = true;
  arguments.max_steps = 2;
  const std::vector<std::string> lines =
      resolve_hub_names(arguments, {{"HF_HUB_CACHE", cache.string()}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(fs::path(arguments.dataset_name), snapshot);
  std::unique_ptr<Communicator> local = make_local_communicator();
  const TrainResult result = train(arguments, *local, {.print = false});
  EXPECT_EQ(result.global_step, 2);
  ASSERT_TRUE(result.eval_loss) << "validation.txt is the validation split";

  TrainingArguments missing;
  missing.dataset_name = "someone/absent";
  try {
    resolve_hub_names(missing, {{"HF_HUB_CACHE", cache.string()}});
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("datasets--someone--absent"), std::string::npos) << message;
    EXPECT_NE(message.find("datasets.load_dataset('someone/absent')"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace zero::train
