// The fp16 loss scaler with DeepSpeed's semantics (deepspeed/runtime/fp16/loss_scaler.py).
#pragma once

#include <cstdint>

#include "zero/engine/options.h"

namespace zero {

// From the "fp16" section (config::Fp16Config, EngineOptions::fp16); off unless fp16.enabled.
// Static (options.loss_scale > 0) or dynamic. Dynamic: on overflow, the scale is divided by 2
// once `hysteresis` overflows have been seen (each overflow otherwise uses up one unit of
// hysteresis); a good step that follows a multiple of `loss_scale_window` good steps since the
// last overflow (or the start) doubles the scale (and restores hysteresis), as DeepSpeed 0.19's
// stable_interval test does. An overflow at the minimum scale throws zero::Error when
// raise_error_at_min_scale is set (DeepSpeed's default; not a config key). The step in which an
// overflow happened is skipped, and so is the LR schedule's step (the engine's job).
class LossScaler {
 public:
  LossScaler() = default;
  explicit LossScaler(const config::Fp16Config& options, bool raise_error_at_min_scale = true);

  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  // Records the outcome of one boundary step (overflow: some gradient was inf/NaN).
  void update(bool overflow);

  struct State {
    double scale = 1.0;
    std::int64_t iteration = 0;
    std::int64_t last_overflow_iteration = -1;
    int hysteresis = 1;
  };
  State state() const { return {scale_, iteration_, last_overflow_iteration_, hysteresis_}; }
  void set_state(const State& state);

 private:
  bool dynamic_ = false;
  double scale_ = 1.0;
  double factor_ = 2.0;
  int window_ = 1000;
  double min_scale_ = 1.0;
  int delayed_shift_ = 1;
  int hysteresis_ = 1;
  bool consecutive_hysteresis_ = false;
  bool raise_error_at_min_scale_ = true;
  std::int64_t iteration_ = 0;
  std::int64_t last_overflow_iteration_ = -1;
};

}  // namespace zero
