// Data pipeline: parallel tokenization, token cache (reuse, staleness, corruption), run_clm's
// splits and group_texts, streaming, bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/test_data.h"
#include "zero/core/error.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/progress.h"
#include "zero/text/streaming.h"
#include "zero/text/text_files.h"
#include "zero/text/token_stream.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string synthetic_text(int lines, unsigned seed) {
  static const char* words[] = {"the", "cat",  "sat",  "on",   "a",  "mat",  "and",  "dog",  "ran",
                                "far", "away", "from", "home", "in", "rain", "2024", "naïve"};
  std::mt19937 rng(seed);
  std::string text;
  for (int line = 0; line < lines; ++line) {
    const int length = static_cast<int>(rng() % 12);
    for (int w = 0; w < length; ++w) {
      if (w) text += ' ';
      text += words[rng() % std::size(words)];
    }
    text += rng() % 10 == 0 ? ".\n\n" : ".\n";
  }
  return text;
}

// A small byte-level BPE trained on synthetic text, so these tests need no shared data.
const Tokenizer& small_tokenizer() {
  static const Tokenizer tokenizer = [] {
    BpeTrainer trainer({400, 2, true});
    trainer.add_text(synthetic_text(2000, 1));
    return Tokenizer(trainer.train());
  }();
  return tokenizer;
}

