#include "run/step_breakdown.h"

#include <cstdio>

namespace zero::train {

void StepBreakdown::begin() {
  if (enabled_) since_ = Clock::now();
}

void StepBreakdown::end(Phase phase) {
  if (!enabled_) return;
  device_.compute_stream().synchronize();
  device_.copy_stream().synchronize();
  const Clock::time_point now = Clock::now();
  seconds_[phase] += std::chrono::duration<double>(now - since_).count();
  since_ = now;
}

std::string StepBreakdown::take_line(double window_seconds, std::int64_t steps) {
  if (!enabled_ || steps <= 0) return {};
  const double per_step = 1e3 / static_cast<double>(steps);
  const double other =
      window_seconds - seconds_[kData] - seconds_[kForwardBackward] - seconds_[kStep];
  char line[160];
  std::snprintf(line, sizeof(line),
                "time (ms) per step | data %.2f | forward+backward %.2f | step %.2f | other %.2f\n",
                seconds_[kData] * per_step, seconds_[kForwardBackward] * per_step,
                seconds_[kStep] * per_step, other * per_step);
  for (double& seconds : seconds_) seconds = 0.0;
  return line;
}

}  // namespace zero::train
