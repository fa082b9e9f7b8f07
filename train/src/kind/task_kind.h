// What a task is before its model exists (internal to zero::train): the rules of its flags, how
// prepare() reads and encodes its data, the metrics its evaluation logs and whether the memory
// planner models its runs. task_kind() is the one place that chooses from --task; the rest of
// zero::train asks the TaskKind it is given, never which task runs (causal LM: lm_task_kind.cc;
// text classification: classification_task_kind.cc). The Task that trains a kind is made above it
// (make_task, task/task.h).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "zero/text/bpe_trainer.h"
#include "zero/train/arguments.h"
#include "zero/train/classification_data.h"

namespace zero::train::detail {

struct Prepared;

// The data files by split (--train_file, --validation_file, --test_file, or --dataset_name's),
// each present, non-empty and text.
struct DataFiles {
  std::vector<std::string> train, validation, test;
};

// What a task reads of its data files before the tokenizer exists: the files as the tokenizer
// trainer and the token datasets read them (causal LM: CSV converted to JSON Lines), or the
// labelled examples by split (text classification).
struct TaskSources {
  std::vector<std::filesystem::path> train_paths, validation_paths;
  std::vector<LabelledText> train, validation, test;
};

// Where prepare() runs: the world, this rank, and whether it draws progress bars (rank 0 of a
// console run with its lines on stdout).
struct PrepareScope {
  int world = 1;
  int rank = 0;
  bool console = false;
};

class TaskKind {
 public:
  virtual ~TaskKind() = default;

  // --task's value, e.g. "causal-lm".
  virtual std::string_view name() const = 0;
  // The flags this task refuses or needs beyond check_arguments' own; throws zero::Error naming
  // the flag.
  virtual void check_arguments(const TrainingArguments& arguments) const = 0;
  // The metrics its evaluation logs, eval_loss first (what --metric_for_best_model may name).
  virtual std::vector<std::string> evaluation_metrics() const = 0;
  // Whether zero's memory planner models its runs (--dry_run, zero estimate, a run's plan).
  virtual bool planned() const = 0;

  // prepare(), in order. Its data read before the tokenizer (CSV files converted into `scratch`).
  virtual TaskSources read_sources(const TrainingArguments& arguments, const DataFiles& files,
                                   const std::filesystem::path& scratch) const = 0;
  // What of --model_name_or_path's config.json is the task's own (a classifier's head).
  virtual void load_checkpoint_config(const std::filesystem::path& /*folder*/,
                                      Prepared& /*prepared*/) const {}
  // The training texts a learned tokenizer is trained on; throws InputError when there are none.
  virtual void add_tokenizer_texts(const TaskSources& sources, text::BpeTrainer& trainer) const = 0;
  // Its splits tokenized into `prepared` (block_size, train_blocks, eval_blocks and its own data),
  // after the model config and the tokenizer; throws InputError naming the flag or split.
  virtual void prepare_data(const TrainingArguments& arguments, const DataFiles& files,
                            const TaskSources& sources, const PrepareScope& scope,
                            Prepared& prepared) const = 0;
};

// The task `name` (--task): "causal-lm" or "text-classification"; anything else a zero::Error
// naming both.
const TaskKind& task_kind(std::string_view name);

// The causal LM's (lm_task_kind.cc) and the text classification's (classification_task_kind.cc).
const TaskKind& lm_task_kind();
const TaskKind& classification_task_kind();

}  // namespace zero::train::detail
