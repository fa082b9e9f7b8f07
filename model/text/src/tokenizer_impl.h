// The tokenizer's shared state: byte and token tables, the merge-rank hash map, the pre-tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

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

struct Tokenizer::Impl {
  BpeVocabulary vocabulary;
  std::array<TokenId, 256> byte_ids{};  // id of each single byte
  PairRanks ranks;
  std::unordered_map<std::string, TokenId> ids_by_bytes;
  std::vector<std::pair<std::string, TokenId>> specials;  // longest first
  detail::Pretokenizer pretokenizer;
  std::uint64_t fingerprint = 0;
  std::uint64_t instance_id = 0;  // distinguishes tokenizers in the per-thread caches

  void encode_ordinary(std::string_view text, std::vector<TokenId>& ids) const;
  void merge_piece(std::string_view piece, std::vector<TokenId>& ids, bool force_heap) const;
  void merge_short(std::string_view piece, std::vector<TokenId>& ids) const;
  void merge_heap(std::string_view piece, std::vector<TokenId>& ids) const;
};

}  // namespace zero::text
