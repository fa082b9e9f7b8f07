// Byte-pair merging by rank (short pieces: linear scan; long pieces: a heap) and the piece cache.
#include <algorithm>
#include <bit>
#include <queue>

#include "hash.h"
#include "tokenizer_impl.h"
#include "unicode_normalizer.h"
#include "utf8.h"
#include "zero/core/error.h"

namespace zero::text {

PairRanks::PairRanks(std::size_t num_merges) {
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, num_merges * 2));
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
}

void PairRanks::insert(TokenId left, TokenId right, Merge merge) {
  const std::uint64_t key = pack(left, right);
  std::size_t slot = slot_of(key);
  while (slots_[slot].key != kEmpty && slots_[slot].key != key) slot = (slot + 1) & mask_;
  if (slots_[slot].key == key) return;
  slots_[slot] = Slot{key, merge};
}

namespace {

// Pieces up to this many bytes merge by the quadratic scan (faster for words); longer ones by the
// heap, so a megabyte without a space costs O(n log n).
constexpr std::size_t kShortPieceBytes = 96;
// Pieces longer than this are not cached (they rarely repeat and would bloat the cache).
constexpr std::size_t kMaxCachedPieceBytes = 128;

// Per-thread cache of piece -> ids, an open-addressing table over two arenas. Cleared when full
// or when another tokenizer uses the thread.
class PieceCache {
 public:
  bool find(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
            std::vector<TokenId>& ids) {
    if (owner != owner_ || slots_.empty()) return false;
    std::size_t slot = hash & mask_;
    while (slots_[slot].length_bytes != kEmpty) {
      const Slot& entry = slots_[slot];
      if (entry.hash == hash && entry.length_bytes == piece.size() &&
          std::string_view(keys_.data() + entry.key_offset, entry.length_bytes) == piece) {
        ids.insert(ids.end(), ids_.begin() + entry.ids_offset,
                   ids_.begin() + entry.ids_offset + entry.num_ids);
        return true;
      }
      slot = (slot + 1) & mask_;
    }
    return false;
  }

  void insert(std::uint64_t owner, std::string_view piece, std::uint64_t hash,
              std::span<const TokenId> ids) {
    if (owner != owner_ || num_entries_ >= Tokenizer::kCacheMaxEntries) reset(owner);
    if ((num_entries_ + 1) * 2 > slots_.size()) grow();
    std::size_t slot = hash & mask_;
    while (slots_[slot].length_bytes != kEmpty) slot = (slot + 1) & mask_;
    slots_[slot] = Slot{
        hash, static_cast<std::uint32_t>(keys_.size()), static_cast<std::uint32_t>(piece.size()),
        static_cast<std::uint32_t>(ids_.size()), static_cast<std::uint32_t>(ids.size())};
    keys_.append(piece);
    ids_.insert(ids_.end(), ids.begin(), ids.end());
    ++num_entries_;
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFF;
  struct Slot {
    std::uint64_t hash = 0;
    std::uint32_t key_offset = 0;
    std::uint32_t length_bytes = kEmpty;
    std::uint32_t ids_offset = 0;
    std::uint32_t num_ids = 0;
  };
  void reset(std::uint64_t owner) {
    owner_ = owner;
    slots_.assign(kInitialSlots, Slot{});
    mask_ = slots_.size() - 1;
    keys_.clear();
    ids_.clear();
    num_entries_ = 0;
  }
  static constexpr std::size_t kInitialSlots = 4096;
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& entry : old) {
      if (entry.length_bytes == kEmpty) continue;
      std::size_t slot = entry.hash & mask_;
      while (slots_[slot].length_bytes != kEmpty) slot = (slot + 1) & mask_;
      slots_[slot] = entry;
    }
  }
  std::uint64_t owner_ = 0;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::string keys_;
  std::vector<TokenId> ids_;
  std::size_t num_entries_ = 0;
};

PieceCache& thread_piece_cache() {
  thread_local PieceCache cache;
  return cache;
}

}  // namespace

