// Hub ids through the local Hugging Face cache (zero/train/hub_cache.h), on a cache laid out in the
// test as huggingface_hub lays it out; where ZERO_PYTHON has huggingface_hub and transformers,
// their own readers (try_to_load_from_cache, scan_cache_dir, AutoConfig.from_pretrained with
// local_files_only) check the same folder; a sharded checkpoint behind blob links loads.
#include "zero/train/hub_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "../common/tiny_gpt2.h"
#include "train_test_util.h"
#include "zero/core/allocator.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/model.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMain = "1111111111111111111111111111111111111111";
constexpr const char* kOld = "2222222222222222222222222222222222222222";

class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = folder_.path() / "hub";
    const fs::path repo = cache_ / "models--openai-community--gpt2";
    for (const char* commit : {kMain, kOld}) {
      fs::create_directories(repo / "snapshots" / commit);
      std::ofstream(repo / "snapshots" / commit / "config.json")
          << R"({"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2,)"
          << R"( "n_positions": 32, "vocab_size": 300, "architectures": ["GPT2LMHeadModel"]})";
    }
    fs::create_directories(repo / "refs");
    std::ofstream(repo / "refs" / "main") << kMain;
    std::ofstream(repo / "refs" / "v1") << kOld;
  }
  std::string error_of(const std::string& name, const std::string& revision) {
    try {
      resolve_hub_folder("model_name_or_path", name, revision, cache_);
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  }
  zero::testing::TempFolder folder_{"hub_cache_test"};
  fs::path cache_;
};

TEST_F(HubCache, ResolvesHubIdsAndRevisions) {
  const fs::path main = cache_ / "models--openai-community--gpt2" / "snapshots" / kMain;
  EXPECT_EQ(resolve_hub_folder("model_name_or_path", "gpt2", "main", cache_), main);
  EXPECT_EQ(resolve_hub_folder("model_name_or_path", "openai-community/gpt2", "", cache_), main);
  const fs::path old = cache_ / "models--openai-community--gpt2" / "snapshots" / kOld;
  EXPECT_EQ(resolve_hub_folder("model_name_or_path", "gpt2", "v1", cache_), old);
  EXPECT_EQ(resolve_hub_folder("model_name_or_path", "gpt2", kOld, cache_), old);
  // A folder stays a folder.
  EXPECT_EQ(resolve_hub_folder("model_name_or_path", main.string(), "main", cache_), main);
}

TEST_F(HubCache, AMissingNameSaysWhereItLookedAndHowToFetchIt) {
  const std::string message = error_of("gpt2-large", "main");
  EXPECT_NE(message.find((cache_ / "models--gpt2-large" / "refs" / "main").string()),
            std::string::npos)
      << message;
  EXPECT_NE(
      message.find((cache_ / "models--openai-community--gpt2-large" / "refs" / "main").string()),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("huggingface-cli download openai-community/gpt2-large"), std::string::npos)
      << message;
  EXPECT_NE(error_of("gpt2", "v9").find("--revision v9"), std::string::npos);
  EXPECT_NE(error_of("../x", "main").find("no such folder"), std::string::npos);
}

TEST(HubCacheFolder, FollowsHuggingFaceHubsOrder) {
  EXPECT_EQ(hub_cache_folder("/c", {{"HF_HUB_CACHE", "/a"}}), fs::path("/c"));
  EXPECT_EQ(hub_cache_folder("", {{"HF_HUB_CACHE", "/a"}, {"HF_HOME", "/h"}}), fs::path("/a"));
  EXPECT_EQ(hub_cache_folder("", {{"HF_HOME", "/h"}}), fs::path("/h/hub"));
  EXPECT_EQ(hub_cache_folder("", {{"HOME", "/home/u"}}),
            fs::path("/home/u/.cache/huggingface/hub"));
  EXPECT_EQ(hub_cache_folder("", {{"XDG_CACHE_HOME", "/x"}, {"HOME", "/home/u"}}),
            fs::path("/x/huggingface/hub"));
}

// datasets' config.py: HF_DATASETS_CACHE, else HF_HOME/datasets, else
// XDG_CACHE_HOME/huggingface/datasets, else ~/.cache/huggingface/datasets; run_clm's --cache_dir
// (load_dataset's cache_dir) first.
TEST(DatasetsCacheFolder, FollowsDatasetsOrderWithCacheDirFirst) {
  const std::map<std::string, std::string> all = {{"HF_DATASETS_CACHE", "/d"},
                                                  {"HF_HUB_CACHE", "/a"},
                                                  {"HF_HOME", "/h"},
                                                  {"XDG_CACHE_HOME", "/x"},
                                                  {"HOME", "/home/u"}};
  EXPECT_EQ(datasets_cache_folder("/c", all), fs::path("/c"));
  EXPECT_EQ(datasets_cache_folder("", all), fs::path("/d"));
  EXPECT_EQ(datasets_cache_folder("", {{"HF_HUB_CACHE", "/a"}, {"HF_HOME", "/h"}}),
            fs::path("/h/datasets"));
  EXPECT_EQ(datasets_cache_folder("", {{"XDG_CACHE_HOME", "/x"}, {"HOME", "/home/u"}}),
            fs::path("/x/huggingface/datasets"));
  EXPECT_EQ(datasets_cache_folder("", {{"HOME", "/home/u"}}),
            fs::path("/home/u/.cache/huggingface/datasets"));
  const fs::path without_home = datasets_cache_folder("", {});
  EXPECT_TRUE(without_home.is_absolute()) << without_home << ": ~ from the password database";
  EXPECT_EQ(without_home.filename(), "datasets");
}

