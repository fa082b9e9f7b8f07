// The causal language-modelling task (lm_task.h).
#include "task/lm_task.h"

#include <algorithm>
#include <string>

#include "prepare/prepare.h"
#include "task/samples.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/engine_save.h"
#include "zero/gpt2/family.h"
#include "zero/text/progress.h"

namespace zero::train::detail {

LmTask::LmTask(const TaskContext& context)
    : context_(context),
      B_(context.arguments.per_device_train_batch_size),
      T_(context.prepared.block_size),
      model_(context.engine, context.prepared.model_config, B_, T_, context.arguments.seed,
             context.engine.allocator(),
             {.activation_checkpointing = context.arguments.gradient_checkpointing,
              .recompute_blocks =
                  recompute_blocks_of(context.arguments, context.prepared.model_config.n_layer),
              .label_smoothing = static_cast<float>(context.arguments.label_smoothing_factor)}) {
  const TrainingArguments& arguments = context_.arguments;
  const Prepared& prepared = context_.prepared;
  if (prepared.pretrained) load_pretrained(model_, arguments.model_name_or_path);
  if (arguments.do_train && arguments.streaming) {
    const int world = context_.engine.world_size();
    stream_ = std::make_unique<text::StreamingShard>(
        text::StreamingBlocks(prepared.streaming_files, *prepared.tokenizer,
                              static_cast<std::size_t>(T_)),
        static_cast<std::size_t>(B_ * world), world, context_.engine.rank());
  }
}

std::string_view LmTask::model_class() const {
  return gpt2::family_spec(context_.prepared.model_config.family).architecture;
}

void LmTask::print_data() const {
  const Prepared& prepared = context_.prepared;
  if (context_.arguments.streaming) {
    context_.console.say(
        "data: train blocks streamed from %zu file(s); %zu validation blocks of %lld tokens\n",
        prepared.streaming_files.size(), prepared.eval_blocks, static_cast<long long>(T_));
  } else {
    context_.console.say("data: %zu train and %zu validation blocks of %lld tokens\n",
                         prepared.train_blocks, prepared.eval_blocks, static_cast<long long>(T_));
  }
}

void LmTask::next_train_batch(text::DistributedSampler& sampler, MicroBatch& batch) {
  if (!stream_) {
    fill_micro_batch(context_.prepared.data.train, sampler.next(), B_, T_, batch);
    return;
  }
  // At the end of the stream, another pass (Hugging Face's next epoch).
  if (!stream_->next(stream_blocks_)) {
    stream_->seek(0);
    ZERO_CHECK(stream_->next(stream_blocks_), "the training stream ran dry");
  }
  fill_micro_batch(stream_blocks_, B_, T_, batch);
}

std::uint64_t LmTask::train_data_position() const { return stream_ ? stream_->step() : 0; }

void LmTask::seek_train_data(std::uint64_t position) {
  if (stream_) stream_->seek(position);
}

double LmTask::train_micro_step(const MicroBatch& batch, const gpt2::DropoutKey& dropout,
                                TrainerProgress& /*progress*/) {
  return model_.train_micro_step(batch.tokens, batch.targets, dropout);
}

Evaluation LmTask::evaluate(std::int64_t step) {
  const Clock::time_point start = Clock::now();
  const Prepared& prepared = context_.prepared;
  const int rank = context_.engine.rank(), world = context_.engine.world_size();
  const std::int64_t eval_B = context_.arguments.per_device_eval_batch_size;
  const std::int64_t count = static_cast<std::int64_t>(prepared.eval_blocks);
  const std::int64_t global = eval_B * world;
  const std::int64_t batches = (count + global - 1) / global;
  text::ProgressBar bar("eval", static_cast<std::uint64_t>(batches), "batches",
                        context_.console.progress_bars());
  MicroBatch batch;
  double loss_sum = 0.0, targets = 0.0;
  for (std::int64_t first = 0; first < count; first += global) {
    const std::int64_t begin = first + rank * eval_B;
    const std::int64_t end = std::min(first + (rank + 1) * eval_B, count);
    for (std::int64_t chunk = begin; chunk < begin + eval_B; chunk += B_) {
      std::vector<std::size_t> blocks;
      for (std::int64_t b = chunk; b < std::min(chunk + B_, end); ++b)
        blocks.push_back(static_cast<std::size_t>(b));
      fill_micro_batch(prepared.data.validation, blocks, B_, T_, batch);
      const double loss = model_.eval_loss(batch.tokens, batch.targets);
      loss_sum += loss * static_cast<double>(model_.num_counted_targets());
      targets += static_cast<double>(model_.num_counted_targets());
    }
    bar.add(1);
  }
  bar.finish();
  const double mean_targets = context_.engine.average_across_ranks(targets);
  const double mean_sum = context_.engine.average_across_ranks(loss_sum);
  const double loss = mean_targets > 0 ? mean_sum / mean_targets : 0.0;
  Evaluation evaluation;
  LogEntry& entry = evaluation.entry;
  entry.step = step;
  entry.epoch = epoch_at(step, prepared.steps_per_epoch);
  entry.eval_loss = loss;
  entry.perplexity = perplexity_of(loss);
  evaluation.seconds = seconds_since(start);
  context_.console.say(
      "step %lld/%lld | eval_loss %.4f | perplexity %.2f | %lld blocks in %.1f s\n",
      static_cast<long long>(step), static_cast<long long>(prepared.total_steps), loss,
      *entry.perplexity, static_cast<long long>(count), evaluation.seconds);
  return evaluation;
}

void LmTask::save_model(const std::filesystem::path& folder, DType dtype) {
  gpt2::save_hf_checkpoint(model_, folder, {.dtype = dtype});
}

void LmTask::load_model(const std::filesystem::path& folder) { load_pretrained(model_, folder); }

// On the run's device, in its parameter dtype where the device is not the host (a GPU: the
// model's parameters are copied there once); where that fails (the training states leave no
// room), on the CPU in fp32, saying so: the model is saved by now, the samples are a look at it.
std::vector<std::string> LmTask::samples_on_the_run_device(
    const gpt2::GPT2Model& model, const TrainingArguments& arguments) const {
  const text::Tokenizer& tokenizer = *context_.prepared.tokenizer;
  DeviceContext& device = context_.engine.context();
  const DType dtype = device.host_addressable(MemorySpace::kDevice) ? DType::kFloat32
                                                                    : context_.engine.param_dtype();
  try {
    return generate_samples(model, device, dtype, tokenizer, arguments);
  } catch (const Error& error) {
    if (device.device().kind == DeviceKind::kCpu) throw;
    context_.console.say("samples on %s failed (%s); generating them on the CPU\n",
                         device.device().to_string().c_str(), error.what());
    const std::unique_ptr<DeviceContext> cpu = make_cpu_context();
    return generate_samples(model, *cpu, DType::kFloat32, tokenizer, arguments);
  }
}

void LmTask::print_samples(const std::filesystem::path& folder, Allocator& allocator) const {
  const TrainingArguments& arguments = context_.arguments;
  const gpt2::GPT2Model model = gpt2::load_hf_model(folder, allocator);
  const std::vector<std::string> samples = samples_on_the_run_device(model, arguments);
  for (std::size_t s = 0; s < samples.size(); ++s)
    context_.console.say("sample %zu (top-k %d):\n%s\n%s\n", s + 1, arguments.top_k,
                         std::string(40, '-').c_str(), samples[s].c_str());
}

}  // namespace zero::train::detail
