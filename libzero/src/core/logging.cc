// Rank-prefixed log lines on stderr; info on rank 0 unless ZERO_LOG_ALL_RANKS=1.
#include "zero/core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace zero {
namespace {

std::atomic<int> g_rank{0};
std::atomic<int> g_world_size{1};

LogLevel level_from_environment() {
  const char* text = std::getenv("ZERO_LOG_LEVEL");
  if (text == nullptr) return LogLevel::kInfo;
  const std::string level(text);
  if (level == "debug") return LogLevel::kDebug;
  if (level == "warn" || level == "warning") return LogLevel::kWarning;
  if (level == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

bool all_ranks_from_environment() {
  const char* text = std::getenv("ZERO_LOG_ALL_RANKS");
  return text != nullptr && std::string(text) == "1";
}

}  // namespace

void set_log_rank(int rank, int world_size) {
  g_rank = rank;
  g_world_size = world_size;
}

bool log_enabled(LogLevel level) {
  static const LogLevel threshold = level_from_environment();
  static const bool all_ranks = all_ranks_from_environment();
  if (level < threshold) return false;
  if (level <= LogLevel::kInfo && !all_ranks && g_rank.load() != 0) return false;
  return true;
}

void log_message(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  static constexpr const char* kTags[] = {"debug: ", "", "warning: ", "error: "};
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[rank %d/%d] %s%.*s\n", g_rank.load(), g_world_size.load(),
               kTags[static_cast<int>(level)], static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

}  // namespace zero
