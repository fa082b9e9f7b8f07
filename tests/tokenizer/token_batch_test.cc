// encode_batch: the ids and offsets of encoding each text in turn, at every thread count, for
// batch sizes around the block size, with special tokens, empty texts and invalid UTF-8.
#include "zero/text/token_batch.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../common/test_data.h"
#include "zero/core/error.h"
#include "zero/text/bpe_trainer.h"

namespace zero::text {
namespace {

const Tokenizer& tokenizer() {
  static const Tokenizer instance = [] {
    BpeTrainer trainer({400, 2, true});
    for (int i = 0; i < 100; ++i)
      trainer.add_text("the quick brown fox jumps over the lazy dog; naïve café 🙂 " +
                       std::to_string(i) + "\n");
    return Tokenizer(trainer.train());
  }();
  return instance;
}

// `count` texts of random words, some empty, some with <|endoftext|> or a stray byte 0xff.
std::vector<std::string> make_texts(std::size_t count, unsigned seed) {
  static const char* const kWords[] = {"the",   " quick",        " brown", "fox",
                                       " café", "🙂",          "  ",     "\n",
                                       "42",    "<|endoftext|>", "\xff",   " naïve"};
  std::mt19937 random(seed);
  std::vector<std::string> texts(count);
  for (std::string& text : texts) {
    const std::size_t words = random() % 40;  // 1 in 40 empty
    for (std::size_t k = 0; k < words; ++k) text += kWords[random() % std::size(kWords)];
  }
  return texts;
}

TokenBatch one_after_another(const std::vector<std::string>& texts, SpecialTokens special) {
  TokenBatch batch;
  for (const std::string& text : texts) {
    tokenizer().encode_append(text, batch.ids, special);
    batch.offsets.push_back(static_cast<std::int64_t>(batch.ids.size()));
  }
  return batch;
}

class EncodeBatch : public ::testing::TestWithParam<int> {};

TEST_P(EncodeBatch, EqualsEncodingEachTextInTurn) {
  const int threads = GetParam();
  for (std::size_t count : {0, 1, 63, 64, 65, 1000, 4099}) {
    const std::vector<std::string> texts = make_texts(count, static_cast<unsigned>(count));
    const std::vector<std::string_view> views(texts.begin(), texts.end());
    for (SpecialTokens special : {SpecialTokens::kAsText, SpecialTokens::kRecognize}) {
      const TokenBatch expected = one_after_another(texts, special);
      const TokenBatch batch = encode_batch(tokenizer(), views, threads, special);
      ASSERT_EQ(batch.size(), count);
      EXPECT_EQ(batch.offsets, expected.offsets) << count << " texts, " << threads << " threads";
      EXPECT_EQ(batch.ids, expected.ids) << count << " texts, " << threads << " threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, EncodeBatch, ::testing::Values(1, 2, 3, 8));

TEST(EncodeBatchTest, ConcurrentCallsTakeTurnsOnThePool) {
  const std::vector<std::string> texts = make_texts(2000, 7);
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  const TokenBatch expected = one_after_another(texts, SpecialTokens::kAsText);
  std::vector<TokenBatch> results(4);
  std::vector<std::thread> callers;
  for (std::size_t i = 0; i < results.size(); ++i)
    callers.emplace_back([&, i] { results[i] = encode_batch(tokenizer(), views, 3); });
  for (std::thread& caller : callers) caller.join();
  for (const TokenBatch& batch : results) {
    EXPECT_EQ(batch.ids, expected.ids);
    EXPECT_EQ(batch.offsets, expected.offsets);
  }
}

// A child of fork() has none of the pool's workers: it must start its own, not wait for the
// parent's forever (the binding's pool did before; a DataLoader worker would hang).
TEST(EncodeBatchTest, WorksInAForkedChildOfAProcessThatUsedThePool) {
  const std::vector<std::string> texts = make_texts(500, 3);
  const std::vector<std::string_view> views(texts.begin(), texts.end());
  const TokenBatch expected = encode_batch(tokenizer(), views, 3);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(20);  // a hang ends the child with SIGALRM
    const TokenBatch batch = encode_batch(tokenizer(), views, 3);
    ::_exit(batch.ids == expected.ids && batch.offsets == expected.offsets ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child hung (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's batch differs";
  EXPECT_EQ(encode_batch(tokenizer(), views, 3).ids, expected.ids);  // the parent's pool still runs
}

TEST(EncodeBatchTest, RefusesFewerThanOneThread) {
  const std::vector<std::string_view> views{"a"};
  EXPECT_EQ(testing::error_of([&] {
              encode_batch(tokenizer(), views, 0);
            }).rfind("encode_batch: num_threads must be at least 1, got 0", 0),
            0u);
}

}  // namespace
}  // namespace zero::text
