// When the loop logs, evaluates and saves (loop_schedule.h).
#include "run/loop_schedule.h"

namespace zero::train::detail {

LoopSchedule::LoopSchedule(const TrainingArguments& arguments, std::int64_t steps_per_epoch,
                           std::int64_t total_steps, bool epoch_evaluations)
    : arguments_(arguments),
      steps_per_epoch_(steps_per_epoch),
      total_steps_(total_steps),
      eval_steps_(arguments.eval_steps > 0 ? arguments.eval_steps : arguments.logging_steps),
      epoch_evaluations_(epoch_evaluations) {}

bool LoopSchedule::logs_at(std::int64_t step) const {
  if (arguments_.logging_first_step && step == 1) return true;
  switch (arguments_.logging_strategy) {
    case IntervalStrategy::kNo: return false;
    case IntervalStrategy::kSteps:
      return step % arguments_.logging_steps == 0 || step == total_steps_;
    case IntervalStrategy::kEpoch: return step % steps_per_epoch_ == 0 || step == total_steps_;
  }
  return false;
}

bool LoopSchedule::evaluates_at(std::int64_t step) const {
  if (!arguments_.do_eval) return false;
  const bool epoch_end = step % steps_per_epoch_ == 0;
  const bool by_epoch = arguments_.eval_strategy == IntervalStrategy::kEpoch;
  const double reached = by_epoch
                             ? static_cast<double>(step) / static_cast<double>(steps_per_epoch_)
                             : static_cast<double>(step);
  if (reached < arguments_.eval_delay) return false;
  return (arguments_.eval_strategy == IntervalStrategy::kSteps && step % eval_steps_ == 0) ||
         ((by_epoch || epoch_evaluations_) && epoch_end);
}

bool LoopSchedule::saves_at(std::int64_t step) const {
  return (arguments_.save_strategy == IntervalStrategy::kSteps &&
          step % arguments_.save_steps == 0) ||
         (arguments_.save_strategy == IntervalStrategy::kEpoch && step % steps_per_epoch_ == 0);
}

}  // namespace zero::train::detail
