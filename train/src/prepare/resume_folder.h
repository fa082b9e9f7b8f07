// Which checkpoint a run resumes from (internal to zero::train): --resume_from_checkpoint, or
// run_clm's automatic resume from a non-empty output_dir; decided before output_dir is touched.
#pragma once

#include <filesystem>
#include <optional>

#include "zero/train/arguments.h"

namespace zero::train::detail {

// The trainer's own state in a checkpoint folder (checkpointing.h writes it).
inline constexpr const char* kTrainerStateFile = "zero_trainer_state.json";

// The checkpoint folder to resume from, or none: --resume_from_checkpoint PATH (a checkpoint
// folder, or an output_dir: its `latest`), "latest"/"True" (output_dir's), or, as run_clm does,
// output_dir's newest complete checkpoint when output_dir is not empty, --do_train is on and
// --overwrite_output_dir is off. Throws InputError naming the path when it holds none.
std::optional<std::filesystem::path> resume_folder(const TrainingArguments& arguments);

// Throws the InputError that refuses to resume from `folder`, saved with --save_only_model.
[[noreturn]] void refuse_model_only(const std::filesystem::path& folder);

}  // namespace zero::train::detail
