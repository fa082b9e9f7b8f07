// zero::train's run types: what a run logs (LogEntry), returns (TrainResult) and is told
// (RunOptions), and the InputError it throws for bad input.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/train/classification_metrics.h"
#include "zero/train/input_error.h"
#include "zero/train/plan.h"

namespace zero::train {

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
  std::optional<double> eval_accuracy;  // text-classification: single-label
  std::optional<double> eval_mse;       // text-classification: regression
  std::optional<double> eval_f1;        // text-classification: multi-label (micro F1)
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
  // With print: rank 0's log lines (each ending in "\n") go here instead of stdout, and no
  // progress bar is drawn (the Python module: sys.stdout, which a notebook shows).
  std::function<void(std::string_view text)> print_line = {};
  // Each log entry as it enters TrainResult::log_history (every logging step, evaluation and
  // task entry), on every rank, on the calling thread. What it throws ends the run (on every rank
  // it throws on: a multi-rank run must throw on all ranks or none).
  std::function<void(const LogEntry& entry)> on_log = {};
  // SIGINT (Ctrl-C) stops the run as SIGTERM does (the Python module, `zero.train`).
  bool stop_on_interrupt = false;
  // The rank's device context for `device`, the device train() chose (choose_device: --use_cpu,
  // LOCAL_RANK, the visible GPUs); empty: make_device_context(device). For a backend of one's
  // own, or a test double that watches where buffers live (tests/train/trainer_device_test.cc).
  // Called once per train(), on the calling thread, before any collective; the context must be
  // on `device` (train() checks it), and train() destroys it before it returns.
  std::function<std::unique_ptr<DeviceContext>(const Device& device)> make_device_context = {};
};

}  // namespace zero::train
