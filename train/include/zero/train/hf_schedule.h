// Hugging Face's learning-rate schedules by name, for a run whose DeepSpeed config has no
// "scheduler" section.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "zero/engine/optimizer.h"

namespace zero::train {

// Hugging Face's schedules by --lr_scheduler_type (linear, cosine, cosine_with_restarts with one
// cycle, polynomial to lr_end 1e-7 with power 1, constant, constant_with_warmup, inverse_sqrt):
// lr = base × λ(k) at optimizer step k, as transformers' get_scheduler (LambdaLR) with its
// defaults; checked against transformers itself (tests/train/hf_schedule_golden_test.cc). The
// trainer runs one when the DeepSpeed config has no "scheduler" section, as Hugging Face's Trainer
// does. Throws zero::Error naming the known types.
std::unique_ptr<LrSchedule> make_hf_schedule(std::string_view type, double base_lr,
                                             std::int64_t warmup_steps, std::int64_t total_steps);

}  // namespace zero::train
