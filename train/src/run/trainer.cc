// zero::train::train: run_clm on the engine, as one rank's Trainer over a Task (task.h); the
// Trainer's construction, engine, logs and saves (its loop: trainer_loop.cc; its end:
// trainer_finish.cc).
// Everything that can be wrong with the input is checked on every rank (prepare.h) before rank 0
// writes the first byte to output_dir.
#include "zero/train/trainer.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "config/console.h"
#include "config/engine_setup.h"
#include "plan/auto_batch_size.h"
#include "plan/phase_memory.h"
#include "prepare/prepare.h"
#include "run/best_model.h"
#include "run/checkpointing.h"
#include "run/loop_schedule.h"
#include "run/preemption.h"
#include "run/rank_device.h"
#include "run/run_outputs.h"
#include "run/step_breakdown.h"
#include "run/trainer_run.h"
#include "task/micro_batch.h"
#include "task/task.h"
#include "zero/comm/host_collectives.h"
#include "zero/config/ds_config.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/engine.h"
#include "zero/engine/memory_formula.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/family.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"
#include "zero/text/sampler.h"
#include "zero/train/monitors.h"

namespace zero::train {

namespace detail {

using nlohmann::json;

Trainer::Trainer(const RunConfig& run, Communicator& communicator,
                 std::unique_ptr<DeviceContext> device, const RunOptions& options)
    : run_(run),
      arguments_(run.arguments),
      communicator_(communicator),
      options_(options),
      run_start_(Clock::now()),
      rank_(communicator.rank()),
      world_(communicator.world_size()),
      console_(options.print && rank_ == 0, options.print_line),
      prepared_(prepare(run, rank_, console_)),
      shape_(run_shape(arguments_, prepared_, world_)),
      output_dir_(arguments_.output_dir),
      B_(arguments_.per_device_train_batch_size),
      T_(prepared_.block_size),
      accumulation_(prepared_.deepspeed.config.gradient_accumulation_steps),
      total_steps_(prepared_.total_steps),
      steps_per_epoch_(prepared_.steps_per_epoch),
      warmup_(warmup_steps_for(arguments_, total_steps_)),
      samples_per_step_(B_ * world_ * accumulation_),
      tokens_seen_(tokens_seen_of(arguments_)),
      device_(std::move(device)),
      breakdown_(prepared_.deepspeed.config.wall_clock_breakdown, *device_) {
  checked_best_metric_key(arguments_);
  if (const std::optional<fs::path> folder = resume_folder(arguments_))  // checked, nothing written
    resume_ = check_resume(*folder, prepared_.model_config, shape_);
  if (arguments_.do_train) preemption_.emplace(options.stop_on_interrupt);
  // Test hook: rank 0 signals itself (SIGUSR1) after this step, as Slurm's --signal would.
  if (const char* preempt_test = std::getenv("ZERO_TEST_PREEMPT_AT_STEP"))
    preempt_test_step_ = std::atoll(preempt_test);
}

TrainResult Trainer::run() {
  // Planned, checked against the node and refused if a phase cannot fit, before any allocation.
  memory_.emplace(run_, prepared_, resume_.has_value(), *device_, console_);
  // Every rank has checked everything before rank 0 writes anything.
  host_barrier(communicator_, "zero::train inputs checked");
  if (rank_ == 0) fs::create_directories(output_dir_);
  for (const std::string& warning : prepared_.deepspeed.warnings)
    console_.say("config: %s\n", warning.c_str());
  for (const std::string& warning : prepared_.engine.warnings)
    console_.say("config: %s\n", warning.c_str());
  build_engine();
  task_ = make_task({arguments_, prepared_, *engine_, communicator_, console_});
  schedule_.emplace(arguments_, steps_per_epoch_, total_steps_, task_->evaluates_every_epoch());
  // The checkpoint's shards and engine state, before rank 0 rewrites any log file.
  if (resume_) load_resume(*resume_, *engine_);
  print_run();
  print_memory();
  open_logs();
  if (arguments_.do_train && !train()) return std::move(result_);
  return finish();
}

// The rank's engine on device_: the DeepSpeed config's optimizer, and its schedule or, with no
// "scheduler" section, Hugging Face's --lr_scheduler_type.
void Trainer::build_engine() {
  const EngineOptions& options = prepared_.engine.options;
  std::unique_ptr<LrSchedule> schedule =
      options.scheduler.type == config::SchedulerType::kNone
          ? make_hf_schedule(arguments_.lr_scheduler_type, options.optimizer.lr, warmup_,
                             total_steps_)
          : optim::make_lr_schedule(options.scheduler, options.optimizer.lr);
  schedule_name_ = schedule->name();
  engine_ = make_engine(options, communicator_,
                        {.context = device_.get(), .schedule = std::move(schedule)});
}

void Trainer::print_run() const {
  const gpt2::GPT2Config& model = prepared_.model_config;
  const EngineOptions& options = prepared_.engine.options;
  task_->print_task();
  console_.say(
      "model: %s %s, %lld layers, %lld heads, width %lld, vocabulary %lld, context %lld: "
      "%.2fM parameters\n",
      std::string(gpt2::name_of(model.family)).c_str(),
      prepared_.pretrained ? arguments_.model_name_or_path.c_str() : "(from scratch)",
      static_cast<long long>(model.n_layer), static_cast<long long>(model.n_head),
      static_cast<long long>(model.n_embd), static_cast<long long>(model.vocab_size),
      static_cast<long long>(model.n_positions), static_cast<double>(model.num_parameters()) / 1e6);
  task_->print_data();
  console_.say(
      "engine: ZeRO stage %d, %d rank(s), %s lr %g (schedule %s, warmup %lld), clip %g, batch %lld "
      "= %lld per rank x %d x %lld accumulation; %lld steps (%.3g epochs)\n",
      options.stage, world_, std::string(config::name_of(options.optimizer.type)).c_str(),
      options.optimizer.lr, schedule_name_.c_str(), static_cast<long long>(warmup_),
      options.gradient_clipping,
      static_cast<long long>(prepared_.deepspeed.config.train_batch_size),
      static_cast<long long>(B_), world_, static_cast<long long>(accumulation_),
      static_cast<long long>(total_steps_), epoch_at(total_steps_, steps_per_epoch_));
}

void Trainer::print_memory() const {
  console_.say("%s\n", memory_line(prepared_.engine.options, *engine_, world_).c_str());
}

void Trainer::open_logs() {
  if (rank_ != 0) return;
  metrics_.open(output_dir_ / "metrics.jsonl", std::ios::trunc);
  monitors_ = std::make_unique<Monitors>(prepared_.deepspeed.config.csv_monitor,
                                         prepared_.deepspeed.config.tensorboard, output_dir_,
                                         report_to_folder(arguments_));
}

// Into the result's log history on every rank; on rank 0 also log_line, and the DeepSpeed monitors
// the config enables (by samples seen, under its engine's names).
void Trainer::record(const LogEntry& logged) {
  LogEntry entry = logged;
  if (tokens_seen_ != TokensSeen::kNo && !entry.num_input_tokens_seen)
    entry.num_input_tokens_seen = static_cast<double>(progress_.input_tokens_seen);
  result_.log_history.push_back(entry);
  if (options_.on_log) options_.on_log(entry);
  if (rank_ != 0) return;
  const json line = entry_to_json(entry);
  log_line(line);
  metrics_ << line.dump() << "\n";
  metrics_.flush();
  const std::int64_t samples = entry.step * samples_per_step_;
  if (entry.loss) monitors_->write("Train/Samples/train_loss", *entry.loss, samples);
  if (entry.learning_rate) monitors_->write("Train/Samples/lr", *entry.learning_rate, samples);
  if (entry.loss_scale) monitors_->write("Train/Samples/loss_scale", *entry.loss_scale, samples);
  if (entry.eval_loss) monitors_->write("Eval/Samples/eval_loss", *entry.eval_loss, samples);
  if (entry.perplexity) monitors_->write("Eval/Samples/perplexity", *entry.perplexity, samples);
}

// Rank 0: one log_history line (trainer_state.json's) and --report_to's copy of its numbers, as
// Hugging Face's TensorBoardCallback writes its logs: each against the line's global step.
void Trainer::log_line(const json& line) {
  log_history_.push_back(line);
  const std::int64_t step = line.value("step", std::int64_t{0});
  for (const auto& [key, value] : line.items())
    if (key != "step" && value.is_number()) monitors_->report(key, value.get<double>(), step);
}

void Trainer::evaluate(std::int64_t step) {
  engine_->wait_for_step();  // an overlapped optimizer step ends in the train phase
  const RunMemory::Scope phase(memory(), Phase::kEvaluation);
  const Evaluation evaluation = task_->evaluate(step);
  record(evaluation.entry);
  last_evaluation_ = evaluation.entry;
  eval_runtime_ = evaluation.seconds;
  last_eval_step_ = step;
}

json Trainer::trainer_state(std::int64_t step) const {
  json state = {{"num_input_tokens_seen", progress_.input_tokens_seen}};
  if (best_.metric) {
    state["best_metric"] = *best_.metric;
    state["best_global_step"] = best_.step;
    state["best_model_checkpoint"] = best_.checkpoint;
  }
  return hf_trainer_state(arguments_, step, steps_per_epoch_, total_steps_, B_, log_history_,
                          state);
}

// The Hugging Face folder (all ranks): the task's model files, streamed one unit at a time; rank 0
// adds the tokenizer and trainer_state.json.
void Trainer::save(const fs::path& folder, std::int64_t step, DType dtype) {
  task_->save_model(folder, dtype);
  if (rank_ != 0) return;
  save_tokenizer(prepared_, folder);
  write_json(folder / "trainer_state.json", trainer_state(step));
}

}  // namespace detail

using namespace detail;

TrainResult train(const RunConfig& run, Communicator& communicator, const RunOptions& options) {
  const Console console(options.print && communicator.rank() == 0, options.print_line);
  const bool recompute_auto = run.arguments.recompute_blocks == "auto";
  std::string note;             // before anything is allocated
  if (run.arguments.dry_run) {  // the memory plan of this run, nothing allocated (plan.cc)
    TrainResult planned;
    const RunConfig fitted = recompute_auto ? fit_recompute_blocks_planned(run, note) : run;
    if (recompute_auto) console.say("%s\n", note.c_str());
    planned.plan = dry_run(fitted, options.print && communicator.rank() == 0, options.print_line);
    return planned;
  }
  if (run.world_size != communicator.world_size())
    throw InputError("the run was configured for " + std::to_string(run.world_size) +
                     " ranks; the communicator has " + std::to_string(communicator.world_size()));
  std::unique_ptr<DeviceContext> device =
      make_rank_device_context(run.arguments, communicator, options);
  RunConfig fitted = run;
  if (recompute_auto) {  // the blocks first: the batch is then fitted with them recomputed
    fitted = fit_recompute_blocks(fitted, communicator, *device, note);
    console.say("%s\n", note.c_str());
  }
  if (fitted.arguments.auto_find_batch_size) {
    fitted = fit_batch_size(fitted, communicator, *device, note);
    console.say("%s\n", note.c_str());
  }
  return Trainer(fitted, communicator, std::move(device), options).run();
}

TrainResult train(const TrainingArguments& arguments, Communicator& communicator,
                  const RunOptions& options) {
  const bool planned = arguments.dry_run && arguments.world_size > 0;
  return train(make_run_config(arguments, planned ? static_cast<int>(arguments.world_size)
                                                  : communicator.world_size()),
               communicator, options);
}

}  // namespace zero::train