TEST_F(HubCache, ArgumentsResolveInPlace) {
  TrainingArguments arguments;
  arguments.model_name_or_path = "gpt2";
  arguments.model_revision = "v1";
  const std::vector<std::string> lines = resolve_hub_names(arguments, {{"HF_HUB_CACHE", cache_}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(fs::path(arguments.model_name_or_path).filename(), kOld);
  EXPECT_EQ(lines[0].rfind("--model_name_or_path gpt2: ", 0), 0u) << lines[0];
}

// huggingface_hub's and transformers' own readers find the files in the same layout.
TEST_F(HubCache, HuggingFacesReadersAgree) {
  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr) GTEST_SKIP() << "ZERO_PYTHON unset";
  const fs::path script = folder_.path() / "check.py";
  std::ofstream(script)
      << "import sys\n"
      << "try:\n"
      << "    from huggingface_hub import try_to_load_from_cache, scan_cache_dir\n"
      << "    from transformers import AutoConfig\n"
      << "except Exception:\n"
      << "    sys.exit(3)\n"
      << "cache = sys.argv[1]\n"
      << "print(try_to_load_from_cache('openai-community/gpt2', 'config.json', cache_dir=cache))\n"
      << "print(try_to_load_from_cache('openai-community/gpt2', 'config.json', cache_dir=cache,"
      << " revision='v1'))\n"
      << "print(sorted(r.repo_id for r in scan_cache_dir(cache).repos))\n"
      << "print(AutoConfig.from_pretrained('openai-community/gpt2', cache_dir=cache,"
      << " local_files_only=True).n_embd)\n";
  const fs::path out = folder_.path() / "out.txt";
  const int status = std::system((std::string(python) + " " + script.string() + " " +
                                  cache_.string() + " > " + out.string() + " 2>&1")
                                     .c_str());
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "no huggingface_hub/transformers";
  ASSERT_EQ(status, 0);
  std::ifstream in(out);
  std::string by_hub_main, by_hub_v1, repos, n_embd;
  std::getline(in, by_hub_main);
  std::getline(in, by_hub_v1);
  std::getline(in, repos);
  std::getline(in, n_embd);
  EXPECT_EQ(fs::path(by_hub_main).parent_path(),
            resolve_hub_folder("model_name_or_path", "gpt2", "main", cache_));
  EXPECT_EQ(fs::path(by_hub_v1).parent_path(),
            resolve_hub_folder("model_name_or_path", "gpt2", "v1", cache_));
  EXPECT_EQ(repos, "['openai-community/gpt2']");
  EXPECT_EQ(n_embd, "32");
}

// A sharded checkpoint as huggingface_hub stores it: the files in blobs/, the snapshot's names
// relative symlinks to them. "gpt2" resolves to the snapshot, its model.safetensors.index.json
// loads bit for bit as the model saved; transformers' from_pretrained(local_files_only=True) loads
// the same folder where it is importable.
TEST_F(HubCache, AShardedCheckpointBehindBlobLinksLoads) {
  const gpt2::GPT2Config config = gpt2::tiny_config(
      {.vocab_size = 250, .n_positions = 32, .n_embd = 64, .n_layer = 3, .n_head = 4});
  MemoryLedger ledger;
  HostAllocator allocator(ledger);
  gpt2::GPT2Model model(config, allocator);
  model.init(5);
  const fs::path saved = folder_.path() / "saved";
  gpt2::save_hf_checkpoint(model, saved, {.max_shard_bytes = 200'000});
  ASSERT_TRUE(fs::exists(saved / "model.safetensors.index.json"));
  const fs::path repo = cache_ / "models--openai-community--gpt2";
  const fs::path snapshot = repo / "snapshots" / kMain;
  fs::remove_all(snapshot);
  fs::create_directories(snapshot);
  fs::create_directories(repo / "blobs");
  int files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(saved)) {
    const std::string blob = "blob" + std::to_string(files++);
    fs::rename(entry.path(), repo / "blobs" / blob);
    fs::create_symlink(fs::path("../../blobs") / blob, snapshot / entry.path().filename());
  }
  EXPECT_GE(files, 4) << "config, index and at least two shards";
  const fs::path resolved = resolve_hub_folder("model_name_or_path", "gpt2", "main", cache_);
  EXPECT_EQ(resolved, snapshot);
  const gpt2::GPT2Model loaded = gpt2::load_hf_model(resolved, allocator);
  ASSERT_EQ(loaded.num_units(), model.num_units());
  for (int u = 0; u < model.num_units(); ++u)
    EXPECT_EQ(
        std::memcmp(loaded.params(u).data(), model.params(u).data(), model.params(u).size_bytes()),
        0)
        << "unit " << u;

  const char* python = std::getenv("ZERO_PYTHON");
  if (python == nullptr) GTEST_SKIP() << "ZERO_PYTHON unset";
  const fs::path script = folder_.path() / "load.py";
  std::ofstream(script) << "import sys\n"
                        << "try:\n"
                        << "    from transformers import GPT2LMHeadModel\n"
                        << "except Exception:\n"
                        << "    sys.exit(3)\n"
                        << "m = GPT2LMHeadModel.from_pretrained('openai-community/gpt2', "
                        << "cache_dir=sys.argv[1], local_files_only=True)\n"
                        << "print(sum(p.numel() for p in m.parameters()))\n";
  const fs::path out = folder_.path() / "load.txt";
  const int status =
      std::system((std::string(python) + " " + script.string() + " " + cache_.string() + " > " +
                   out.string() + " 2> " + out.string() + ".err")
                      .c_str());
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "no transformers";
  ASSERT_EQ(status, 0) << std::ifstream(out.string() + ".err").rdbuf();
  std::int64_t parameters = 0;
  std::ifstream(out) >> parameters;
  EXPECT_EQ(parameters, config.num_parameters());
}

}  // namespace
}  // namespace zero::train
