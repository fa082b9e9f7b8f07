// The Trainer's end (trainer_run.h): final evaluation, test split, final model, result files.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>

#include "prepare/prepare.h"
#include "run/run_outputs.h"
#include "run/trainer_run.h"

namespace zero::train::detail {

using nlohmann::json;

namespace {

// The weight files a save wrote (gpt2::write_hf_weights): model.safetensors, or the shards and
// their index (that form removes the other).
std::string weight_files(const fs::path& folder) {
  if (!fs::exists(folder / "model.safetensors.index.json")) return "model.safetensors";
  std::int64_t shards = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    shards += name.starts_with("model-") && name.ends_with(".safetensors");
  }
  return std::to_string(shards) + " model-*-of-*.safetensors shards,model.safetensors.index.json";
}

}  // namespace

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
    const DType dtype = final_model_dtype(run_);
    save(output_dir_, step, dtype);
    console_.say(
        "saved %s/{config.json,%s,tokenizer files} (Hugging Face %s, %s weights) in %.2f s, "
        "%.4f GB read from swap\n",
        output_dir_.c_str(), weight_files(output_dir_).c_str(),
        std::string(task_->model_class()).c_str(), std::string(name_of(dtype)).c_str(),
        seconds_since(saving),
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
    log_line({{"epoch", epoch},
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
    if (evaluation.eval_mse) eval_results["eval_mse"] = *evaluation.eval_mse;
    if (evaluation.eval_f1) eval_results["eval_f1"] = *evaluation.eval_f1;
    write_json(output_dir_ / "eval_results.json", eval_results);
    all.update(eval_results);
  }
  if (!test_results.is_null()) {
    write_json(output_dir_ / "test_results.json", test_results);
    for (const char* key :
         {"test_loss", "test_accuracy", "test_mse", "test_f1", "test_samples", "test_runtime"})
      if (test_results.contains(key)) all[key] = test_results[key];
  }
  write_json(output_dir_ / "all_results.json", all);
  write_json(output_dir_ / "trainer_state.json", trainer_state(step));
  if (arguments_.plot) plot_loss(output_dir_, result_.log_history, console_, options_.print);
}

}  // namespace zero::train::detail
