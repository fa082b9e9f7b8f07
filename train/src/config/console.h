// A run's console (internal to zero::train): rank 0's log lines on stdout when RunOptions::print
// is on, or into RunOptions::print_line when it is set; silent on every other rank; and the clock
// its lines time things with.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/text/progress.h"

namespace zero::train::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class Console {
 public:
  // `sink` empty: stdout.
  explicit Console(bool enabled, std::function<void(std::string_view)> sink = {})
      : enabled_(enabled), sink_(std::move(sink)) {}

  // Whether lines are printed.
  bool enabled() const { return enabled_; }
  // Whether progress bars are drawn on stderr: with the lines on stdout only (a sink's reader,
  // a notebook, sees no terminal).
  bool progress_bars() const { return enabled_ && !sink_; }

  // printf's `format` with `...`: on stdout, flushed at once so that lines keep their order among
  // ranks' and children's output; or the formatted text handed to the sink.
  [[gnu::format(printf, 2, 3)]] void say(const char* format, ...) const {
    if (!enabled_) return;
    va_list values;
    va_start(values, format);
    if (sink_) {
      va_list copy;
      va_copy(copy, values);
      const int size = std::vsnprintf(nullptr, 0, format, copy);
      va_end(copy);
      std::string text(static_cast<std::size_t>(size > 0 ? size : 0), '\0');
      std::vsnprintf(text.data(), text.size() + 1, format, values);
      va_end(values);
      sink_(text);
      return;
    }
    text::ProgressBar::clear_line();  // a line on the terminal starts at the margin, not the bar
    std::vprintf(format, values);
    va_end(values);
    std::fflush(stdout);
  }

 private:
  bool enabled_ = false;
  std::function<void(std::string_view)> sink_;
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
