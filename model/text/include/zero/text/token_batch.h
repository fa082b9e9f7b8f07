// Many texts encoded at once on a few threads, their ids in one buffer in text order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text {

// The ids of encode_batch: text i's ids are ids[offsets[i], offsets[i + 1]).
struct TokenBatch {
  std::vector<TokenId> ids;
  std::vector<std::int64_t> offsets{0};  // size() + 1 values, rising from 0 to ids.size()
  std::size_t size() const { return offsets.size() - 1; }
};

// Encodes every text, equal to encoding them one after another, on `num_threads` threads (>= 1):
// the calling thread and num_threads - 1 workers of a pool that lives as long as the process, so
// the tokenizer's per-thread piece caches stay warm from one call to the next. Texts go out in
// blocks of consecutive texts to whichever thread is free; a thread appends the ids of its blocks
// to a buffer of its own (no cache line is written by two threads while encoding), and then each
// thread copies its blocks to their place in `ids`. Thread-safe: concurrent calls take turns on
// the pool. A child of fork() starts a pool of its own (the parent's workers are not in it). Throws
// zero::Error for num_threads < 1; a tokenizer error in any thread is rethrown.
TokenBatch encode_batch(const Tokenizer& tokenizer, std::span<const std::string_view> texts,
                        int num_threads, SpecialTokens special = SpecialTokens::kAsText);

}  // namespace zero::text
