// DeepSpeed's wall_clock_breakdown for `zero train`: with "wall_clock_breakdown": true in the
// DeepSpeed config, each log window also says where an optimizer step's time went (data, forward +
// backward, the engine's step, the rest: logging, evaluation), this rank's, in milliseconds per
// step. Each phase ends once the device has run what it enqueued (the compute and copy streams
// drained), so the numbers are the device's too, and the overlap of a step with the next
// forward is given up while it is on. Off: every call returns at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "zero/core/device_context.h"

namespace zero::train {

class StepBreakdown {
 public:
  enum Phase { kData, kForwardBackward, kStep, kPhases };

  StepBreakdown(bool enabled, DeviceContext& device) : enabled_(enabled), device_(device) {}
  bool enabled() const { return enabled_; }
  // A micro-step's first phase starts now.
  void begin();
  // `phase` ends now (after the device has drained); the next starts.
  void end(Phase phase);
  // "time (ms) per step | data … | forward+backward … | step … | other …" for a window of
  // `window_seconds` and `steps` optimizer steps, and the sums start over; empty when off.
  std::string take_line(double window_seconds, std::int64_t steps);

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  DeviceContext& device_;
  Clock::time_point since_;
  double seconds_[kPhases] = {};
};

}  // namespace zero::train
