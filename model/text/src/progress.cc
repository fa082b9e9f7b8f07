// The rank-0 progress bar: percentage, MB/s and ETA on stderr.
#include "zero/text/progress.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "zero/core/launch.h"

namespace zero::text {
namespace {

// The bar drawn in place on the terminal now (its line not ended), for clear_line().
std::mutex drawn_mutex;
ProgressBar* drawn = nullptr;

}  // namespace

ProgressBar::ProgressBar(std::string label, std::uint64_t total, bool enabled)
    : label_(std::move(label)), total_(total) {
  bool rank_zero = true;
  try {
    rank_zero = detect_launch().rank == 0;
  } catch (...) {
    rank_zero = true;
  }
  enabled_ = enabled && rank_zero;
  terminal_ = ::isatty(STDERR_FILENO) != 0;
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressBar::ProgressBar(std::string label, std::uint64_t total, std::string unit, bool enabled)
    : ProgressBar(std::move(label), total, enabled) {
  unit_ = std::move(unit);
  scale_ = 1.0;
}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::clear_line() {
  std::lock_guard lock(drawn_mutex);
  if (drawn == nullptr) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn->cleared_ = true;
  drawn = nullptr;
}

std::string ProgressBar::format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e8) return "?";
  const auto total = static_cast<long long>(seconds + 0.5);
  char buffer[32];
  if (total >= 3600)
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                  total % 60);
  else
    std::snprintf(buffer, sizeof(buffer), "%lld:%02lld", total / 60, total % 60);
  return buffer;
}

void ProgressBar::add(std::uint64_t amount) {
  std::lock_guard lock(mutex_);
  done_ += amount;
  if (!enabled_ || !terminal_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && !cleared_) return;
  cleared_ = false;
  last_draw_ = now;
  draw(false);
}

void ProgressBar::finish() {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  {
    std::lock_guard drawn_lock(drawn_mutex);
    if (drawn == this) drawn = nullptr;
  }
  if (enabled_) draw(true);
}

void ProgressBar::draw(bool final_line) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double megabytes = static_cast<double>(done_) / scale_;
  const char* unit = unit_.c_str();
  const int digits = scale_ == 1.0 ? 0 : 1;  // counted units are whole
  const double rate = elapsed > 0 ? megabytes / elapsed : 0.0;
  char line[256];
  if (final_line) {
    std::snprintf(line, sizeof(line), "%s: %.*f %s in %s (%.1f %s/s)", label_.c_str(), digits,
                  megabytes, unit, format_duration(elapsed).c_str(), rate, unit);
  } else if (total_ > 0) {
    const double fraction = static_cast<double>(done_) / static_cast<double>(total_);
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    const double eta =
        rate > 0 ? (static_cast<double>(total_ - std::min(done_, total_)) / scale_) / rate : -1;
    std::snprintf(line, sizeof(line), "%s %3.0f%% [%s] %.*f/%.*f %s %.1f %s/s ETA %s",
                  label_.c_str(), fraction * 100, bar.c_str(), digits, megabytes, digits,
                  static_cast<double>(total_) / scale_, unit, rate, unit,
                  format_duration(eta).c_str());
  } else {
    std::snprintf(line, sizeof(line), "%s %.*f %s %.1f %s/s", label_.c_str(), digits, megabytes,
                  unit, rate, unit);
  }
  std::lock_guard lock(drawn_mutex);
  std::fprintf(stderr, terminal_ ? "\r\033[K%s%s" : "%s%s", line, final_line ? "\n" : "");
  std::fflush(stderr);
  if (terminal_ && !final_line) drawn = this;
}

}  // namespace zero::text
