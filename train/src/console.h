// A run's console (internal to zero::train): rank 0's log lines on stdout when RunOptions::print
// is on; silent on every other rank.
#pragma once

#include <cstdarg>
#include <cstdio>

namespace zero::train::detail {

class Console {
 public:
  explicit Console(bool enabled) : enabled_(enabled) {}

  // Whether lines are printed (progress bars on stderr follow it too).
  bool enabled() const { return enabled_; }

  // printf's `format` with `...`, flushed at once so that lines keep their order among ranks'
  // and children's output.
  [[gnu::format(printf, 2, 3)]] void say(const char* format, ...) const {
    if (!enabled_) return;
    va_list values;
    va_start(values, format);
    std::vprintf(format, values);
    va_end(values);
    std::fflush(stdout);
  }

 private:
  bool enabled_ = false;
};

}  // namespace zero::train::detail
