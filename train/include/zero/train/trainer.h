// zero::train: Hugging Face run_clm's training and evaluation of GPT-2 on zero's engine, shared by
// `zero train`, the demo and C++ callers. One call runs what the arguments ask for on every rank
// of `communicator`: tokenizer, data, engine from the DeepSpeed config, training with logging,
// evaluation and checkpoints, the final Hugging Face checkpoint and the result files.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/engine/optimizer.h"
#include "zero/train/arguments.h"
#include "zero/train/classification_metrics.h"
#include "zero/train/plan.h"

namespace zero::train {

// A bad input found before anything is written to output_dir: a missing, empty or binary data
// file, a block_size larger than the model's n_positions, a DeepSpeed config that contradicts a
// flag, an existing non-empty output_dir without --overwrite_output_dir, ... Every rank throws
// the same one; `zero train` prints it and exits 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& message) : Error(message) {}
};

// One training log (every logging_steps) or evaluation, as in trainer_state.json's log_history.
struct LogEntry {
  std::int64_t step = 0;
  double epoch = 0.0;
  std::optional<double> loss;  // mean training loss over the steps since the previous log
  std::optional<double> learning_rate;
  std::optional<double> grad_norm;
  std::optional<double> loss_scale;
  std::optional<double> tokens_per_second;
  std::optional<double> eval_loss;
  std::optional<double> perplexity;
  std::optional<double> eval_accuracy;  // text-classification
  // text-classification, at an epoch's end: the epoch's mean training loss and accuracy.
  std::optional<double> epoch_train_loss;
  std::optional<double> train_accuracy;
  // --include_num_input_tokens_seen: the tokens every rank has trained on so far, padding
  // included (Hugging Face's count of input_ids).
  std::optional<double> num_input_tokens_seen;
};

struct TrainResult {
  std::int64_t global_step = 0;
  double epoch = 0.0;
  std::optional<double> train_loss;     // mean over all steps
  std::optional<double> eval_loss;      // the final evaluation's
  std::optional<double> eval_accuracy;  // text-classification: the final evaluation's
  std::vector<LogEntry> log_history;
  // text-classification with do_predict: the test split's report (also in test_results.json).
  std::optional<ClassificationReport> test_report;
  std::optional<double> test_loss;
  // SIGTERM/SIGUSR1 (or SIGINT with RunOptions::stop_on_interrupt) stopped the run at global_step:
  // a checkpoint was saved there; the final evaluation, model and result files were skipped.
  bool preempted = false;
  // This rank's ledger peaks over the run, final save included (the planner's plan's check).
  std::optional<MemoryPeaks> memory;
  // --dry_run: the plans (dry_run() in plan.h); nothing else ran.
  std::vector<RankPlan> plan;
  // Each phase the run entered: the process's measured resident peak (VmHWM, reset at each
  // phase's start; the largest over the ranks) beside the plan's resident bytes for it (rank 0's
  // plan, baseline included). Empty for a preempted run or where the run was not planned.
  struct PhaseMemory {
    Phase phase = Phase::kLoad;
    std::int64_t measured_peak_bytes = 0;
    std::int64_t planned_bytes = 0;
  };
  std::vector<PhaseMemory> phase_memory;
};

struct RunOptions {
  bool print = true;  // log lines on stdout and progress bars on stderr (rank 0)
  // SIGINT (Ctrl-C) stops the run as SIGTERM does (the Python module, `zero.train`).
  bool stop_on_interrupt = false;
  // The rank's device context for `device`, the device train() chose (choose_device: --use_cpu,
  // LOCAL_RANK, the visible GPUs); empty: make_device_context(device). For a backend of one's
  // own, or a test double that watches where buffers live (tests/train/trainer_device_test.cc).
  // Called once per train(), on the calling thread, before any collective; the context must be
  // on `device` (train() checks it), and train() destroys it before it returns.
  std::function<std::unique_ptr<DeviceContext>(const Device& device)> make_device_context = {};
};

// Runs on every rank of `communicator` (all ranks, same arguments), on the rank's device context
// (options.make_device_context). Every collective of the run, the trainer's host values included,
// takes buffers of that context's device allocator, so `communicator.buffers()` must be the
// device's kind; none is still queued when it returns. Throws InputError for bad input (before
// output_dir is touched) and zero::Error for failures while running. While it runs, SIGTERM and
// SIGUSR1 (and SIGINT with options.stop_on_interrupt) make every rank finish the step, save a
// checkpoint and return with `preempted` set; a second signal exits the process at once with
// 128 + the signal (the previous handlers are back when it returns).
TrainResult train(const TrainingArguments& arguments, Communicator& communicator,
                  const RunOptions& options = {});

// Hugging Face's schedules by --lr_scheduler_type (linear, cosine, cosine_with_restarts with one
// cycle, polynomial to lr_end 1e-7 with power 1, constant, constant_with_warmup, inverse_sqrt):
// lr = base × λ(k) at optimizer step k, as transformers' get_scheduler (LambdaLR) with its
// defaults; checked against transformers itself (tests/train/hf_schedule_golden_test.cc). The
// trainer runs one when the DeepSpeed config has no "scheduler" section, as Hugging Face's Trainer
// does. Throws zero::Error naming the known types.
std::unique_ptr<LrSchedule> make_hf_schedule(std::string_view type, double base_lr,
                                             std::int64_t warmup_steps, std::int64_t total_steps);

}  // namespace zero::train
