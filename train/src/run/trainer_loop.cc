// The Trainer's training loop (trainer_run.h): steps over micro-batches, logs, evaluations,
// checkpoints, preemption and the best model.
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "run/run_outputs.h"
#include "run/trainer_run.h"
#include "zero/comm/host_collectives.h"
#include "zero/gpt2/model.h"
#include "zero/text/progress.h"

namespace zero::train::detail {

using nlohmann::json;

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
                        console_.progress_bars());
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
  // The ETA: the steps left at this window's seconds per step (also where stdout is a file, and no
  // progress bar is drawn).
  const double eta = static_cast<double>(total_steps_ - step) * seconds /
                     static_cast<double>(progress_.window_steps);
  console_.say(
      "step %lld/%lld | epoch %.3f | loss %.4f | lr %.3e | grad_norm %.3f | loss_scale %g "
      "| %.0f tokens/s | ETA %s | memory peak MiB per rank %s%s\n",
      static_cast<long long>(step), static_cast<long long>(total_steps_), entry.epoch, *entry.loss,
      *entry.learning_rate, *entry.grad_norm, *entry.loss_scale, *entry.tokens_per_second,
      text::ProgressBar::format_duration(eta).c_str(), peak_text.c_str(),
      swap_rates(swapped).c_str());
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

}  // namespace zero::train::detail
