// Parallel tokenization of corpus files into one token stream with example boundaries.
#include "zero/text/token_stream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>

#include "hash.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/text/progress.h"
#include "zero/text/text_files.h"

namespace zero::text {

namespace fs = std::filesystem;

TokenStream::TokenStream(std::vector<TokenId> tokens, std::vector<std::uint64_t> example_offsets)
    : owned_tokens_(std::move(tokens)), owned_offsets_(std::move(example_offsets)) {
  if (owned_offsets_.empty()) owned_offsets_.push_back(0);
  ZERO_CHECK(owned_offsets_.front() == 0 && owned_offsets_.back() == owned_tokens_.size() &&
                 std::is_sorted(owned_offsets_.begin(), owned_offsets_.end()),
             "example offsets must rise from 0 to the token count ", owned_tokens_.size());
  tokens_ = owned_tokens_;
  offsets_ = owned_offsets_;
}

namespace {

constexpr std::size_t kChunkBytes = 1 << 20;

struct Chunk {
  std::size_t file;
  std::size_t begin, end;  // byte range, ending just after a '\n' (or at the file's end)
  std::size_t first_line_number;
};

struct ChunkResult {
  std::vector<TokenId> tokens;
  std::vector<std::uint64_t> example_sizes;
};

std::vector<Chunk> make_chunks(const std::vector<MappedFile>& files) {
  std::vector<Chunk> chunks;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string_view bytes = files[f].bytes();
    std::size_t begin = 0;
    std::size_t line_number = 1;
    while (begin < bytes.size()) {
      std::size_t end = std::min(bytes.size(), begin + kChunkBytes);
      if (end < bytes.size()) {
        const std::size_t newline = bytes.find('\n', end - 1);
        end = newline == std::string_view::npos ? bytes.size() : newline + 1;
      }
      chunks.push_back({f, begin, end, line_number});
      line_number += static_cast<std::size_t>(
          std::count(bytes.begin() + static_cast<std::ptrdiff_t>(begin),
                     bytes.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
      begin = end;
    }
  }
  return chunks;
}

}  // namespace

TokenStream tokenize_files(std::span<const fs::path> paths, const Tokenizer& tokenizer,
                           const TokenizeOptions& options) {
  ZERO_CHECK(!paths.empty(), "no data files given");
  std::vector<MappedFile> files;
  std::uint64_t total_bytes = 0;
  for (const fs::path& path : paths) {
    files.push_back(open_text_file(path));
    total_bytes += files.back().size_bytes();
  }
  const std::vector<Chunk> chunks = make_chunks(files);
  std::vector<ChunkResult> results(chunks.size());
  // Default: this node's hardware threads shared among the ranks launched on it.
  int local_ranks = 1;
  try {
    local_ranks = std::max(1, detect_launch().local_world_size);
  } catch (const Error&) {
  }
  const int hardware =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local_ranks);
  const int num_threads = std::clamp(options.num_threads > 0 ? options.num_threads : hardware, 1,
                                     static_cast<int>(std::max<std::size_t>(1, chunks.size())));
  ProgressBar progress("tokenizing " + paths.front().filename().string() +
                           (paths.size() > 1 ? " (+" + std::to_string(paths.size() - 1) + ")" : ""),
                       total_bytes, options.show_progress);
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (std::size_t c = next++; c < chunks.size(); c = next++) {
        const Chunk& chunk = chunks[c];
        const MappedFile& file = files[chunk.file];
        ChunkResult& result = results[c];
        result.tokens.reserve((chunk.end - chunk.begin) / 3);
        const TextFormat format = format_of(file.path());
        for_each_example(
            file.bytes().substr(chunk.begin, chunk.end - chunk.begin), format, file.path(),
            [&](std::string_view example) {
              const std::size_t before = result.tokens.size();
              tokenizer.encode_append(without_linebreak(example, format, options.keep_linebreaks),
                                      result.tokens, options.special, options.add_special);
              result.example_sizes.push_back(result.tokens.size() - before);
            },
            chunk.first_line_number);
        progress.add(chunk.end - chunk.begin);
      }
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = chunks.size();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < num_threads; ++t) threads.emplace_back(work);
  work();
  for (std::thread& thread : threads) thread.join();
  if (failure) std::rethrow_exception(failure);
  progress.finish();

  std::size_t num_tokens = 0, num_examples = 0;
  for (const ChunkResult& result : results) {
    num_tokens += result.tokens.size();
    num_examples += result.example_sizes.size();
  }
  std::vector<TokenId> tokens;
  tokens.reserve(num_tokens);
  std::vector<std::uint64_t> offsets;
  offsets.reserve(num_examples + 1);
  offsets.push_back(0);
  for (ChunkResult& result : results) {
    tokens.insert(tokens.end(), result.tokens.begin(), result.tokens.end());
    for (std::uint64_t size : result.example_sizes) offsets.push_back(offsets.back() + size);
    result = ChunkResult{};
  }
  return TokenStream(std::move(tokens), std::move(offsets));
}

std::uint64_t hash_files(std::span<const fs::path> paths) {
  std::uint64_t hash = detail::hash_string("zero-corpus-v1");
  for (const fs::path& path : paths) {
    const MappedFile file(path);
    hash = detail::hash_combine(hash, detail::hash_bytes(file.bytes().data(), file.size_bytes()));
    hash = detail::hash_combine(hash, static_cast<std::uint64_t>(format_of(path)));
  }
  return hash;
}

std::uint64_t data_key(std::span<const fs::path> paths) {
  std::uint64_t key = hash_files(paths);
  for (const fs::path& path : paths) {
    const auto modified = fs::last_write_time(path).time_since_epoch();
    key = detail::hash_combine(key, static_cast<std::uint64_t>(fs::file_size(path)));
    key = detail::hash_combine(
        key, static_cast<std::uint64_t>(
                 std::chrono::duration_cast<std::chrono::nanoseconds>(modified).count()));
  }
  return key;
}

}  // namespace zero::text