void Tokenizer::Impl::merge_piece(std::string_view piece, std::vector<TokenId>& ids,
                                  bool force_heap) const {
  if (piece.empty()) return;
  if (pipeline.ignore_merges) {
    const auto it = ids_by_bytes.find(std::string(piece));
    if (it != ids_by_bytes.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  if (!force_heap && piece.size() <= kShortPieceBytes) {
    TokenId symbols[kShortPieceBytes];
    merge_short(symbols, initial_symbols(piece, symbols), ids);
  } else {
    std::vector<TokenId> symbols(piece.size());
    merge_heap(symbols.data(), initial_symbols(piece, symbols.data()), ids);
  }
}

// Byte-level: one symbol per byte. SentencePiece-style, as Hugging Face's BPE::merge_word: one per
// character in the vocabulary; else its <0xXX> tokens (byte_fallback, when all exist); else the
// unknown token, consecutive ones fused into one with fuse_unk (none without an unk_token).
std::size_t Tokenizer::Impl::initial_symbols(std::string_view piece, TokenId* symbols) const {
  if (pipeline.kind == detail::ModelKind::kByteLevel) {
    for (std::size_t i = 0; i < piece.size(); ++i)
      symbols[i] = byte_ids[static_cast<unsigned char>(piece[i])];
    return piece.size();
  }
  std::size_t count = 0;
  bool pending_unknown = false;
  std::string character;
  for (std::size_t at = 0; at < piece.size();) {
    const std::size_t length = std::max<std::size_t>(1, detail::valid_sequence_length(piece, at));
    character.assign(piece.substr(at, length));
    at += length;
    if (const auto it = ids_by_bytes.find(character); it != ids_by_bytes.end()) {
      if (pending_unknown) symbols[count++] = *pipeline.unknown_id;
      pending_unknown = false;
      symbols[count++] = it->second;
      continue;
    }
    if (pipeline.byte_fallback && std::all_of(character.begin(), character.end(), [&](char byte) {
          return byte_ids[static_cast<unsigned char>(byte)] != kNoToken;
        })) {
      for (char byte : character) symbols[count++] = byte_ids[static_cast<unsigned char>(byte)];
      continue;
    }
    if (!pipeline.unknown_id) continue;
    if (pending_unknown && !pipeline.fuse_unknown) symbols[count++] = *pipeline.unknown_id;
    pending_unknown = true;
  }
  if (pending_unknown) symbols[count++] = *pipeline.unknown_id;
  return count;
}

// tiktoken's loop: ranks of adjacent pairs in an array; merge the lowest (leftmost on ties),
// update its two neighbours' ranks, repeat. O(n^2) but tight for word-sized n.
void Tokenizer::Impl::merge_short(TokenId* symbols, std::size_t count,
                                  std::vector<TokenId>& ids) const {
  std::uint32_t pair_ranks[kShortPieceBytes];
  TokenId merged_ids[kShortPieceBytes];
  for (std::size_t i = 0; i + 1 < count; ++i) {
    const PairRanks::Merge merge = ranks.find(symbols[i], symbols[i + 1]);
    pair_ranks[i] = merge.rank;
    merged_ids[i] = merge.merged;
  }
  while (count > 1) {
    std::uint32_t best_rank = PairRanks::kNoRank;
    std::size_t best = 0;
    for (std::size_t i = 0; i + 1 < count; ++i) {
      if (pair_ranks[i] < best_rank) {
        best_rank = pair_ranks[i];
        best = i;
      }
    }
    if (best_rank == PairRanks::kNoRank) break;
    symbols[best] = merged_ids[best];
    for (std::size_t i = best + 1; i + 1 < count; ++i) {
      symbols[i] = symbols[i + 1];
      if (i + 2 < count) {
        pair_ranks[i] = pair_ranks[i + 1];
        merged_ids[i] = merged_ids[i + 1];
      }
    }
    --count;
    if (best + 1 < count) {
      const PairRanks::Merge merge = ranks.find(symbols[best], symbols[best + 1]);
      pair_ranks[best] = merge.rank;
      merged_ids[best] = merge.merged;
    }
    if (best > 0) {
      const PairRanks::Merge merge = ranks.find(symbols[best - 1], symbols[best]);
      pair_ranks[best - 1] = merge.rank;
      merged_ids[best - 1] = merge.merged;
    }
  }
  ids.insert(ids.end(), symbols, symbols + count);
}

// Hugging Face's word merge: a doubly linked list of symbols and a min-heap of (rank, position);
// stale heap entries are skipped by re-checking the pair's rank. Same result as merge_short.
void Tokenizer::Impl::merge_heap(const TokenId* initial, std::size_t n,
                                 std::vector<TokenId>& ids) const {
  struct Symbol {
    TokenId id;
    std::int64_t prev, next;
    bool alive;
  };
  struct Candidate {
    std::uint32_t rank;
    std::size_t position;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  if (n == 0) return;
  std::vector<Symbol> symbols(n);
  for (std::size_t i = 0; i < n; ++i)
    symbols[i] = Symbol{initial[i], static_cast<std::int64_t>(i) - 1,
                        i + 1 < n ? static_cast<std::int64_t>(i + 1) : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const PairRanks::Merge merge = ranks.find(symbols[i].id, symbols[i + 1].id);
    if (merge.rank != PairRanks::kNoRank) heap.push({merge.rank, i});
  }
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = symbols[top.position];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const PairRanks::Merge merge = ranks.find(left.id, right.id);
    if (merge.rank != top.rank) continue;
    left.id = merge.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.position;
    if (left.prev >= 0) {
      const auto prev = static_cast<std::size_t>(left.prev);
      const PairRanks::Merge before = ranks.find(symbols[prev].id, left.id);
      if (before.rank != PairRanks::kNoRank) heap.push({before.rank, prev});
    }
    if (left.next >= 0) {
      const PairRanks::Merge after =
          ranks.find(left.id, symbols[static_cast<std::size_t>(left.next)].id);
      if (after.rank != PairRanks::kNoRank) heap.push({after.rank, top.position});
    }
  }
  for (std::int64_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next)
    ids.push_back(symbols[static_cast<std::size_t>(i)].id);
}

void Tokenizer::Impl::encode_piece_cached(std::string_view piece, std::vector<TokenId>& ids) const {
  if (piece.size() > kMaxCachedPieceBytes) {
    merge_piece(piece, ids, false);
    return;
  }
  PieceCache& cache = thread_piece_cache();
  const std::uint64_t hash = detail::hash_string(piece);
  if (cache.find(instance_id, piece, hash, ids)) return;
  const std::size_t first = ids.size();
  merge_piece(piece, ids, false);
  cache.insert(instance_id, piece, hash, std::span<const TokenId>(ids).subspan(first));
}

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<TokenId>& ids,
                                      bool at_text_start) const {
  std::string storage;
  std::string_view valid = replace_invalid_utf8(text, storage);
  std::string composed;
  if (pipeline.normalizer_nfc && !detail::below_combining_marks(valid)) {
    composed = detail::to_nfc(valid);
    valid = composed;
  }
  if (pipeline.kind == detail::ModelKind::kSentencePiece) {
    encode_sentencepiece(valid, ids, at_text_start);
    return;
  }
  pretokenizer.split(valid, [&](std::string_view piece) {
    if (piece.size() == 1)
      ids.push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
    else
      encode_piece_cached(piece, ids);
  });
}

// Hugging Face's order for one segment: the normalizer (Prepend "▁" to a non-empty segment,
// Replace " " by "▁"), or the Metaspace pre-tokenizer (replace, prepend per its scheme when the
// segment does not start with "▁", and with split cut before each "▁"); then the model per piece.
void Tokenizer::Impl::encode_sentencepiece(std::string_view text, std::vector<TokenId>& ids,
                                           bool at_text_start) const {
  if (text.empty()) return;
  std::string normalized;
  normalized.reserve(text.size() + text.size() / 4 + 3);
  if (pipeline.normalizer_prepend) normalized += detail::kMetaspace;
  const bool replace = pipeline.normalizer_replace_spaces || pipeline.metaspace;
  for (char c : text) {
    if (replace && c == ' ')
      normalized += detail::kMetaspace;
    else
      normalized += c;
  }
  if (pipeline.metaspace && !normalized.starts_with(detail::kMetaspace) &&
      (pipeline.prepend == detail::PrependScheme::kAlways ||
       (pipeline.prepend == detail::PrependScheme::kFirst && at_text_start)))
    normalized.insert(0, detail::kMetaspace);
  const std::string_view view = normalized;
  if (!(pipeline.metaspace && pipeline.metaspace_split)) {
    encode_piece_cached(view, ids);
    return;
  }
  std::size_t start = 0;
  while (start < view.size()) {
    std::size_t next = view.find(detail::kMetaspace, start + 1);
    if (next == std::string_view::npos) next = view.size();
    encode_piece_cached(view.substr(start, next - start), ids);
    start = next;
  }
}

}  // namespace zero::text
