// encode_batch: blocks of texts encoded by a process-wide pool of threads, then laid out in order.
#include "zero/text/token_batch.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>

#include "thread_pool.h"
#include "zero/core/error.h"

namespace zero::text {

namespace {

// Texts handed out at a time: enough to make the hand-out (one atomic add) rare, few enough that
// the threads finish together.
constexpr std::size_t kTextsPerBlock = 64;

// Where a block's ids were written: [begin, end) of thread `thread`'s buffer.
struct BlockIds {
  int thread = 0;
  std::size_t begin = 0, end = 0;
};

// One thread's ids, on cache lines of its own: every append writes the vector's end pointer.
struct alignas(64) ThreadIds {
  std::vector<TokenId> ids;
};

// Runs work(index) for index 0..num_threads-1 (index 0 on this thread); the first exception any
// call threw is rethrown after all have returned.
template <typename Work>
void run_on_threads(int num_threads, Work&& work) {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto guarded = [&](int index) {
    try {
      work(index);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  if (num_threads <= 1) {
    guarded(0);
  } else {
    detail::ThreadPool::instance().run(num_threads, guarded);
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

TokenBatch encode_batch(const Tokenizer& tokenizer, std::span<const std::string_view> texts,
                        int num_threads, SpecialTokens special) {
  ZERO_CHECK(num_threads >= 1, "encode_batch: num_threads must be at least 1, got ", num_threads);
  TokenBatch batch;
  const std::size_t num_blocks = (texts.size() + kTextsPerBlock - 1) / kTextsPerBlock;
  const int threads = static_cast<int>(std::min<std::size_t>(num_threads, num_blocks));
  batch.offsets.assign(texts.size() + 1, 0);
  std::vector<BlockIds> blocks(num_blocks);
  std::vector<ThreadIds> buffers(static_cast<std::size_t>(std::max(threads, 1)));
  std::atomic<std::size_t> next{0};
  // Phase 1: encode. offsets[i + 1] holds, for now, the end of text i within its block's ids.
  run_on_threads(threads, [&](int thread) {
    std::vector<TokenId>& ids = buffers[static_cast<std::size_t>(thread)].ids;
    for (std::size_t block = next++; block < num_blocks; block = next++) {
      const std::size_t first = block * kTextsPerBlock;
      const std::size_t last = std::min(texts.size(), first + kTextsPerBlock);
      const std::size_t begin = ids.size();
      for (std::size_t i = first; i < last; ++i) {
        tokenizer.encode_append(texts[i], ids, special);
        batch.offsets[i + 1] = static_cast<std::int64_t>(ids.size() - begin);
      }
      blocks[block] = BlockIds{thread, begin, ids.size()};
    }
  });
  // Phase 2: each block's place in the batch (a prefix sum), then the copies, block by block.
  std::vector<std::size_t> starts(num_blocks + 1, 0);
  for (std::size_t block = 0; block < num_blocks; ++block)
    starts[block + 1] = starts[block] + (blocks[block].end - blocks[block].begin);
  batch.ids.resize(starts[num_blocks]);
  next = 0;
  run_on_threads(threads, [&](int) {
    for (std::size_t block = next++; block < num_blocks; block = next++) {
      const BlockIds& from = blocks[block];
      const std::vector<TokenId>& ids = buffers[static_cast<std::size_t>(from.thread)].ids;
      if (from.end > from.begin)
        std::memcpy(batch.ids.data() + starts[block], ids.data() + from.begin,
                    (from.end - from.begin) * sizeof(TokenId));
      const std::size_t first = block * kTextsPerBlock;
      const std::size_t last = std::min(texts.size(), first + kTextsPerBlock);
      const auto start = static_cast<std::int64_t>(starts[block]);
      for (std::size_t i = first; i < last; ++i) batch.offsets[i + 1] += start;
    }
  });
  return batch;
}

}  // namespace zero::text
