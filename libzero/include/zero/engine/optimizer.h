// The interfaces through which the engine drives an optimizer and a learning-rate schedule
// (implemented in optim/, zero::optim), so libzero never depends on optim: zero::Optimizer (in the
// core, zero/core/optimizer.h, since the device layer runs its step) and zero::LrSchedule.
#pragma once

#include <cstdint>
#include <string_view>

#include "zero/core/optimizer.h"

namespace zero {

// A learning-rate schedule with DeepSpeed's stepping: step() is called after every taken
// optimizer step (never after a skipped one); lr() is the rate the next optimizer step uses.
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string_view name() const = 0;
  virtual void step() = 0;
  // Before the first step(), DeepSpeed's value for an unstarted schedule (the optimizer's lr
  // for the warmup family, cycle_min_lr for OneCycle, the range-test minimum for LRRangeTest).
  virtual double lr() const = 0;
  // The beta1 the next step uses when the schedule cycles momentum; `base` otherwise.
  virtual double beta1(double base) const { return base; }
  virtual std::int64_t last_batch_iteration() const = 0;
  virtual void set_last_batch_iteration(std::int64_t iteration) = 0;
};

}  // namespace zero
