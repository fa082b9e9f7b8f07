// When the training loop logs, evaluates and saves (internal to zero::train): Hugging Face's
// DefaultFlowCallback over --logging_strategy, --eval_strategy and --save_strategy, decided here
// and nowhere else.
#pragma once

#include <cstdint>

#include "zero/train/arguments.h"

namespace zero::train::detail {

class LoopSchedule {
 public:
  // `epoch_evaluations`: the task validates at every epoch's end whatever --eval_strategy says.
  LoopSchedule(const TrainingArguments& arguments, std::int64_t steps_per_epoch,
               std::int64_t total_steps, bool epoch_evaluations);

  // --logging_strategy's steps (and the last one) or epoch ends (and the last step); none for
  // "no"; step 1 too with --logging_first_step.
  bool logs_at(std::int64_t step) const;
  // With --do_eval: every eval_steps (default logging_steps) or at epoch ends, from --eval_delay
  // on (steps for the steps strategy, epochs for the epoch strategy).
  bool evaluates_at(std::int64_t step) const;
  bool saves_at(std::int64_t step) const;

 private:
  const TrainingArguments& arguments_;
  std::int64_t steps_per_epoch_, total_steps_, eval_steps_;
  bool epoch_evaluations_;
};

}  // namespace zero::train::detail
