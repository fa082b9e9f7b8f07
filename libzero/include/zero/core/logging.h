// Rank-prefixed logging into a sink the host program sets. Until it calls set_log_sink, a program
// that links the library gets no info lines (the launch banner among them) and only warnings and
// errors on stderr, as Python's logging prints through its last-resort handler when nothing is
// configured: a rank that ends the process because another aborted says why. The `zero` command
// and the Python module set stderr_log_sink ("[rank r/W] message" on stderr). Info reaches the sink
// from rank 0 only unless ZERO_LOG_ALL_RANKS=1; warnings and errors from every rank.
// ZERO_LOG_LEVEL=debug|info|warn|error.
#pragma once

#include <functional>
#include <string_view>

#include "zero/core/error.h"

namespace zero {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// One line for a sink; `message` is valid for the call only.
struct LogRecord {
  LogLevel level;
  int rank;
  int world_size;
  std::string_view message;
};

// Called under a lock (one record at a time, from any thread); it must not log.
using LogSink = std::function<void(const LogRecord&)>;

// Installs `sink` (an empty one: none, the default: the last resort above) and returns the one it
// replaces.
LogSink set_log_sink(LogSink sink);

// "[rank r/W] warning: message\n" on stderr, flushed: the `zero` command's format.
void stderr_log_sink(const LogRecord& record);

// Sets this process's rank and world size for the records (defaults: 0 of 1).
void set_log_rank(int rank, int world_size);
void log_message(LogLevel level, std::string_view message);
// Whether a record of `level` would be written (info and debug: false while no sink is set).
bool log_enabled(LogLevel level);

template <typename... Args>
void log_info(Args&&... args) {
  if (log_enabled(LogLevel::kInfo)) log_message(LogLevel::kInfo, detail::concat(args...));
}
template <typename... Args>
void log_debug(Args&&... args) {
  if (log_enabled(LogLevel::kDebug)) log_message(LogLevel::kDebug, detail::concat(args...));
}
template <typename... Args>
void log_warning(Args&&... args) {
  if (log_enabled(LogLevel::kWarning)) log_message(LogLevel::kWarning, detail::concat(args...));
}
template <typename... Args>
void log_error(Args&&... args) {
  if (log_enabled(LogLevel::kError)) log_message(LogLevel::kError, detail::concat(args...));
}

}  // namespace zero
