// zero::train::train: run_clm on the engine, as one rank's Trainer over a Task (task.h).
// Everything that can be wrong with the input is checked on every rank (prepare.h) before rank 0
// writes the first byte to output_dir.
#include "zero/train/trainer.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/console.h"
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
#include "zero/gpt2/model.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"
#include "zero/text/progress.h"
#include "zero/text/sampler.h"
#include "zero/train/monitors.h"

namespace zero::train {

namespace {

using namespace detail;
using nlohmann::json;

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
  void evaluate(std::int64_t step);
  void save(const fs::path& folder, std::int64_t step);
  json trainer_state(std::int64_t step) const;

  bool train();  // false: preempted (a checkpoint saved, result_ set)
  std::int64_t resume_training();
  double train_step(std::int64_t step);
  void log_step(std::int64_t step);
  void load_best_model();
  void save_resumable(std::int64_t step);
  void stop_preempted(std::int64_t step);

  TrainResult finish();
  void write_results(const json& test_results);

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
  json log_history_ = json::array();  // rank 0: trainer_state.json's
  std::ofstream metrics_;             // rank 0: metrics.jsonl
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

Trainer::Trainer(const RunConfig& run, Communicator& communicator,
                 std::unique_ptr<DeviceContext> device, const RunOptions& options)
    : run_(run),
      arguments_(run.arguments),
      communicator_(communicator),
      options_(options),
      run_start_(Clock::now()),
      rank_(communicator.rank()),
      world_(communicator.world_size()),
      console_(options.print && rank_ == 0),
      prepared_(prepare(run, rank_, options.print)),
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
      "model: GPT-2 %s, %lld layers, %lld heads, width %lld, vocabulary %lld, context %lld: "
      "%.2fM parameters\n",
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
                                         prepared_.deepspeed.config.tensorboard, output_dir_);
}

