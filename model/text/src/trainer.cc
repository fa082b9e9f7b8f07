// BPE training: word counts from the GPT-2 pre-tokenizer, then merges by pair frequency with
// incremental pair counts and a lazily updated max-heap.
#include <algorithm>
#include <array>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "pretokenizer.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/text_files.h"

namespace zero::text {

struct BpeTrainer::State {
  detail::Pretokenizer pretokenizer;
  std::unordered_map<std::string, std::uint64_t> word_counts;
};

BpeTrainer::BpeTrainer(BpeTrainerOptions options)
    : options_(options), state_(std::make_unique<State>()) {}
BpeTrainer::~BpeTrainer() = default;
BpeTrainer::BpeTrainer(BpeTrainer&&) noexcept = default;
BpeTrainer& BpeTrainer::operator=(BpeTrainer&&) noexcept = default;

void BpeTrainer::add_text(std::string_view text) {
  std::string storage;
  const std::string_view valid = replace_invalid_utf8(text, storage);
  state_->pretokenizer.split(
      valid, [&](std::string_view piece) { ++state_->word_counts[std::string(piece)]; });
}

void BpeTrainer::add_files(std::span<const std::filesystem::path> files) {
  for (const auto& path : files) {
    const MappedFile file = open_text_file(path);
    for_each_example(file.bytes(), format_of(path), path,
                     [&](std::string_view example) { add_text(example); });
  }
}

std::size_t BpeTrainer::num_distinct_words() const { return state_->word_counts.size(); }

namespace {

using PairKey = std::uint64_t;
PairKey pack(TokenId left, TokenId right) { return (static_cast<PairKey>(left) << 32) | right; }
TokenId left_of(PairKey key) { return static_cast<TokenId>(key >> 32); }
TokenId right_of(PairKey key) { return static_cast<TokenId>(key & 0xFFFFFFFF); }

struct HeapEntry {
  std::uint64_t count;
  PairKey pair;
  bool operator<(const HeapEntry& other) const {  // max count first, then the smaller pair
    return count != other.count ? count < other.count : pair > other.pair;
  }
};

}  // namespace

BpeVocabulary BpeTrainer::train() const {
  const std::size_t reserved = 256 + (options_.add_end_of_text ? 1 : 0);
  ZERO_CHECK(options_.vocab_size >= reserved, "vocab_size ", options_.vocab_size,
             " is too small: a byte-level BPE needs at least ", reserved, " tokens");
  BpeVocabulary vocabulary;
  std::array<TokenId, 256> byte_ids{};
  {  // GPT-2's order: the bytes that stand for themselves first, then the rest.
    std::vector<int> order;
    for (int byte = 0; byte < 256; ++byte)
      if (byte_to_unicode(static_cast<std::uint8_t>(byte)) == static_cast<char32_t>(byte))
        order.push_back(byte);
    for (int byte = 0; byte < 256; ++byte)
      if (byte_to_unicode(static_cast<std::uint8_t>(byte)) != static_cast<char32_t>(byte))
        order.push_back(byte);
    for (int byte : order) {
      byte_ids[byte] = static_cast<TokenId>(vocabulary.tokens.size());
      vocabulary.tokens.emplace_back(1, static_cast<char>(byte));
    }
  }
  // Words in a fixed order (sorted) so training does not depend on hash-map iteration.
  std::vector<std::pair<std::string, std::uint64_t>> sorted(state_->word_counts.begin(),
                                                            state_->word_counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<TokenId>> words(sorted.size());
  std::vector<std::uint64_t> counts(sorted.size());
  std::unordered_map<PairKey, std::uint64_t> pair_counts;
  std::unordered_map<PairKey, std::vector<std::uint32_t>> where;
  for (std::size_t w = 0; w < sorted.size(); ++w) {
    counts[w] = sorted[w].second;
    for (unsigned char byte : sorted[w].first) words[w].push_back(byte_ids[byte]);
    for (std::size_t i = 0; i + 1 < words[w].size(); ++i) {
      const PairKey pair = pack(words[w][i], words[w][i + 1]);
      pair_counts[pair] += counts[w];
      auto& list = where[pair];
      if (list.empty() || list.back() != w) list.push_back(static_cast<std::uint32_t>(w));
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [pair, count] : pair_counts) heap.push({count, pair});

  const std::size_t max_tokens = options_.vocab_size - (options_.add_end_of_text ? 1 : 0);
  std::unordered_map<std::string, TokenId> token_ids;
  for (TokenId id = 0; id < vocabulary.tokens.size(); ++id) token_ids[vocabulary.tokens[id]] = id;
  std::vector<std::uint32_t> seen(words.size(), 0);
  std::uint32_t stamp = 0;
  while (vocabulary.tokens.size() < max_tokens && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    const auto it = pair_counts.find(top.pair);
    const std::uint64_t current = it == pair_counts.end() ? 0 : it->second;
    if (current != top.count) {
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    if (current < std::max<std::uint64_t>(options_.min_frequency, 1)) break;
    const TokenId left = left_of(top.pair), right = right_of(top.pair);
    // Two merges can spell the same bytes ("ab"+"c", "a"+"bc"): they share one id.
    std::string bytes = vocabulary.tokens[left] + vocabulary.tokens[right];
    const auto [found, is_new] =
        token_ids.emplace(std::move(bytes), static_cast<TokenId>(vocabulary.tokens.size()));
    const TokenId merged = found->second;
    if (is_new) vocabulary.tokens.push_back(found->first);
    vocabulary.merges.emplace_back(left, right);
    std::unordered_set<PairKey> increased;
    auto add = [&](PairKey pair, std::int64_t delta, std::uint32_t w) {
      pair_counts[pair] += static_cast<std::uint64_t>(delta);
      if (delta > 0) {
        increased.insert(pair);
        auto& list = where[pair];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    };
    ++stamp;
    const std::vector<std::uint32_t> occurrences = std::move(where[top.pair]);
    where.erase(top.pair);
    for (std::uint32_t w : occurrences) {
      if (seen[w] == stamp) continue;
      seen[w] = stamp;
      std::vector<TokenId>& word = words[w];
      const auto count = static_cast<std::int64_t>(counts[w]);
      for (std::size_t i = 0; i + 1 < word.size(); ++i) {
        if (word[i] != left || word[i + 1] != right) continue;
        if (i > 0) {
          add(pack(word[i - 1], left), -count, w);
          add(pack(word[i - 1], merged), count, w);
        }
        if (i + 2 < word.size()) {
          add(pack(right, word[i + 2]), -count, w);
          add(pack(merged, word[i + 2]), count, w);
        }
        add(top.pair, -count, w);
        word[i] = merged;
        word.erase(word.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
    pair_counts.erase(top.pair);
    for (PairKey pair : increased) heap.push({pair_counts[pair], pair});
  }
  if (options_.add_end_of_text) {
    vocabulary.special_ids.push_back(static_cast<TokenId>(vocabulary.tokens.size()));
    vocabulary.tokens.emplace_back("<|endoftext|>");
  }
  if (vocabulary.tokens.size() < options_.vocab_size)
    log_info("tokenizer training stopped at ", vocabulary.tokens.size(), " tokens (of ",
             options_.vocab_size, "): no pair occurs ", options_.min_frequency, " times or more");
  return vocabulary;
}

}  // namespace zero::text
