// DeepSpeed's learning-rate schedules (deepspeed/runtime/lr_schedules.py), formula for formula.
#pragma once

#include <memory>

#include "zero/config/ds_config.h"
#include "zero/engine/optimizer.h"

namespace zero::optim {

// The learning rate of a schedule at `last_batch_iteration` i (>= -1), as DeepSpeed 0.19's
// get_lr() (checked against deepspeed.runtime.lr_schedules by tests/optim/lr_schedule_golden_test):
//   WarmupLR:       min + (max - min)·γ, γ = log(i+1)/log(W) (log) or i/W (linear) while i < W,
//                   else 1; W = max(2, warmup_num_steps)
//   WarmupDecayLR:  as WarmupLR in warmup, then γ = max(0, (T - i) / max(1, T - W))
//   WarmupCosineLR: base_lr·ratio; warmup ratio r0 + (1 - r0)·γ, then
//                   max(0, c + (1 - c)(1 + cos(π·min(1, (i - W + 1) / max(1, T - W))))/2): it
//                   stays at c·base_lr past T
//   OneCycle:       cycle_min_lr → cycle_max_lr → cycle_min_lr over the two step sizes (position
//                   (i + 1) in the cycle, floored to the stair counts when set), then
//                   min_lr / (1 + decay_lr_rate · (i - total + 1) / decay_step_size)
//   LRRangeTest:    min_lr · (1 + rate · interval), interval = (i + 1) / step_size (floored when
//                   staircase)
// At i = -1 (before the first step) it is the lr DeepSpeed's constructor leaves in the optimizer:
// warmup_min_lr for WarmupLR and WarmupDecayLR, 0 for WarmupCosineLR, cycle_min_lr for OneCycle,
// lr_range_test_min_lr for LRRangeTest. So DeepSpeed's first two optimizer steps of the warmup
// family both run at warmup_min_lr, and WarmupCosineLR's first one at lr 0.
// `base_lr` is the optimizer's lr (WarmupCosineLR scales it; the warmup family ignores it).
// Throws zero::Error for type kNone.
double schedule_lr(const config::SchedulerConfig& options, double base_lr,
                   std::int64_t last_batch_iteration);

// OneCycle's beta1 at `last_batch_iteration` when cycle_momentum is on.
double one_cycle_beta1(const config::SchedulerConfig& options, std::int64_t last_batch_iteration);

// A stateful schedule over schedule_lr(), starting at last_batch_iteration -1: its lr() is the
// lr the next optimizer step runs with (schedule_lr at the current iteration; see i = -1 above);
// step() advances after each optimizer step, as DeepSpeed's engine calls lr_scheduler.step().
// beta1() is OneCycle's cycled momentum (cycle_min_mom before the first step). Type kNone (no
// "scheduler" section) gives nullptr: the engine then runs at the optimizer's lr.
std::unique_ptr<LrSchedule> make_lr_schedule(const config::SchedulerConfig& options,
                                             double base_lr);

}  // namespace zero::optim
