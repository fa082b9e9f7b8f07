// Rank-prefixed log records into the host's sink; without one, warnings and errors on stderr (the
// last resort, as Python's logging has) and nothing else. Info on rank 0 unless
// ZERO_LOG_ALL_RANKS=1.
#include "zero/core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>

namespace zero {
namespace {

std::atomic<int> g_rank{0};
std::atomic<int> g_world_size{1};

// The sink and the lock that serialises its calls; g_has_sink lets log_enabled skip formatting.
std::mutex g_sink_mutex;
LogSink g_sink;
std::atomic<bool> g_has_sink{false};

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

LogSink set_log_sink(LogSink sink) {
  std::lock_guard lock(g_sink_mutex);
  std::swap(g_sink, sink);
  g_has_sink = static_cast<bool>(g_sink);
  return sink;
}

void stderr_log_sink(const LogRecord& record) {
  static constexpr const char* kTags[] = {"debug: ", "", "warning: ", "error: "};
  std::fprintf(stderr, "[rank %d/%d] %s%.*s\n", record.rank, record.world_size,
               kTags[static_cast<int>(record.level)], static_cast<int>(record.message.size()),
               record.message.data());
  std::fflush(stderr);
}

void set_log_rank(int rank, int world_size) {
  g_rank = rank;
  g_world_size = world_size;
}

bool log_enabled(LogLevel level) {
  static const LogLevel threshold = level_from_environment();
  static const bool all_ranks = all_ranks_from_environment();
  if (!g_has_sink.load() && level < LogLevel::kWarning) return false;
  if (level < threshold) return false;
  if (level <= LogLevel::kInfo && !all_ranks && g_rank.load() != 0) return false;
  return true;
}

void log_message(LogLevel level, std::string_view message) {
  std::lock_guard lock(g_sink_mutex);
  const LogRecord record{level, g_rank.load(), g_world_size.load(), message};
  if (g_sink)
    g_sink(record);
  else if (level >= LogLevel::kWarning)  // the last resort: what the host must not miss
    stderr_log_sink(record);
}

}  // namespace zero
