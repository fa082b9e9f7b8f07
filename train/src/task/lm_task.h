// The causal language-modelling task (internal to zero::train): run_clm's GPT2LMHeadModel on
// blocks of T tokens, read through the sampler or, with --streaming, as a stream; evaluated by
// token-weighted loss and perplexity; the final model prints --num_samples continuations.
#pragma once

#include <memory>
#include <vector>

#include "kind/task_kind.h"
#include "task/task.h"
#include "zero/gpt2/engine_model.h"
#include "zero/text/streaming.h"

namespace zero::train::detail {

class LmTask final : public Task {
 public:
  explicit LmTask(const TaskContext& context);

  void print_data() const override;
  std::string_view model_class() const override;

  void next_train_batch(text::DistributedSampler& sampler, MicroBatch& batch) override;
  std::uint64_t train_data_position() const override;
  void seek_train_data(std::uint64_t position) override;
  double train_micro_step(const MicroBatch& batch, const gpt2::DropoutKey& dropout,
                          TrainerProgress& progress) override;

  // The first eval_blocks validation blocks in global batches of eval_B × W, each rank its rows
  // in micro-batches of B; a token-weighted mean (every block counts T - 1 targets, so it equals
  // Hugging Face's mean over samples).
  Evaluation evaluate(std::int64_t step) override;

  void save_model(const std::filesystem::path& folder, DType dtype) override;
  void load_model(const std::filesystem::path& folder) override;
  void print_samples(const std::filesystem::path& folder, Allocator& allocator) const override;

 private:
  std::vector<std::string> samples_on_the_run_device(const gpt2::GPT2Model& model,
                                                     const TrainingArguments& arguments) const;
  TaskContext context_;
  std::int64_t B_ = 0, T_ = 0;
  gpt2::EngineModel model_;
  // --streaming: the training blocks as they are read, and this rank's rows of the last batch.
  std::unique_ptr<text::StreamingShard> stream_;
  std::vector<std::vector<text::TokenId>> stream_blocks_;
};

}  // namespace zero::train::detail
