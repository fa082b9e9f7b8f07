// A run's console (internal to zero::train): rank 0's log lines on stdout when RunOptions::print
// is on; silent on every other rank; and the clock its lines time things with.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/text/progress.h"

namespace zero::train::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Console {
 public:
  explicit Console(bool enabled) : enabled_(enabled) {}

  // Whether lines are printed (progress bars on stderr follow it too).
  bool enabled() const { return enabled_; }

  // printf's `format` with `...`, flushed at once so that lines keep their order among ranks'
  // and children's output.
  [[gnu::format(printf, 2, 3)]] void say(const char* format, ...) const {
    if (!enabled_) return;
    text::ProgressBar::clear_line();  // a line on the terminal starts at the margin, not the bar
    va_list values;
    va_start(values, format);
    std::vprintf(format, values);
    va_end(values);
    std::fflush(stdout);
  }

 private:
  bool enabled_ = false;
};

// "812.5/790.1": one number per rank, one decimal, joined by '/' (the log line's memory peaks).
inline std::string joined_by_slash(const std::vector<float>& values) {
  std::string text;
  for (const float value : values) {
    char piece[32];
    std::snprintf(piece, sizeof(piece), "%s%.1f", text.empty() ? "" : "/", value);
    text += piece;
  }
  return text;
}

}  // namespace zero::train::detail
