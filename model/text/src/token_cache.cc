// The token cache file: atomic write, memory-mapped read, staleness and corruption checks.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "hash.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"
#include "zero/text/token_stream.h"

namespace zero::text {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'Z', 'E', 'R', 'O', 'T', 'O', 'K', '1'};

struct CacheHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t token_bytes;
  std::uint64_t content_hash;
  std::uint64_t tokenizer_fingerprint;
  std::uint64_t num_tokens;
  std::uint64_t num_examples;
  std::uint64_t payload_checksum;
  std::uint64_t header_checksum;  // of the bytes before it
};
static_assert(sizeof(CacheHeader) == 64);

std::uint64_t tokens_bytes_padded(std::uint64_t num_tokens) {
  return (num_tokens * sizeof(TokenId) + 7) / 8 * 8;
}

std::uint64_t payload_checksum(std::span<const TokenId> tokens,
                               std::span<const std::uint64_t> offsets) {
  return detail::hash_combine(detail::hash_bytes(tokens.data(), tokens.size_bytes()),
                              detail::hash_bytes(offsets.data(), offsets.size_bytes()));
}

std::uint64_t header_checksum(const CacheHeader& header) {
  return detail::hash_bytes(&header, offsetof(CacheHeader, header_checksum));
}

void write_all(int fd, const void* data, std::size_t size, const fs::path& path) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int error = errno;
      ::close(fd);
      ZERO_THROW("writing token cache ", path, " failed: ", std::strerror(error));
    }
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

}  // namespace

TokenCache::TokenCache(fs::path directory) : directory_(std::move(directory)) {}

fs::path TokenCache::path_for(std::uint64_t content_hash,
                              std::uint64_t tokenizer_fingerprint) const {
  char name[64];
  std::snprintf(
      name, sizeof(name), "tokens-%016llx.bin",
      static_cast<unsigned long long>(detail::hash_combine(content_hash, tokenizer_fingerprint)));
  return directory_ / name;
}

void TokenCache::write(const fs::path& path, const TokenStream& stream, std::uint64_t content_hash,
                       std::uint64_t tokenizer_fingerprint) const {
  std::error_code error;
  fs::create_directories(path.parent_path(), error);
  ZERO_CHECK(!error, "cannot create the token cache folder ", path.parent_path(), ": ",
             error.message());
  CacheHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.token_bytes = sizeof(TokenId);
  header.content_hash = content_hash;
  header.tokenizer_fingerprint = tokenizer_fingerprint;
  header.num_tokens = stream.tokens().size();
  header.num_examples = stream.num_examples();
  header.payload_checksum = payload_checksum(stream.tokens(), stream.example_offsets());
  header.header_checksum = header_checksum(header);
  // One temporary per writer: ranks that are threads of one process (the thread communicator, the
  // Python module) write the same cache at once, and a name by pid alone made them write one file
  // (a clean-clone CI run read it back short). Each rename then replaces the file atomically.
  static std::atomic<std::uint64_t> writers{0};
  const fs::path temporary = path.string() + ".tmp." + std::to_string(::getpid()) + "." +
                             std::to_string(writers.fetch_add(1));
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "cannot create token cache ", temporary, ": ", std::strerror(errno));
  write_all(fd, &header, sizeof(header), temporary);
  write_all(fd, stream.tokens().data(), stream.tokens().size_bytes(), temporary);
  const std::uint64_t padding =
      tokens_bytes_padded(header.num_tokens) - stream.tokens().size_bytes();
  const char zeros[8] = {};
  write_all(fd, zeros, padding, temporary);
  write_all(fd, stream.example_offsets().data(), stream.example_offsets().size_bytes(), temporary);
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  ZERO_CHECK(synced, "fsync of token cache ", temporary, " failed: ", std::strerror(errno));
  ZERO_CHECK(::rename(temporary.c_str(), path.c_str()) == 0, "cannot rename ", temporary, " to ",
             path, ": ", std::strerror(errno));
}