// Into the result's log history on every rank; on rank 0 also metrics.jsonl, trainer_state.json's
// log history and the DeepSpeed monitors (by samples seen).
void Trainer::record(const LogEntry& logged) {
  LogEntry entry = logged;
  if (tokens_seen_ != TokensSeen::kNo && !entry.num_input_tokens_seen)
    entry.num_input_tokens_seen = static_cast<double>(progress_.input_tokens_seen);
  result_.log_history.push_back(entry);
  if (rank_ != 0) return;
  const json line = entry_to_json(entry);
  log_history_.push_back(line);
  metrics_ << line.dump() << "\n";
  metrics_.flush();
  const std::int64_t samples = entry.step * samples_per_step_;
  if (entry.loss) monitors_->write("Train/Samples/train_loss", *entry.loss, samples);
  if (entry.learning_rate) monitors_->write("Train/Samples/lr", *entry.learning_rate, samples);
  if (entry.loss_scale) monitors_->write("Train/Samples/loss_scale", *entry.loss_scale, samples);
  if (entry.eval_loss) monitors_->write("Eval/Samples/eval_loss", *entry.eval_loss, samples);
  if (entry.perplexity) monitors_->write("Eval/Samples/perplexity", *entry.perplexity, samples);
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
void Trainer::save(const fs::path& folder, std::int64_t step) {
  task_->save_model(folder);
  if (rank_ != 0) return;
  save_tokenizer(prepared_, folder);
  write_json(folder / "trainer_state.json", trainer_state(step));
}

bool Trainer::train() {
  sampler_.emplace(text::SamplerOptions{
      .num_blocks = std::max<std::size_t>(prepared_.train_blocks, 1),
      .global_batch_size = static_cast<std::size_t>(B_ * world_),
      .world_size = world_,
      .rank = rank_,
      .seed = arguments_.data_seed >= 0 ? static_cast<std::uint64_t>(arguments_.data_seed)
                                        : arguments_.seed,
      .shuffle = arguments_.train_sampling_strategy != "sequential",
      .drop_last = arguments_.dataloader_drop_last});
  console_.say(
      "training: %lld steps of %lld samples; logging every %lld, %s evaluation, %s saves\n",
      static_cast<long long>(total_steps_), static_cast<long long>(samples_per_step_),
      static_cast<long long>(arguments_.logging_steps),
      task_->evaluates_every_epoch() && arguments_.do_eval &&
              arguments_.eval_strategy != IntervalStrategy::kSteps
          ? "epoch"
          : std::string(name_of(arguments_.eval_strategy)).c_str(),
      std::string(name_of(arguments_.save_strategy)).c_str());
  const std::int64_t first_step = resume_ ? resume_training() : 1;
  memory_->enter(Phase::kTrain);
  // Trainer.train(): --eval_on_start evaluates before the first step (logged at the step reached).
  if (arguments_.eval_on_start) evaluate(first_step - 1);
  window_start_ = Clock::now();
  window_traffic_ = engine_->swap_traffic();
  const Clock::time_point train_start = Clock::now();
  text::ProgressBar bar("train", static_cast<std::uint64_t>(total_steps_), "steps",
                        console_.enabled());
  for (std::int64_t step = first_step; step <= total_steps_; ++step) {
    const double loss = train_step(step);
    progress_.step = step;
    progress_.window_loss += loss;
    progress_.train_loss_sum += loss;
    ++progress_.window_steps;
    bar.add(1);
    if (schedule_->logs_at(step)) log_step(step);
    progress_.epoch_loss += loss;
    ++progress_.epoch_steps;
    if (schedule_->evaluates_at(step)) evaluate(step);
    const LogEntry* evaluation = last_eval_step_ == step ? &*last_evaluation_ : nullptr;
    if (const std::optional<LogEntry> entry = task_->end_step(step, evaluation, progress_))
      record(*entry);
    // Preemption: every rank agrees at this boundary, saves and leaves the loop.
    if (step == preempt_test_step_ && rank_ == 0) std::raise(SIGUSR1);
    const bool preempted = preemption_->agreed(communicator_, *device_);
    if (schedule_->saves_at(step) || preempted) save_resumable(step);
    if (preempted) {
      stop_preempted(step);
      return false;
    }
  }
  progress_.step = total_steps_;
  engine_->wait_for_step();  // the last optimizer step, overlapped: part of the training time
  bar.finish();
  train_runtime_ = seconds_since(train_start);
  if (arguments_.load_best_model_at_end && best_.metric) load_best_model();
  result_.train_loss =
      progress_.train_loss_sum / static_cast<double>(std::max<std::int64_t>(total_steps_, 1));
  return true;
}

// The data position, loss sums and logs so far from the checkpoint; returns the first step.
std::int64_t Trainer::resume_training() {
  const Resumed& resumed = *resume_;
  progress_ = resumed.progress;
  // --ignore_data_skip: the epoch reached starts over from its first batch (Hugging Face skips
  // no batch, only the epochs done).
  const std::uint64_t reached = static_cast<std::uint64_t>(progress_.step * accumulation_);
  const std::uint64_t position = arguments_.ignore_data_skip
                                     ? sampler_->epoch_of(reached) * sampler_->batches_per_epoch()
                                     : reached;
  sampler_->set_position({position});
  task_->seek_train_data(arguments_.ignore_data_skip ? 0 : progress_.stream_position);
  best_ = best_model_from_state(resumed.best);
  for (const json& line : resumed.log_history)
    if (line.contains("step") && line.value("step", std::int64_t{0}) <= progress_.step)
      record(entry_from_json(line));
  std::string changes;
  for (const std::string& note : resumed.notes) changes += "; " + note;
  console_.say("resumed from %s at step %lld (written by %d rank(s), stage %d, %s parameters%s)\n",
               resumed.folder.c_str(), static_cast<long long>(progress_.step),
               resumed.index.world_size, resumed.index.stage, resumed.index.param_dtype.c_str(),
               changes.c_str());
  return progress_.step + 1;
}

// Optimizer step `step` (1-based) over `accumulation_` micro-batches; the loss averaged over them
// and over the ranks.
double Trainer::train_step(std::int64_t step) {
  double step_loss = 0.0, tokens = 0.0;
  for (std::int64_t micro = 0; micro < accumulation_; ++micro) {
    const std::int64_t position = (step - 1) * accumulation_ + micro;
    breakdown_.begin();
    task_->next_train_batch(*sampler_, batch_);
    breakdown_.end(StepBreakdown::kData);
    tokens += static_cast<double>(batch_.input_tokens(tokens_seen_ == TokensSeen::kNonPadding, T_));
    // Dropout keyed by (optimizer step, sample within its global batch): the same masks whatever
    // the world size and accumulation that make up the global batch.
    const gpt2::DropoutKey dropout{
        .seed = arguments_.seed,
        .step = static_cast<std::uint64_t>(step - 1),
        .sample_offset = (position % accumulation_) * B_ * world_ + rank_ * B_,
        .training = true};
    step_loss += task_->train_micro_step(batch_, dropout, progress_);
    breakdown_.end(StepBreakdown::kForwardBackward);
    engine_->step();
    breakdown_.end(StepBreakdown::kStep);
  }
  if (tokens_seen_ != TokensSeen::kNo)  // every rank's (exact in a double below 2^53)
    progress_.input_tokens_seen += std::llround(engine_->average_across_ranks(tokens) * world_);
  return engine_->average_across_ranks(step_loss / static_cast<double>(accumulation_));
}

// The log line of the window since the previous one (all ranks: gathers every rank's memory peak).
void Trainer::log_step(std::int64_t step) {
  const double seconds = seconds_since(window_start_);
  float peak_mib = static_cast<float>(
      static_cast<double>(engine_->ledger().space_total(MemorySpace::kDevice).peak_bytes +
                          engine_->ledger().space_total(MemorySpace::kHost).peak_bytes) /
      (1 << 20));
  std::vector<float> peaks(static_cast<std::size_t>(world_));
  all_gather_host(communicator_, *device_, {&peak_mib, 1}, peaks, "memory peaks");
  LogEntry entry;
  entry.step = step;
  entry.epoch = epoch_at(step, steps_per_epoch_);
  entry.loss = progress_.window_loss / static_cast<double>(progress_.window_steps);
  entry.learning_rate = engine_->lr();
  entry.grad_norm = engine_->global_grad_norm();
  entry.loss_scale = engine_->loss_scale();
  entry.tokens_per_second = static_cast<double>(progress_.window_steps * samples_per_step_ * T_) /
                            std::max(seconds, 1e-9);
  record(entry);
  const SwapTraffic swapped =
      engine_->swap_traffic() - std::exchange(window_traffic_, engine_->swap_traffic());
  const std::string peak_text = joined_by_slash(peaks);
  console_.say(
      "step %lld/%lld | epoch %.3f | loss %.4f | lr %.3e | grad_norm %.3f | loss_scale %g "
      "| %.0f tokens/s | memory peak MiB per rank %s%s\n",
      static_cast<long long>(step), static_cast<long long>(total_steps_), entry.epoch, *entry.loss,
      *entry.learning_rate, *entry.grad_norm, *entry.loss_scale, *entry.tokens_per_second,
      peak_text.c_str(), swap_rates(swapped).c_str());
  console_.say("%s", breakdown_.take_line(seconds, progress_.window_steps).c_str());
  progress_.window_loss = 0.0;
  progress_.window_steps = 0;
  window_start_ = Clock::now();
}

// checkpoint-<step> (all ranks), with the progress after `step` and where the sampler and the
// task's reader stand.
void Trainer::save_resumable(std::int64_t step) {
  progress_.sampler_position = sampler_->position().step;
  progress_.stream_position = task_->train_data_position();
  engine_->wait_for_step();  // an overlapped optimizer step ends in the train phase
  const RunMemory::Scope phase(memory(), Phase::kCheckpoint);
  const Clock::time_point start = Clock::now();
  // Trainer._save_checkpoint: the evaluation of this step may make this checkpoint the best,
  // before its trainer_state.json is written.
  if (last_eval_step_ == step)
    update_best(best_, arguments_, *last_evaluation_,
                output_dir_ / ("checkpoint-" + std::to_string(step)), step);
  const SaveOptions options{.save_total_limit = arguments_.save_total_limit,
                            .model_only = arguments_.save_only_model,
                            .best_checkpoint = best_.checkpoint};
  const fs::path folder =
      save_checkpoint(communicator_, *engine_, output_dir_, step, options, shape_, progress_,
                      [&](const fs::path& staging) { save(staging, step); });
  console_.say("saved %s in %.2f s\n", folder.c_str(), seconds_since(start));
}

// Trainer._load_best_model: the best checkpoint's weights into the engine (all ranks), so the
// final evaluation and the saved model are the best one's; with save_total_limit 1 the other
// checkpoints go (rank 0), as after Hugging Face's training.
void Trainer::load_best_model() {
  host_barrier(communicator_, "best checkpoint saved");
  console_.say("loading the best model from %s (score: %g)\n", best_.checkpoint.c_str(),
               *best_.metric);
  task_->load_model(best_.checkpoint);
  last_eval_step_ = -1;  // the final evaluation is the best model's
  if (rank_ == 0 && arguments_.save_total_limit == 1)
    for (const fs::directory_entry& entry : fs::directory_iterator(output_dir_))
      if (entry.is_directory() && entry.path().filename().string().starts_with("checkpoint-") &&
          entry.path().filename() != fs::path(best_.checkpoint).filename())
        fs::remove_all(entry.path());
  host_barrier(communicator_, "best model loaded");
}

void Trainer::stop_preempted(std::int64_t step) {
  const int signal = PreemptionHandlers::received();
  console_.say(
      "preempted (%s): stopped after step %lld with a checkpoint; continue with "
      "--resume_from_checkpoint latest\n",
      signal == SIGTERM   ? "SIGTERM"
      : signal == SIGUSR1 ? "SIGUSR1"
      : signal == SIGINT  ? "SIGINT"
                          : "a signal to another rank",
      static_cast<long long>(step));
  result_.preempted = true;
  result_.global_step = step;
}

// After training (or without): final evaluation, test split, final model, results, samples.
TrainResult Trainer::finish() {
  const std::int64_t step = progress_.step;
  result_.global_step = step;
  result_.epoch = epoch_at(step, steps_per_epoch_);
  // run_clm: trainer.evaluate() after training (unless the last step evaluated already).
  if (arguments_.do_eval && last_eval_step_ != step) evaluate(step);
  if (last_evaluation_) {
    result_.eval_loss = last_evaluation_->eval_loss;
    result_.eval_accuracy = last_evaluation_->eval_accuracy;
  }
  json test_results;
  if (arguments_.do_predict) test_results = task_->predict(result_);
  if (arguments_.do_train) {
    memory_->enter(Phase::kFinalSave);  // to the end: the samples read the saved model
    const auto [saving, swapped] = std::pair(Clock::now(), engine_->swap_traffic());  // nvme reads
    save(output_dir_, step);
    console_.say(
        "saved %s/{config.json,model.safetensors,tokenizer files} (Hugging Face %s) in "
        "%.2f s, %.4f GB read from swap\n",
        output_dir_.c_str(), task_->model_class(), seconds_since(saving),
        static_cast<double>((engine_->swap_traffic() - swapped).bytes_read) / 1e9);
  }
  result_.memory = MemoryPeaks::of(engine_->ledger());  // the plan's check, final save included
  if (rank_ == 0) write_results(test_results);
  if (arguments_.do_train && console_.enabled() && arguments_.num_samples > 0)
    task_->print_samples(output_dir_, save_allocator_);  // from the saved model
  result_.phase_memory = memory_->finish(communicator_, *device_);
  console_.say("done in %.1f s\n", seconds_since(run_start_));
  return std::move(result_);
}

// Rank 0: train_results.json, eval_results.json, test_results.json, all_results.json,
// trainer_state.json, the loss plot.
void Trainer::write_results(const json& test_results) {
  json all = json::object();
  const std::int64_t step = progress_.step;
  const double epoch = result_.epoch;
  if (arguments_.do_train) {
    const double samples = static_cast<double>(step * samples_per_step_);
    json train_results = {
        {"epoch", epoch},
        {"train_loss", *result_.train_loss},
        {"train_runtime", train_runtime_},
        {"train_samples", prepared_.train_blocks},
        {"train_samples_per_second", samples / std::max(train_runtime_, 1e-9)},
        {"train_steps_per_second", static_cast<double>(step) / std::max(train_runtime_, 1e-9)}};
    // Hugging Face counts one process's tokens (num_tokens of its data loader): per device.
    if (arguments_.include_tokens_per_second)
      train_results["train_tokens_per_second"] =
          static_cast<double>(step * accumulation_ * B_ * T_) / std::max(train_runtime_, 1e-9);
    write_json(output_dir_ / "train_results.json", train_results);
    all.update(train_results);
    log_history_.push_back({{"epoch", epoch},
                            {"step", step},
                            {"train_loss", *result_.train_loss},
                            {"train_runtime", train_runtime_}});
  }
  if (arguments_.do_eval) {
    const LogEntry& evaluation = *last_evaluation_;
    const double blocks = static_cast<double>(prepared_.eval_blocks);
    json eval_results = {{"epoch", epoch},
                         {"eval_loss", *evaluation.eval_loss},
                         {"eval_samples", prepared_.eval_blocks},
                         {"eval_runtime", eval_runtime_},
                         {"eval_samples_per_second", blocks / std::max(eval_runtime_, 1e-9)}};
    if (evaluation.perplexity) eval_results["perplexity"] = *evaluation.perplexity;
    if (evaluation.eval_accuracy) eval_results["eval_accuracy"] = *evaluation.eval_accuracy;
    write_json(output_dir_ / "eval_results.json", eval_results);
    all.update(eval_results);
  }
  if (!test_results.is_null()) {
    write_json(output_dir_ / "test_results.json", test_results);
    for (const char* key : {"test_loss", "test_accuracy", "test_samples", "test_runtime"})
      all[key] = test_results[key];
  }
  write_json(output_dir_ / "all_results.json", all);
  write_json(output_dir_ / "trainer_state.json", trainer_state(step));
  if (arguments_.plot) plot_loss(output_dir_, result_.log_history, console_, options_.print);
}

}  // namespace

TrainResult train(const RunConfig& run, Communicator& communicator, const RunOptions& options) {
  if (run.arguments.dry_run) {  // the memory plan of this run, nothing allocated (plan.cc)
    TrainResult planned;
    planned.plan = dry_run(run, options.print && communicator.rank() == 0);
    return planned;
  }
  if (run.world_size != communicator.world_size())
    throw InputError("the run was configured for " + std::to_string(run.world_size) +
                     " ranks; the communicator has " + std::to_string(communicator.world_size()));
  std::unique_ptr<DeviceContext> device =
      make_rank_device_context(run.arguments, communicator, options);
  if (!run.arguments.auto_find_batch_size)
    return Trainer(run, communicator, std::move(device), options).run();
  std::string note;  // before anything is allocated
  const RunConfig fitted = fit_batch_size(run, communicator, *device, note);
  if (options.print && communicator.rank() == 0) std::printf("%s\n", note.c_str());
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
