// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py), formula for formula.
#pragma once

#include <memory>

#include "zero/config/ds_config.h"
#include "zero/engine/optimizer.h"

namespace zero::optim {

// The learning rate of a schedule at `last_batch_iteration` (>= 0), as DeepSpeed's get_lr():
//   WarmupLR:       min + (max - min)·γ, γ = log(i+1)/log(W) (log) or i/W (linear) while i < W,
//                   else 1; W = max(2, warmup_num_steps)
//   WarmupDecayLR:  as WarmupLR in warmup, then γ = max(0, (T - i) / max(1, T - W))
//   WarmupCosineLR: base_lr·ratio; warmup ratio r0 + (1 - r0)·γ, then
//                   max(0, c + (1 - c)(1 + cos(π (i - W + 1) / (T - W))) / 2)
//   OneCycle:       cycle_min_lr → cycle_max_lr → cycle_min_lr over the two step sizes, then
//                   min_lr · (1 + decay_lr_rate · (i - total) / decay_step_size)
//   LRRangeTest:    min_lr · (1 + rate · interval), interval = i / step_size (floored when
//                   staircase)
// `base_lr` is the optimizer's lr (WarmupCosineLR scales it; the warmup family ignores it).
// Throws zero::Error for type kNone.
double schedule_lr(const config::SchedulerConfig& options, double base_lr,
                   std::int64_t last_batch_iteration);

// OneCycle's beta1 at `last_batch_iteration` when cycle_momentum is on.
double one_cycle_beta1(const config::SchedulerConfig& options, std::int64_t last_batch_iteration);

// A stateful schedule over schedule_lr(). Before its first step() its lr() is what DeepSpeed's
// optimizer runs with then: the optimizer's lr for WarmupLR, WarmupDecayLR and WarmupCosineLR
// (they do not touch the optimizer at construction), cycle_min_lr for OneCycle and
// lr_range_test_min_lr for LRRangeTest (they set it in their constructors). Type kNone (no
// "scheduler" section) gives nullptr: the engine then runs at the optimizer's lr.
std::unique_ptr<LrSchedule> make_lr_schedule(const config::SchedulerConfig& options,
                                             double base_lr);

}  // namespace zero::optim