// A tokenizer.json whose template adds <s> (id 256) before each text, as Llama's adds its bos: the
// 256 byte tokens, no merges, <|endoftext|> (257) recognised in the text.
Tokenizer bos_tokenizer(const fs::path& folder) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int byte = 0; byte < 256; ++byte)
    vocab[bytes_to_unicode_string(std::string(1, static_cast<char>(byte)))] = byte;
  const nlohmann::json bos = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  const nlohmann::json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const nlohmann::json document = {
      {"added_tokens",
       {{{"id", 256}, {"content", "<s>"}, {"special", true}},
        {{"id", 257}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {bos, text}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  std::ofstream(folder / "tokenizer.json") << document.dump();
  return Tokenizer::load(folder / "tokenizer.json");
}

class Pipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = testing::scratch_dir("pipeline");
    text_path_ = folder_ / "corpus.txt";
    json_path_ = folder_ / "extra.jsonl";
    write(text_path_, synthetic_text(6000, 2));
    std::string jsonl;
    for (int i = 0; i < 300; ++i)
      jsonl += "{\"text\": \"record " + std::to_string(i) + " says hi<|endoftext|>\"}\n";
    write(json_path_, jsonl);
    files_ = {text_path_, json_path_};
    options_.show_progress = false;
  }
  void TearDown() override { fs::remove_all(folder_); }

  std::vector<std::vector<TokenId>> expected_examples() const {
    std::vector<std::vector<TokenId>> out;
    for (const fs::path& path : files_) {
      const MappedFile file = open_text_file(path);
      for_each_example(file.bytes(), format_of(path), path, [&](std::string_view example) {
        out.push_back(small_tokenizer().encode(example, SpecialTokens::kRecognize));
      });
    }
    return out;
  }

  fs::path folder_, text_path_, json_path_;
  std::vector<fs::path> files_;
  TokenizeOptions options_;
};

TEST_F(Pipeline, ParallelTokenizationEqualsPerExampleEncoding) {
  const auto expected = expected_examples();
  for (int threads : {1, 3}) {
    options_.num_threads = threads;
    const TokenStream stream = tokenize_files(files_, small_tokenizer(), options_);
    ASSERT_EQ(stream.num_examples(), expected.size());
    for (std::size_t e = 0; e < expected.size(); ++e) {
      const auto offsets = stream.example_offsets();
      const auto ids = stream.tokens().subspan(offsets[e], offsets[e + 1] - offsets[e]);
      ASSERT_EQ(std::vector<TokenId>(ids.begin(), ids.end()), expected[e]) << "example " << e;
    }
  }
}

// run_clm --keep_linebreaks False (datasets' text builder: line.rstrip("\n")): the same examples,
// each text line without its break; JSON Lines texts unchanged; another cache file.
TEST_F(Pipeline, KeepLinebreaksFalseStripsEachTextLinesBreak) {
  TokenizeOptions stripped = options_;
  stripped.keep_linebreaks = false;
  const TokenStream kept = tokenize_files(files_, small_tokenizer(), options_);
  const TokenStream lines = tokenize_files(files_, small_tokenizer(), stripped);
  ASSERT_EQ(lines.num_examples(), kept.num_examples());
  EXPECT_LT(lines.tokens().size(), kept.tokens().size());
  std::size_t e = 0;
  for (const fs::path& path : files_) {
    const MappedFile file = open_text_file(path);
    for_each_example(file.bytes(), format_of(path), path, [&](std::string_view example) {
      std::string_view expected = example;
      if (format_of(path) == TextFormat::kLines) {
        ASSERT_TRUE(expected.ends_with("\n"));
        expected.remove_suffix(1);
      }
      const auto offsets = lines.example_offsets();
      const auto ids = lines.tokens().subspan(offsets[e], offsets[e + 1] - offsets[e]);
      ASSERT_EQ(std::vector<TokenId>(ids.begin(), ids.end()),
                small_tokenizer().encode(expected, SpecialTokens::kRecognize))
          << "example " << e;
      EXPECT_EQ(small_tokenizer().decode(ids).find('\n'), std::string::npos);
      ++e;
    });
  }
  const fs::path cache_dir = folder_ / "cache";
  EXPECT_NE(load_token_stream(files_, small_tokenizer(), cache_dir, stripped).cache_path(),
            load_token_stream(files_, small_tokenizer(), cache_dir, options_).cache_path());
  EXPECT_EQ(without_linebreak("a line\n", TextFormat::kLines, true), "a line\n");
  EXPECT_EQ(without_linebreak("a line\n", TextFormat::kJsonLines, false), "a line\n");
}

// run_clm's tokenizer(examples["text"]): each example gets the template's bos; the cache key
// holds which ids were added, so a stream cached without them is never read for one with them,
// and a tokenizer without a template keeps the one key it had.
TEST_F(Pipeline, EachExampleGetsTheTemplatesBosAndTheCacheKeyNamesWhatWasAdded) {
  const Tokenizer tokenizer = bos_tokenizer(folder_);
  TokenizeOptions without_bos = options_;
  without_bos.add_special = AddSpecialTokens::kNo;
  const TokenStream with = tokenize_files(files_, tokenizer, options_);
  const TokenStream without = tokenize_files(files_, tokenizer, without_bos);
  ASSERT_EQ(with.num_examples(), without.num_examples());
  for (std::size_t e = 0; e < with.num_examples(); ++e) {
    const auto offsets = with.example_offsets(), plain = without.example_offsets();
    std::vector<TokenId> expected = {256};
    expected.insert(expected.end(), without.tokens().begin() + plain[e],
                    without.tokens().begin() + plain[e + 1]);
    ASSERT_EQ(std::vector<TokenId>(with.tokens().begin() + offsets[e],
                                   with.tokens().begin() + offsets[e + 1]),
              expected)
        << "example " << e;
  }
  const fs::path cache_dir = folder_ / "cache";
  const TokenStream cached_without = load_token_stream(files_, tokenizer, cache_dir, without_bos);
  const TokenStream cached_with = load_token_stream(files_, tokenizer, cache_dir, options_);
  EXPECT_NE(cached_with.cache_path(), cached_without.cache_path());
  EXPECT_TRUE(std::ranges::equal(cached_with.tokens(), with.tokens()));
  EXPECT_TRUE(std::ranges::equal(cached_without.tokens(), without.tokens()));
  TokenizeOptions nothing_to_add = options_;
  nothing_to_add.add_special = AddSpecialTokens::kNo;
  EXPECT_EQ(load_token_stream(files_, small_tokenizer(), cache_dir, options_).cache_path(),
            load_token_stream(files_, small_tokenizer(), cache_dir, nothing_to_add).cache_path());
}

TEST_F(Pipeline, CacheIsWrittenThenMemoryMapped) {
  const fs::path cache_dir = folder_ / "cache";
  const TokenStream first = load_token_stream(files_, small_tokenizer(), cache_dir, options_);
  ASSERT_FALSE(first.cache_path().empty());
  EXPECT_TRUE(first.memory_mapped());
  const auto written = fs::last_write_time(first.cache_path());
  const TokenStream second = load_token_stream(files_, small_tokenizer(), cache_dir, options_);
  EXPECT_TRUE(second.memory_mapped());
  EXPECT_EQ(second.cache_path(), first.cache_path());
  EXPECT_EQ(fs::last_write_time(second.cache_path()), written);
  const TokenStream fresh = tokenize_files(files_, small_tokenizer(), options_);
  EXPECT_TRUE(std::equal(second.tokens().begin(), second.tokens().end(), fresh.tokens().begin(),
                         fresh.tokens().end()));
  EXPECT_TRUE(std::equal(second.example_offsets().begin(), second.example_offsets().end(),
                         fresh.example_offsets().begin(), fresh.example_offsets().end()));
  // Special tokens as text: other ids, another cache file.
  TokenizeOptions as_text = options_;
  as_text.special = SpecialTokens::kAsText;
  const TokenStream plain = load_token_stream(files_, small_tokenizer(), cache_dir, as_text);
  EXPECT_NE(plain.cache_path(), first.cache_path());
  EXPECT_GT(plain.tokens().size(), first.tokens().size());
  // Other content: another cache file.
  write(text_path_, synthetic_text(100, 3));
  const TokenStream changed = load_token_stream(files_, small_tokenizer(), cache_dir, options_);
  EXPECT_NE(changed.cache_path(), first.cache_path());
  EXPECT_NE(changed.tokens().size(), first.tokens().size());
}

// Ranks that are threads of one process load the same data at once: each writes the cache through
// a temporary of its own, and every one reads back a whole cache (a clean-clone CI run failed on a
// shared temporary: "file shorter than its header").
TEST_F(Pipeline, RanksInOneProcessWriteTheCacheAtOnce) {
  const fs::path cache_dir = folder_ / "cache_threads";
  const TokenStream fresh = tokenize_files(files_, small_tokenizer(), options_);
  for (int round = 0; round < 30; ++round) {
    fs::remove_all(cache_dir);
    std::vector<std::thread> ranks;
    std::vector<std::string> errors(8);
    std::vector<std::size_t> sizes(8);
    for (int rank = 0; rank < 8; ++rank)
      ranks.emplace_back([&, rank] {
        try {
          sizes[rank] =
              load_token_stream(files_, small_tokenizer(), cache_dir, options_).tokens().size();
        } catch (const std::exception& error) {
          errors[rank] = error.what();
        }
      });
    for (std::thread& rank : ranks) rank.join();
    for (int rank = 0; rank < 8; ++rank) {
      EXPECT_EQ(errors[rank], "") << "round " << round << " rank " << rank;
      EXPECT_EQ(sizes[rank], fresh.tokens().size()) << "round " << round << " rank " << rank;
    }
  }
}

TEST_F(Pipeline, StaleOrCorruptCacheIsRebuiltNeverUsed) {
  const fs::path cache_dir = folder_ / "cache";
  const TokenStream fresh = tokenize_files(files_, small_tokenizer(), options_);
  const std::uint64_t content = data_key(files_);
  const TokenCache cache(cache_dir);
  const fs::path path = cache.path_for(content, small_tokenizer().fingerprint());
  const TokenStream wrong({1, 2, 3}, {0, 3});
  auto check_rebuilt = [&](const char* what) {
    std::string why;
    EXPECT_EQ(cache.read(path, content, small_tokenizer().fingerprint(), why), nullptr) << what;
    const TokenStream loaded = load_token_stream(files_, small_tokenizer(), cache_dir, options_);
    EXPECT_TRUE(std::equal(loaded.tokens().begin(), loaded.tokens().end(), fresh.tokens().begin(),
                           fresh.tokens().end()))
        << what;
    EXPECT_NE(cache.read(path, content, small_tokenizer().fingerprint(), why), nullptr) << what;
  };
  // stale: a file at the right name whose header records other content / another tokenizer
  cache.write(path, wrong, content + 1, small_tokenizer().fingerprint());
  check_rebuilt("other content hash");
  cache.write(path, wrong, content, small_tokenizer().fingerprint() + 1);
  check_rebuilt("other tokenizer");
  // corrupt: a flipped payload byte, a truncated file, garbage
  {
    std::fstream stream(path, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(100);
    stream.put('\x5a');
  }
  check_rebuilt("flipped byte");
  fs::resize_file(path, fs::file_size(path) - 8);
  check_rebuilt("truncated");
  write(path, "not a cache at all, just some text that is long enough to hold a header........");
  check_rebuilt("garbage");
  write(path, "tiny");
  check_rebuilt("shorter than a header");
}

TEST_F(Pipeline, UnreadableCacheIsAClearError) {
  const fs::path cache_dir = folder_ / "cache";
  const TokenCache cache(cache_dir);
  const fs::path path = cache.path_for(data_key(files_), small_tokenizer().fingerprint());
  fs::create_directories(path);  // a folder where the cache file should be: exists, unreadable
  try {
    load_token_stream(files_, small_tokenizer(), cache_dir, options_);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(path.string()), std::string::npos) << error.what();
  }
}

TEST(GroupTexts, ConcatenatesEachGroupAndDropsItsRemainder) {
  std::vector<TokenId> tokens(18);
  for (TokenId i = 0; i < tokens.size(); ++i) tokens[i] = i;
  auto stream =
      std::make_shared<const TokenStream>(tokens, std::vector<std::uint64_t>{0, 3, 8, 10, 17, 18});
  const BlockDataset grouped = group_texts(stream, 0, 5, 4, 2);
  ASSERT_EQ(grouped.size(), 4u);  // groups of 8, 9 and 1 tokens
  EXPECT_EQ(grouped.block_start(0), 0u);
  EXPECT_EQ(grouped.block_start(1), 4u);
  EXPECT_EQ(grouped.block_start(2), 8u);
  EXPECT_EQ(grouped.block_start(3), 12u);
  EXPECT_EQ(grouped.block(3)[0], 12u);
  const BlockDataset all = group_texts(stream, 0, 5, 4, 0);
  EXPECT_EQ(all.size(), 4u);
  const BlockDataset tail = group_texts(stream, 1, 5, 5, 0);  // tokens 3..18: 15 → 3 blocks
  ASSERT_EQ(tail.size(), 3u);
  EXPECT_EQ(tail.block_start(0), 3u);
  EXPECT_THROW(tail.block(3), Error);
}

TEST(PercentBoundary, RoundsHalfToEvenLikeDatasets) {
  EXPECT_EQ(percent_boundary(40000, 5), 2000u);
  EXPECT_EQ(percent_boundary(10, 5), 0u);   // 0.5
  EXPECT_EQ(percent_boundary(30, 5), 2u);   // 1.5
  EXPECT_EQ(percent_boundary(50, 5), 2u);   // 2.5
  EXPECT_EQ(percent_boundary(70, 5), 4u);   // 3.5
  EXPECT_EQ(percent_boundary(33, 10), 3u);  // 3.3
  EXPECT_EQ(percent_boundary(37, 10), 4u);  // 3.7
  EXPECT_EQ(percent_boundary(9, 0), 0u);
  EXPECT_EQ(percent_boundary(9, 100), 9u);
  EXPECT_THROW(percent_boundary(9, 101), Error);
}

TEST_F(Pipeline, ValidationIsTheFirstPercentOfTrainExamples) {
  DataArguments arguments;
  arguments.train_files = files_;
  arguments.block_size = 16;
  arguments.validation_split_percentage = 10;
  arguments.tokenize = options_;
  const LmDatasets datasets = load_lm_datasets(small_tokenizer(), arguments);
  auto stream =
      std::make_shared<const TokenStream>(tokenize_files(files_, small_tokenizer(), options_));
  const std::size_t boundary = percent_boundary(stream->num_examples(), 10);
  const BlockDataset validation = group_texts(stream, 0, boundary, 16);
  const BlockDataset train = group_texts(stream, boundary, stream->num_examples(), 16);
  ASSERT_EQ(datasets.validation.size(), validation.size());
  ASSERT_EQ(datasets.train.size(), train.size());
  ASSERT_GT(train.size(), 100u);
  for (std::size_t b : {std::size_t{0}, train.size() / 2, train.size() - 1}) {
    const auto got = datasets.train.block(b), want = train.block(b);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  }
  const auto first = datasets.validation.block(0);
  EXPECT_TRUE(std::equal(first.begin(), first.end(), stream->tokens().begin()));
  // explicit validation file
  arguments.validation_files = {json_path_};
  const LmDatasets explicit_split = load_lm_datasets(small_tokenizer(), arguments);
  EXPECT_GT(explicit_split.validation.size(), 0u);
  EXPECT_GT(explicit_split.train.size(), datasets.train.size());
}

TEST_F(Pipeline, CorpusShorterThanOneBlockNamesTheFile) {
  write(folder_ / "short.txt", "just a few words\n");
  DataArguments arguments;
  arguments.train_files = {folder_ / "short.txt"};
  arguments.block_size = 1024;
  arguments.tokenize = options_;
  try {
    load_lm_datasets(small_tokenizer(), arguments);
    FAIL() << "no error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("short.txt"), std::string::npos) << message;
    EXPECT_NE(message.find("shorter than one block"), std::string::npos) << message;
  }
  arguments.train_files = {folder_ / "nope.txt"};
  EXPECT_THROW(load_lm_datasets(small_tokenizer(), arguments), Error);
}

TEST_F(Pipeline, StreamingGivesTheSameBlocksInOrder) {
  for (const Tokenizer& tokenizer : {small_tokenizer(), bos_tokenizer(folder_)}) {
    auto stream = std::make_shared<const TokenStream>(tokenize_files(files_, tokenizer, options_));
    for (std::size_t group : {std::size_t{1000}, std::size_t{7}, std::size_t{0}}) {
      const BlockDataset blocks = group_texts(stream, 0, stream->num_examples(), 32, group);
      StreamingBlocks streaming(files_, tokenizer, 32, group);
      std::vector<TokenId> block;
      std::size_t count = 0;
      while (streaming.next(block)) {
        ASSERT_LT(count, blocks.size());
        const auto want = blocks.block(count);
        ASSERT_TRUE(std::equal(block.begin(), block.end(), want.begin(), want.end())) << count;
        ++count;
      }
      EXPECT_EQ(count, blocks.size()) << "group " << group;
    }
  }
}

TEST_F(Pipeline, StreamingShardsSplitEachGlobalBatchAndResume) {
  constexpr std::size_t kGlobal = 6;
  StreamingBlocks reference(files_, small_tokenizer(), 32);
  std::vector<std::vector<TokenId>> all;
  for (std::vector<TokenId> block; reference.next(block);) all.push_back(block);
  const std::size_t steps = all.size() / kGlobal;
  for (int world : {1, 2, 3}) {
    std::vector<StreamingShard> shards;
    for (int rank = 0; rank < world; ++rank)
      shards.emplace_back(StreamingBlocks(files_, small_tokenizer(), 32), kGlobal, world, rank);
    for (std::size_t step = 0; step < steps; ++step) {
      std::vector<std::vector<TokenId>> global;
      for (auto& shard : shards) {
        std::vector<std::vector<TokenId>> local;
        ASSERT_TRUE(shard.next(local));
        ASSERT_EQ(local.size(), kGlobal / world);
        global.insert(global.end(), local.begin(), local.end());
      }
      for (std::size_t i = 0; i < kGlobal; ++i) ASSERT_EQ(global[i], all[step * kGlobal + i]);
    }
    std::vector<std::vector<TokenId>> local;
    EXPECT_FALSE(shards[0].next(local));  // the partial last global batch is dropped
  }
  StreamingShard resumed(StreamingBlocks(files_, small_tokenizer(), 32), kGlobal, 2, 1);
  resumed.seek(3);
  std::vector<std::vector<TokenId>> local;
  ASSERT_TRUE(resumed.next(local));
  EXPECT_EQ(local[0], all[3 * kGlobal + 3]);
}

TEST_F(Pipeline, BadJsonLineNamesFileAndLineBeyondTheFirstChunk) {
  std::string jsonl;
  while (jsonl.size() < 3 * (1 << 20)) jsonl += "{\"text\": \"some words to fill a few chunks\"}\n";
  const std::size_t good_lines =
      static_cast<std::size_t>(std::count(jsonl.begin(), jsonl.end(), '\n'));
  jsonl += "{\"txt\": \"oops\"}\n";
  write(json_path_, jsonl);
  const std::string line = json_path_.string() + ":" + std::to_string(good_lines + 1);
  try {
    tokenize_files(files_, small_tokenizer(), options_);
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(line), std::string::npos) << error.what();
  }
  StreamingBlocks streaming({json_path_}, small_tokenizer(), 64);
  std::vector<TokenId> block;
  try {
    while (streaming.next(block)) {
    }
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(line), std::string::npos) << error.what();
  }
}

