// A corpus as one token stream with example boundaries: tokenized in parallel, cached on disk
// (keyed by content and tokenizer), memory-mapped on reuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text {

struct TokenizeOptions {
  int num_threads = 0;        // 0: all hardware threads
  bool show_progress = true;  // progress bar on rank 0 (stderr)
  // GPT2TokenizerFast (and so run_clm) turns "<|endoftext|>" in the text into the special id.
  SpecialTokens special = SpecialTokens::kRecognize;
  // run_clm's `tokenizer(examples["text"])` adds the tokenizer's special tokens (its template) to
  // each example: a Llama tokenizer's bos before every line of a text file; nothing for GPT-2's.
  AddSpecialTokens add_special = AddSpecialTokens::kYes;
  // run_clm's --keep_linebreaks: false tokenizes the lines of text files without their "\n".
  bool keep_linebreaks = true;
};

// Every example's ids back to back: example e is tokens()[offsets[e], offsets[e+1]). Either owns
// its vectors or maps a cache file (read-only, shared by copies). Cheap to move.
class TokenStream {
 public:
  TokenStream() = default;
  // `example_offsets`: num_examples + 1 non-decreasing offsets from 0 to tokens.size().
  TokenStream(std::vector<TokenId> tokens, std::vector<std::uint64_t> example_offsets);
  TokenStream(TokenStream&&) noexcept = default;
  TokenStream& operator=(TokenStream&&) noexcept = default;
  TokenStream(const TokenStream&) = delete;
  TokenStream& operator=(const TokenStream&) = delete;

  std::span<const TokenId> tokens() const { return tokens_; }
  std::span<const std::uint64_t> example_offsets() const { return offsets_; }
  std::size_t num_examples() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  bool memory_mapped() const { return mapping_ != nullptr; }
  // The cache file this stream was read from or written to (empty when not cached).
  const std::filesystem::path& cache_path() const { return cache_path_; }

 private:
  friend class TokenCache;
  std::vector<TokenId> owned_tokens_;
  std::vector<std::uint64_t> owned_offsets_;
  std::shared_ptr<const void> mapping_;  // keeps a cache file mapped
  std::span<const TokenId> tokens_;
  std::span<const std::uint64_t> offsets_;
  std::filesystem::path cache_path_;
};

// Tokenizes the examples of `files` (text_files.h: lines or JSON lines), in order, on
// options.num_threads threads over ~1 MiB chunks. Throws zero::Error naming a missing, empty or
// binary file.
TokenStream tokenize_files(std::span<const std::filesystem::path> files, const Tokenizer& tokenizer,
                           const TokenizeOptions& options = {});

// A 64-bit hash of the files' contents and formats, in order (not their names or times).
std::uint64_t hash_files(std::span<const std::filesystem::path> files);

// The token cache's data key: hash_files and each file's size and modification time (ns), as
// Hugging Face datasets keys local files. The content hash alone decides staleness; the times make
// a touched file rebuild its cache too, as datasets does.
std::uint64_t data_key(std::span<const std::filesystem::path> files);

// Token cache files: "<dir>/tokens-<key>.bin" with a 64-byte header (magic "ZEROTOK1", version,
// token width, content hash, tokenizer fingerprint, token and example counts, payload checksum,
// header checksum), then the uint32 ids and the uint64 example offsets, little-endian.
class TokenCache {
 public:
  // Bump when the ids for the same files and tokenizer change (example splitting, encoding):
  // files of another version are rebuilt.
  static constexpr std::uint32_t kVersion = 1;

  explicit TokenCache(std::filesystem::path directory);
  std::filesystem::path path_for(std::uint64_t content_hash,
                                 std::uint64_t tokenizer_fingerprint) const;

  // Writes atomically (temporary file, fsync, rename). Throws zero::Error on I/O failure.
  void write(const std::filesystem::path& path, const TokenStream& stream,
             std::uint64_t content_hash, std::uint64_t tokenizer_fingerprint) const;
  // Maps `path` and checks everything in the header and the payload checksum. Returns a stream,
  // or nullptr with `why` set when the file is absent, stale (other key) or corrupt (bad magic,
  // version, size or checksum). Throws zero::Error when the file exists but cannot be read.
  std::unique_ptr<TokenStream> read(const std::filesystem::path& path, std::uint64_t content_hash,
                                    std::uint64_t tokenizer_fingerprint, std::string& why) const;

 private:
  std::filesystem::path directory_;
};

// The front door: the cached stream when its file is valid, else tokenize and write the cache
// (keyed by data_key, the tokenizer's fingerprint, options.special, options.keep_linebreaks and
// the ids options.add_special adds to each example, so a stream made without bos is never read
// for one with it; not by a block size: blocks are cut from the stream after it is loaded). A stale
// or corrupt file is logged and replaced, never used; `overwrite_cache` (run_clm's
// --overwrite_cache) replaces a valid one too. A cache that cannot be written is a warning: the
// stream is returned uncached. `cache_dir` empty: no cache. Every call logs which it did ("token
// cache: using/wrote ...").
TokenStream load_token_stream(std::span<const std::filesystem::path> files,
                              const Tokenizer& tokenizer, const std::filesystem::path& cache_dir,
                              const TokenizeOptions& options = {}, bool overwrite_cache = false);

}  // namespace zero::text
