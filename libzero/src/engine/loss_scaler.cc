// LossScaler: DeepSpeed's DynamicLossScaler.update_scale (0.19), step for step; checked against
// DeepSpeed's own class in tests/engine/loss_scaler_test.cc.
#include "zero/engine/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "zero/core/error.h"

namespace zero {

LossScaler::LossScaler(const config::Fp16Config& options, bool raise_error_at_min_scale) {
  if (!options.enabled) return;
  ZERO_CHECK(options.loss_scale >= 0, "fp16.loss_scale must be >= 0 (0 means dynamic), got ",
             options.loss_scale);
  ZERO_CHECK(options.hysteresis >= 1, "fp16.hysteresis must be >= 1, got ", options.hysteresis);
  ZERO_CHECK(options.loss_scale_window >= 1, "fp16.loss_scale_window must be >= 1, got ",
             options.loss_scale_window);
  if (options.loss_scale > 0) {
    scale_ = options.loss_scale;
    return;
  }
  dynamic_ = true;
  ZERO_CHECK(options.initial_scale_power >= 0 && options.initial_scale_power < 1024,
             "fp16.initial_scale_power must be in [0, 1024), got ", options.initial_scale_power);
  ZERO_CHECK(options.hysteresis <= std::numeric_limits<int>::max() &&
                 options.loss_scale_window <= std::numeric_limits<int>::max(),
             "fp16.hysteresis and fp16.loss_scale_window must fit an int");
  scale_ = std::ldexp(1.0, static_cast<int>(options.initial_scale_power));
  window_ = static_cast<int>(options.loss_scale_window);
  min_scale_ = static_cast<double>(options.min_loss_scale);
  delayed_shift_ = static_cast<int>(options.hysteresis);
  hysteresis_ = static_cast<int>(options.hysteresis);
  consecutive_hysteresis_ = options.consecutive_hysteresis;
  raise_error_at_min_scale_ = raise_error_at_min_scale;
}

void LossScaler::update(bool overflow) {
  if (!dynamic_) return;
  if (overflow) {
    if (delayed_shift_ == 1 || hysteresis_ == 1) {
      ZERO_CHECK(!(scale_ == min_scale_ && raise_error_at_min_scale_),
                 "gradient overflow with the loss scale already at its minimum (", min_scale_,
                 "): cannot decrease the scale any further (fp16.min_loss_scale)");
      scale_ = std::max(scale_ / factor_, min_scale_);
    } else {
      --hysteresis_;
    }
    last_overflow_iteration_ = iteration_;
  } else {
    if (consecutive_hysteresis_) hysteresis_ = delayed_shift_;
    // Good steps since the last overflow (or since the start), this one excluded.
    const std::int64_t stable_interval = iteration_ - last_overflow_iteration_ - 1;
    if (stable_interval > 0 && stable_interval % window_ == 0) {
      if (!consecutive_hysteresis_) hysteresis_ = delayed_shift_;
      scale_ *= factor_;
    }
  }
  ++iteration_;
}

void LossScaler::set_state(const State& state) {
  scale_ = state.scale;
  iteration_ = state.iteration;
  last_overflow_iteration_ = state.last_overflow_iteration;
  hysteresis_ = state.hysteresis;
}

}  // namespace zero
