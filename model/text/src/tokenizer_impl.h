// The tokenizer's shared state: byte and token tables, the merge-rank hash map, the pre-tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "pipeline.h"
#include "pretokenizer.h"
#include "zero/text/tokenizer.h"

namespace zero::text {

// Open-addressing hash map from a pair of ids to (rank, merged id): the BPE inner loop's lookup.
class PairRanks {
 public:
  static constexpr std::uint32_t kNoRank = std::numeric_limits<std::uint32_t>::max();
  struct Merge {
    std::uint32_t rank = kNoRank;
    TokenId merged = 0;
  };

  explicit PairRanks(std::size_t num_merges = 0);
  // Keeps the first (lowest) rank when a pair is inserted twice.
  void insert(TokenId left, TokenId right, Merge merge);
  Merge find(TokenId left, TokenId right) const {
    const std::uint64_t key = pack(left, right);
    std::size_t slot = slot_of(key);
    while (true) {
      const Slot& entry = slots_[slot];
      if (entry.key == key) return entry.merge;
      if (entry.key == kEmpty) return {};
      slot = (slot + 1) & mask_;
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = std::numeric_limits<std::uint64_t>::max();
  struct Slot {
    std::uint64_t key = kEmpty;
    Merge merge;
  };
  static std::uint64_t pack(TokenId left, TokenId right) {
    return (static_cast<std::uint64_t>(left) << 32) | right;
  }
  std::size_t slot_of(std::uint64_t key) const {
    return static_cast<std::size_t>((key * 0x9e3779b97f4a7c15ull) >> shift_) & mask_;
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 0;
};

inline constexpr TokenId kNoToken = std::numeric_limits<TokenId>::max();

struct Tokenizer::Impl {
  explicit Impl(detail::Pipeline pipeline_)
      : pipeline(std::move(pipeline_)), pretokenizer(pipeline.split_patterns) {}

  BpeVocabulary vocabulary;
  detail::Pipeline pipeline;
  // Byte-level: the id of each single byte. SentencePiece-style: the id of each <0xXX> token
  // (kNoToken where the vocabulary lacks it), used only with byte_fallback.
  std::array<TokenId, 256> byte_ids{};
  PairRanks ranks;
  std::unordered_map<std::string, TokenId> ids_by_bytes;  // tokens as in `vocabulary`, no specials
  std::vector<std::pair<std::string, TokenId>> specials;  // longest first
  std::vector<std::string> decoded;     // SentencePiece-style: the text each id decodes to
  std::vector<bool> skipped_on_decode;  // by id: special, left out by SkipSpecialTokens::kYes
  detail::Pretokenizer pretokenizer;
  std::uint64_t fingerprint = 0;
  std::uint64_t instance_id = 0;  // distinguishes tokenizers in the per-thread caches

  // One segment between added tokens; `at_text_start` when it begins the text (Metaspace "first").
  void encode_ordinary(std::string_view text, std::vector<TokenId>& ids, bool at_text_start) const;
  void encode_sentencepiece(std::string_view text, std::vector<TokenId>& ids,
                            bool at_text_start) const;
  void encode_piece_cached(std::string_view piece, std::vector<TokenId>& ids) const;
  void merge_piece(std::string_view piece, std::vector<TokenId>& ids, bool force_heap) const;
  // The symbols merging starts from (at most piece.size()): bytes, or characters with byte
  // fallback and unknown tokens. Returns the count.
  std::size_t initial_symbols(std::string_view piece, TokenId* symbols) const;
  void merge_short(TokenId* symbols, std::size_t count, std::vector<TokenId>& ids) const;
  void merge_heap(const TokenId* symbols, std::size_t count, std::vector<TokenId>& ids) const;
};

// GPT-2's pipeline: byte-level, split by GPT-2's pattern, nothing added, nothing special to decode.
detail::Pipeline gpt2_pipeline();
// Builds the tables; checks the vocabulary (byte-level: all 256 single bytes present), ids
// unique, merges producing known tokens.
std::shared_ptr<const Tokenizer::Impl> build_tokenizer(BpeVocabulary vocabulary,
                                                       detail::Pipeline pipeline);

}  // namespace zero::text