TEST(Progress, FinalLineHasRateAndDurationFormat) {
  EXPECT_EQ(ProgressBar::format_duration(3.2), "0:03");
  EXPECT_EQ(ProgressBar::format_duration(62), "1:02");
  EXPECT_EQ(ProgressBar::format_duration(3723), "1:02:03");
  EXPECT_EQ(ProgressBar::format_duration(-1), "?");
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("tokenizing x", 2'000'000);
    bar.add(1'000'000);
    bar.add(1'000'000);
  }
  const std::string output = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(output.find("tokenizing x: 2.0 MB in 0:00 ("), std::string::npos) << output;
  EXPECT_NE(output.find("MB/s)"), std::string::npos) << output;
  ::testing::internal::CaptureStderr();
  {
    ProgressBar quiet("quiet", 10, false);
    quiet.add(10);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(WholeCorpus, TinyShakespeareBlocksAndCache) {
  ZERO_REQUIRE_SHARED_DATA("tinyshakespeare/input.txt");
  ZERO_REQUIRE_SHARED_DATA("gpt2/encoder.json");
  const auto data = testing::shared_data_dir();
  const Tokenizer gpt2 = Tokenizer::load(data / "gpt2");
  const auto cache_dir = testing::scratch_dir("whole_corpus");
  DataArguments arguments;
  arguments.train_files = {data / "tinyshakespeare" / "input.txt"};
  arguments.block_size = 1024;
  arguments.cache_dir = cache_dir;
  arguments.tokenize.show_progress = false;
  const LmDatasets first = load_lm_datasets(gpt2, arguments);
  const auto start = std::chrono::steady_clock::now();
  const LmDatasets second = load_lm_datasets(gpt2, arguments);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  ASSERT_EQ(first.train.size(), second.train.size());
  EXPECT_GT(first.train.size(), 250u);  // 338k tokens, 95% of 40000 lines, groups of 1000 lines
  EXPECT_GT(first.validation.size(), 10u);
  const auto a = first.train.block(7), b = second.train.block(7);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  // The first validation block is the first 1024 ids of the file's first lines.
  const MappedFile file(data / "tinyshakespeare" / "input.txt");
  std::vector<TokenId> ids;
  for_each_example(
      file.bytes().substr(0, 20000), TextFormat::kLines, file.path(),
      [&](std::string_view line) { gpt2.encode_append(line, ids, SpecialTokens::kRecognize); });
  const auto v = first.validation.block(0);
  EXPECT_TRUE(std::equal(v.begin(), v.end(), ids.begin()));
  EXPECT_EQ(gpt2.decode(v), gpt2.decode(std::span<const TokenId>(ids).first(1024)));
  fs::remove_all(cache_dir);
}

}  // namespace
}  // namespace zero::text
