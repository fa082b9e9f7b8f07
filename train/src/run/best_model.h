// --metric_for_best_model / --load_best_model_at_end (internal to zero::train): the best
// checkpoint as Hugging Face's Trainer chooses it at each save, and its rotation of checkpoints,
// which keeps the best one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "zero/train/arguments.h"
#include "zero/train/run_types.h"

namespace zero::train::detail {

// trainer_state.json's best_metric, best_model_checkpoint and (5.x) best_global_step.
struct BestModel {
  std::optional<double> metric;
  std::string checkpoint;  // output_dir/checkpoint-N, as Hugging Face writes it
  std::int64_t step = 0;
};

// The best model a checkpoint's trainer_state.json records (none when it has no best_metric).
BestModel best_model_from_state(const nlohmann::json& state);

// The evaluation key the metric names ("loss" -> "eval_loss"); throws InputError when the task's
// evaluations have no such metric (causal-lm: eval_loss; text-classification: eval_loss,
// eval_accuracy), naming the ones they have.
std::string checked_best_metric_key(const TrainingArguments& arguments);

// Trainer._save_checkpoint: the checkpoint saved at `step` becomes the best when `evaluation` (the
// evaluation of that step) beats the best so far by greater_is_better_for(); false when no metric
// is tracked or it is not better.
bool update_best(BestModel& best, const TrainingArguments& arguments, const LogEntry& evaluation,
                 const std::filesystem::path& checkpoint, std::int64_t step);

// Trainer._rotate_checkpoints (rank 0): of output_dir's checkpoint-N folders by N, the best one
// moved to the second newest place, the oldest removed until save_total_limit remain (two when
// the limit is 1 and the newest is not the best); the one `latest` names is kept. limit < 1 or
// no folder beyond it: none removed. Returns the folders removed.
std::vector<std::filesystem::path> rotate_keeping_best(const std::filesystem::path& output_dir,
                                                       std::int64_t save_total_limit,
                                                       const std::string& best_checkpoint);

}  // namespace zero::train::detail
