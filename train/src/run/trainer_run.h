// The Trainer: one rank's run of zero::train::train (trainer.cc: construction, the engine, logs,
// evaluation, saves; trainer_loop.cc: the training loop and its checkpoints; trainer_finish.cc:
// the final evaluation, model and result files). Private to train/src/run.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/console.h"
#include "kind/prepared.h"
#include "plan/phase_memory.h"
#include "run/best_model.h"
#include "run/checkpointing.h"
#include "run/loop_schedule.h"
#include "run/preemption.h"
#include "run/step_breakdown.h"
#include "task/micro_batch.h"
#include "task/task.h"
#include "task/trainer_progress.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/swap_store.h"
#include "zero/engine/engine.h"
#include "zero/text/sampler.h"
#include "zero/train/monitors.h"
#include "zero/train/run_config.h"
#include "zero/train/run_types.h"

namespace zero::train::detail {

// One rank's run of train(), every rank constructing and running one with the same arguments.
// Construction takes the rank's device context (made by train()), checks every input (prepare(),
// the checkpoint to resume) and writes nothing; run() builds the engine and the task, trains with
// logs, evaluations and checkpoints, and writes the final model and the result files.
class Trainer {
 public:
  Trainer(const RunConfig& run, Communicator& communicator, std::unique_ptr<DeviceContext> device,
          const RunOptions& options);
  TrainResult run();

 private:
  void build_engine();
  void print_run() const;
  void print_memory() const;
  void open_logs();
  void record(const LogEntry& logged);
  void log_line(const nlohmann::json& line);
  void evaluate(std::int64_t step);
  // The model (weights in `dtype`), the tokenizer and trainer_state.json.
  void save(const fs::path& folder, std::int64_t step, DType dtype = DType::kFloat32);
  nlohmann::json trainer_state(std::int64_t step) const;

  bool train();  // false: preempted (a checkpoint saved, result_ set)
  std::int64_t resume_training();
  double train_step(std::int64_t step);
  void log_step(std::int64_t step);
  void load_best_model();
  void save_resumable(std::int64_t step);
  void stop_preempted(std::int64_t step);

  TrainResult finish();
  void write_results(const nlohmann::json& test_results);

  const RunConfig& run_;
  const TrainingArguments& arguments_;
  Communicator& communicator_;
  const RunOptions options_;
  const Clock::time_point run_start_;
  const int rank_, world_;
  const Console console_;
  Prepared prepared_;
  const RunShape shape_;
  std::optional<Resumed> resume_;
  // SIGTERM/SIGUSR1 while training, until the run returns (an evaluation-only run keeps the
  // process's own handlers).
  std::optional<PreemptionHandlers> preemption_;
  std::int64_t preempt_test_step_ = -1;
  const fs::path output_dir_;
  const std::int64_t B_, T_, accumulation_, total_steps_, steps_per_epoch_, warmup_;
  const std::int64_t samples_per_step_;
  const TokensSeen tokens_seen_;  // --include_num_input_tokens_seen

  // The rank's device, the engine on it, the task's model on the engine (destroyed in reverse).
  std::unique_ptr<DeviceContext> device_;
  std::unique_ptr<Engine> engine_;
  std::string schedule_name_;
  std::unique_ptr<Task> task_;
  std::optional<LoopSchedule> schedule_;

  // The run's memory plan and each phase's measured peak; Scope(memory(), phase) marks a phase.
  std::optional<RunMemory> memory_;
  RunMemory* memory() { return memory_ ? &*memory_ : nullptr; }

  TrainResult result_;
  nlohmann::json log_history_ = nlohmann::json::array();  // rank 0: trainer_state.json's
  std::ofstream metrics_;                                 // rank 0: metrics.jsonl
  std::unique_ptr<Monitors> monitors_;
  MemoryLedger save_ledger_;  // the model --num_samples loads back on rank 0
  HostAllocator save_allocator_{save_ledger_};

  // What a checkpoint saves besides the engine, kept current step by step; the sampler's and the
  // task reader's positions are read from them at each save.
  TrainerProgress progress_;
  std::optional<text::DistributedSampler> sampler_;
  MicroBatch batch_;
  Clock::time_point window_start_;  // of the current logging window
  StepBreakdown breakdown_;         // DeepSpeed's wall_clock_breakdown
  SwapTraffic window_traffic_;      // the engine's swap traffic at its start
  std::optional<LogEntry> last_evaluation_;
  std::int64_t last_eval_step_ = -1;
  BestModel best_;  // --metric_for_best_model / --load_best_model_at_end
  double eval_runtime_ = 0.0, train_runtime_ = 0.0;
};

}  // namespace zero::train::detail
