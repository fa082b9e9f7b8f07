// A progress bar on stderr (rank 0 only): fraction done, rate and ETA, redrawn at most 10 times/s.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace zero::text {

// Thread-safe. On a terminal it redraws one line in place ("\r"); otherwise it prints only the
// final summary line, so logs stay readable. Prints nothing when disabled or not on rank 0 of the
// launch (zero::detect_launch()). A line printed while a bar is drawn calls clear_line() first.
class ProgressBar {
 public:
  // `total` in `unit`s (bytes are shown as MB); total 0 means unknown (no percentage, no ETA).
  ProgressBar(std::string label, std::uint64_t total, bool enabled = true);
  // Counting `unit`s (e.g. "steps") instead of bytes: shown as they are, no MB scaling.
  ProgressBar(std::string label, std::uint64_t total, std::string unit, bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void add(std::uint64_t amount);
  void finish();  // final line with the average rate; idempotent

  // Erases the bar last drawn in place on the terminal, if any is drawn now, so that the line
  // printed next starts at the left margin rather than at the bar's end; that bar is drawn again at
  // its next add().
  static void clear_line();

  // "0:03", "1:02:03": the ETA format.
  static std::string format_duration(double seconds);

 private:
  void draw(bool final_line);
  std::string label_;
  std::string unit_ = "MB";
  double scale_ = 1e6;  // counted amounts per shown unit
  std::uint64_t total_ = 0;
  std::uint64_t done_ = 0;
  bool enabled_ = false;
  bool terminal_ = false;
  bool finished_ = false;
  std::atomic<bool> cleared_ = false;  // by clear_line(): draw at the next add()
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  std::mutex mutex_;
};

}  // namespace zero::text