std::unique_ptr<TokenStream> TokenCache::read(const fs::path& path, std::uint64_t content_hash,
                                              std::uint64_t tokenizer_fingerprint,
                                              std::string& why) const {
  if (!fs::exists(path)) {
    why = "no cache file";
    return nullptr;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "token cache ", path, " exists but cannot be read: ", std::strerror(errno),
             " (fix its permissions or delete it)");
  struct stat info {};
  const bool stat_ok = ::fstat(fd, &info) == 0;
  const auto size = stat_ok ? static_cast<std::uint64_t>(info.st_size) : 0;
  if (!stat_ok || size < sizeof(CacheHeader)) {
    ::close(fd);
    why = "file shorter than its header (corrupt)";
    return nullptr;
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  const int map_error = errno;
  ::close(fd);
  ZERO_CHECK(data != MAP_FAILED, "token cache ", path,
             " cannot be memory-mapped: ", std::strerror(map_error));
  std::shared_ptr<const void> mapping(
      data, [size](const void* address) { ::munmap(const_cast<void*>(address), size); });
  CacheHeader header;
  std::memcpy(&header, data, sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    why = "not a zero token cache (bad magic)";
    return nullptr;
  }
  if (header.version != kVersion || header.token_bytes != sizeof(TokenId)) {
    why = "cache version " + std::to_string(header.version) + " (this build writes " +
          std::to_string(kVersion) + ")";
    return nullptr;
  }
  if (header.header_checksum != header_checksum(header)) {
    why = "header checksum mismatch (corrupt)";
    return nullptr;
  }
  if (header.content_hash != content_hash ||
      header.tokenizer_fingerprint != tokenizer_fingerprint) {
    why = header.content_hash != content_hash ? "stale: the data files changed"
                                              : "stale: another tokenizer";
    return nullptr;
  }
  const std::uint64_t expected_size = sizeof(CacheHeader) + tokens_bytes_padded(header.num_tokens) +
                                      (header.num_examples + 1) * sizeof(std::uint64_t);
  if (size != expected_size) {
    why = "size " + std::to_string(size) + " bytes, header says " + std::to_string(expected_size) +
          " (truncated or corrupt)";
    return nullptr;
  }
  const auto* base = static_cast<const char*>(data);
  const std::span<const TokenId> tokens(
      reinterpret_cast<const TokenId*>(base + sizeof(CacheHeader)), header.num_tokens);
  const std::span<const std::uint64_t> offsets(
      reinterpret_cast<const std::uint64_t*>(base + sizeof(CacheHeader) +
                                             tokens_bytes_padded(header.num_tokens)),
      header.num_examples + 1);
  if (payload_checksum(tokens, offsets) != header.payload_checksum || offsets.front() != 0 ||
      offsets.back() != header.num_tokens) {
    why = "payload checksum mismatch (corrupt)";
    return nullptr;
  }
  auto stream = std::make_unique<TokenStream>();
  stream->mapping_ = std::move(mapping);
  stream->tokens_ = tokens;
  stream->offsets_ = offsets;
  stream->cache_path_ = path;
  return stream;
}

TokenStream load_token_stream(std::span<const fs::path> files, const Tokenizer& tokenizer,
                              const fs::path& cache_dir, const TokenizeOptions& options,
                              bool overwrite_cache) {
  if (cache_dir.empty()) return tokenize_files(files, tokenizer, options);
  for (const fs::path& file : files)
    ZERO_CHECK(fs::exists(file), "data file ", file, " does not exist");
  const std::uint64_t content_hash = data_key(files);
  const TokenCache cache(cache_dir);
  // The ids depend on the tokenizer, on whether special tokens are recognised, on whether lines
  // keep their line breaks, and on the ids added around each example. Without a template nothing
  // is added either way, and the key stays the one caches had before special tokens were added.
  std::uint64_t tokenizer_key = options.special == SpecialTokens::kRecognize
                                    ? tokenizer.fingerprint()
                                    : detail::hash_combine(tokenizer.fingerprint(), 1);
  if (!options.keep_linebreaks) tokenizer_key = detail::hash_combine(tokenizer_key, 2);
  const SequenceTemplate& added = tokenizer.sequence_template();
  if (options.add_special == AddSpecialTokens::kYes &&
      (!added.before.empty() || !added.after.empty())) {
    std::uint64_t ids = detail::hash_string("add_special_tokens");
    for (const TokenId id : added.before) ids = detail::hash_combine(ids, id);
    ids = detail::hash_combine(ids, detail::hash_string("$A"));
    for (const TokenId id : added.after) ids = detail::hash_combine(ids, id);
    tokenizer_key = detail::hash_combine(tokenizer_key, ids);
  }
  const fs::path path = cache.path_for(content_hash, tokenizer_key);
  std::string why;
  if (overwrite_cache) {
    if (fs::exists(path)) log_info("token cache: --overwrite_cache: rebuilding ", path);
  } else if (auto cached = cache.read(path, content_hash, tokenizer_key, why)) {
    log_info("token cache: using ", path, " (", cached->tokens().size(), " tokens, memory-mapped)");
    return std::move(*cached);
  } else if (fs::exists(path)) {
    log_warning("token cache ", path, " not used: ", why, "; rebuilding it");
  }
  TokenStream stream = tokenize_files(files, tokenizer, options);
  try {
    cache.write(path, stream, content_hash, tokenizer_key);
  } catch (const Error& error) {
    log_warning("token cache not written (", error.what(),
                "); the data is tokenized again next run: give --cache_dir a writable folder");
    return stream;
  }
  std::unique_ptr<TokenStream> mapped = cache.read(path, content_hash, tokenizer_key, why);
  ZERO_CHECK(mapped != nullptr, "token cache ", path, " just written does not read back: ", why);
  log_info("token cache: wrote ", path, " (", mapped->tokens().size(), " tokens)");
  return std::move(*mapped);
}

}  // namespace zero::text
