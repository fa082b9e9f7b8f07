// Rank-prefixed logging: "[rank r/W] message" to stderr. Info prints on rank 0 only unless
// ZERO_LOG_ALL_RANKS=1; warnings and errors print on every rank.
// ZERO_LOG_LEVEL=debug|info|warn|error.
#pragma once

#include <string_view>

#include "zero/core/error.h"

namespace zero {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Sets this process's rank and world size for the prefix (defaults: 0 of 1).
void set_log_rank(int rank, int world_size);
void log_message(LogLevel level, std::string_view message);
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
  log_message(LogLevel::kError, detail::concat(args...));
}

}  // namespace zero
