// TrainingArguments: checks, warmup, and the values that fill a DeepSpeed config's "auto".
#include "zero/train/arguments.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "zero/core/error.h"
#include "zero/train/token_dataset.h"

namespace zero::train {

namespace {

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

void check_loop_arguments(const TrainingArguments& arguments);

// Token ids given in memory replace every data file, for the causal LM (not streamed).
void check_token_datasets(const TrainingArguments& arguments) {
  const TokenDataset* given =
      arguments.train_dataset ? arguments.train_dataset.get() : arguments.validation_dataset.get();
  if (given == nullptr) return;
  if (!arguments.train_files.empty() || !arguments.validation_files.empty() ||
      !arguments.test_files.empty() || !arguments.dataset_name.empty())
    fail(given->name, ": give the data as token ids or as files (--train_file, --validation_file, ",
         "--test_file, --dataset_name), not both");
  if (arguments.task != "causal-lm")
    fail(given->name, ": token ids train --task causal-lm, not --task ", arguments.task);
  if (arguments.streaming)
    fail(given->name, ": token ids in memory are not streamed; drop --streaming");
  if (arguments.do_train && !arguments.train_dataset)
    fail("--do_train needs train_dataset (", given->name, " holds the validation ids)");
}

}  // namespace

IntervalStrategy interval_strategy_from_name(std::string_view name) {
  if (name == "no") return IntervalStrategy::kNo;
  if (name == "steps") return IntervalStrategy::kSteps;
  if (name == "epoch") return IntervalStrategy::kEpoch;
  fail("'", name, "' is not a strategy (no, steps or epoch)");
}

std::string_view name_of(IntervalStrategy strategy) {
  switch (strategy) {
    case IntervalStrategy::kNo: return "no";
    case IntervalStrategy::kSteps: return "steps";
    case IntervalStrategy::kEpoch: return "epoch";
  }
  return "?";
}

bool TrainingArguments::was_given(std::string_view flag) const {
  if (!given_flags) return true;
  return std::find(given_flags->begin(), given_flags->end(), flag) != given_flags->end();
}

void check_arguments(const TrainingArguments& arguments) {
  auto at_least = [](std::string_view name, std::int64_t value, std::int64_t minimum) {
    if (value < minimum) fail("--", name, " must be at least ", minimum, ", got ", value);
  };
  at_least("per_device_train_batch_size", arguments.per_device_train_batch_size, 1);
  at_least("per_device_eval_batch_size", arguments.per_device_eval_batch_size, 1);
  at_least("gradient_accumulation_steps", arguments.gradient_accumulation_steps, 1);
  at_least("logging_steps", arguments.logging_steps, 1);
  at_least("save_steps", arguments.save_steps, 1);
  at_least("preprocessing_num_workers", arguments.preprocessing_num_workers, 0);
  at_least("tokenizer_vocab_size", arguments.tokenizer_vocab_size, 257);
  at_least("num_samples", arguments.num_samples, 0);
  at_least("sample_tokens", arguments.sample_tokens, 1);
  at_least("top_k", arguments.top_k, 0);
  if (arguments.eval_steps != -1) at_least("eval_steps", arguments.eval_steps, 1);
  if (arguments.block_size != -1) at_least("block_size", arguments.block_size, 2);
  if (arguments.save_total_limit != -1) at_least("save_total_limit", arguments.save_total_limit, 1);
  if (arguments.max_train_samples != -1)
    at_least("max_train_samples", arguments.max_train_samples, 1);
  if (arguments.max_eval_samples != -1) at_least("max_eval_samples", arguments.max_eval_samples, 1);
  if (arguments.validation_split_percentage < 0 || arguments.validation_split_percentage > 99)
    fail("--validation_split_percentage must be in [0, 99], got ",
         arguments.validation_split_percentage);
  if (!(arguments.num_train_epochs > 0.0) && arguments.max_steps <= 0)
    fail("--num_train_epochs must be positive (or give --max_steps), got ",
         arguments.num_train_epochs);
  tokens_seen_of(arguments);
  if (!arguments.recompute_blocks.empty()) {
    if (arguments.gradient_checkpointing)
      fail("--recompute_blocks ", arguments.recompute_blocks,
           " and --gradient_checkpointing: give one (--gradient_checkpointing recomputes every "
           "block)");
    if (arguments.recompute_blocks != "auto") recompute_blocks_of(arguments, -1);
  }
  if (!(arguments.warmup_steps >= 0.0))
    fail(
        "--warmup_steps must be at least 0 (a step count, or a fraction of the total steps "
        "below 1), got ",
        arguments.warmup_steps);
  if (!(arguments.label_smoothing_factor >= 0.0 && arguments.label_smoothing_factor < 1.0))
    fail("--label_smoothing_factor must be in [0, 1), got ", arguments.label_smoothing_factor);
  if (!(arguments.warmup_ratio >= 0.0 && arguments.warmup_ratio <= 1.0))
    fail("--warmup_ratio must be in [0, 1], got ", arguments.warmup_ratio);
  if (!(arguments.learning_rate >= 0.0))
    fail("--learning_rate must not be negative, got ", arguments.learning_rate);
  if (!(arguments.temperature > 0.0)) fail("--temperature must be positive");
  if (arguments.bf16 && arguments.fp16) fail("give --bf16 or --fp16, not both");
  if (arguments.output_dir.empty() && !arguments.dry_run) fail("--output_dir is required");
  if (arguments.world_size != -1) at_least("world_size", arguments.world_size, 1);
  if (arguments.streaming && !arguments.keep_linebreaks)
    fail("--keep_linebreaks False is not implemented with --streaming (the stream keeps them)");
  if (arguments.do_predict && arguments.test_files.empty()) fail("--do_predict needs --test_file");
  if (!arguments.do_train && !arguments.do_eval && !arguments.do_predict && !arguments.dry_run)
    fail("nothing to do: give --do_train, --do_eval and/or --do_predict");
  check_token_datasets(arguments);
  const bool named = !arguments.dataset_name.empty();
  if (named && !(arguments.train_files.empty() && arguments.validation_files.empty()))
    fail("give --dataset_name or --train_file/--validation_file, not both");
  if (!named && !arguments.dataset_config_name.empty())
    fail("--dataset_config_name needs --dataset_name");
  const bool ids = arguments.train_dataset || arguments.validation_dataset;
  if (arguments.do_train && arguments.train_files.empty() && !named && !arguments.train_dataset)
    fail("--do_train needs --train_file (or --dataset_name)");
  if (arguments.do_eval && arguments.validation_files.empty() && arguments.train_files.empty() &&
      !named && !ids)
    fail("--do_eval needs --validation_file (or --train_file to split one off)");
  if (arguments.do_eval && arguments.validation_files.empty() && !arguments.validation_dataset &&
      arguments.validation_split_percentage == 0 && !named)
    fail("--do_eval without --validation_file needs --validation_split_percentage > 0");
  check_loop_arguments(arguments);
}

namespace {

void check_loop_arguments(const TrainingArguments& arguments) {
  if (arguments.data_seed < -1) fail("--data_seed must not be negative, got ", arguments.data_seed);
  if (!(arguments.eval_delay >= 0.0)) fail("--eval_delay must not be negative");
  const std::string& sampling = arguments.train_sampling_strategy;
  if (sampling != "random" && sampling != "sequential" && sampling != "group_by_length")
    fail("--train_sampling_strategy '", sampling,
         "' is not a sampling strategy (random, sequential or group_by_length)");
  // Trainer.train() evaluates before the first step and needs the validation split.
  if (arguments.eval_on_start && arguments.do_train && !arguments.do_eval)
    fail("--eval_on_start needs --do_eval (the validation split it evaluates)");
  if (!arguments.load_best_model_at_end) return;
  // TrainingArguments.__post_init__'s rules.
  if (arguments.eval_strategy != arguments.save_strategy)
    fail(
        "--load_best_model_at_end requires the save and eval strategy to match, but found "
        "eval_strategy ",
        name_of(arguments.eval_strategy), " and save_strategy ", name_of(arguments.save_strategy));
  const std::int64_t eval_steps =
      arguments.eval_steps > 0 ? arguments.eval_steps : arguments.logging_steps;
  if (arguments.eval_strategy == IntervalStrategy::kSteps && arguments.save_steps % eval_steps != 0)
    fail(
        "--load_best_model_at_end requires the saving steps to be a round multiple of the "
        "evaluation steps, but found ",
        arguments.save_steps, ", which is not a round multiple of ", eval_steps);
  if (arguments.eval_strategy == IntervalStrategy::kNo)
    fail(
        "--load_best_model_at_end needs evaluations and checkpoints: give --eval_strategy and "
        "--save_strategy steps or epoch");
  if (arguments.do_train && !arguments.do_eval)
    fail("--load_best_model_at_end needs --do_eval (the evaluations that choose the best model)");
}

}  // namespace

int recompute_blocks_of(const TrainingArguments& arguments, std::int64_t n_layer) {
  if (arguments.gradient_checkpointing) return static_cast<int>(n_layer);
  const std::string& given = arguments.recompute_blocks;
  if (given.empty()) return 0;
  if (given == "auto")
    fail(
        "--recompute_blocks auto: the memory plan resolves it to a count before the model is "
        "built");
  int count = -1;
  const auto [end, error] = std::from_chars(given.data(), given.data() + given.size(), count);
  if (error != std::errc() || end != given.data() + given.size() || count < 0)
    fail("--recompute_blocks must be a count of blocks (0 or more) or \"auto\", got \"", given,
         "\"");
  if (n_layer >= 0 && count > n_layer)
    fail("--recompute_blocks ", count, ": the model has ", n_layer, " blocks");
  return count;
}

std::string metric_for_best_model_of(const TrainingArguments& arguments) {
  if (!arguments.metric_for_best_model.empty()) return arguments.metric_for_best_model;
  return arguments.load_best_model_at_end ? "loss" : "";
}

bool greater_is_better_for(const TrainingArguments& arguments) {
  if (arguments.given_flags && !arguments.was_given("greater_is_better"))
    return !metric_for_best_model_of(arguments).ends_with("loss");
  return arguments.greater_is_better;
}

TokensSeen tokens_seen_of(const TrainingArguments& arguments) {
  const std::string& mode = arguments.include_num_input_tokens_seen;
  if (mode == "no" || mode == "False") return TokensSeen::kNo;
  if (mode == "all" || mode == "True") return TokensSeen::kAll;
  if (mode == "non_padding") return TokensSeen::kNonPadding;
  fail("--include_num_input_tokens_seen '", mode, "' is none of all, non_padding, no (or True, ",
       "False)");
}

std::int64_t warmup_steps_for(const TrainingArguments& arguments, std::int64_t total_steps) {
  if (arguments.warmup_steps >= 1.0) return static_cast<std::int64_t>(arguments.warmup_steps);
  const double ratio =
      arguments.warmup_steps > 0.0 ? arguments.warmup_steps : arguments.warmup_ratio;
  return static_cast<std::int64_t>(std::ceil(ratio * static_cast<double>(total_steps)));
}

config::TrainerValues trainer_values(const TrainingArguments& arguments, std::int64_t world_size,
                                     std::int64_t total_steps, std::int64_t hidden_size) {
  config::TrainerValues values;
  values.world_size = world_size;
  values.per_device_train_batch_size = arguments.per_device_train_batch_size;
  values.gradient_accumulation_steps = arguments.gradient_accumulation_steps;
  values.learning_rate = arguments.learning_rate;
  values.adam_beta1 = arguments.adam_beta1;
  values.adam_beta2 = arguments.adam_beta2;
  values.adam_epsilon = arguments.adam_epsilon;
  values.weight_decay = arguments.weight_decay;
  values.warmup_steps = warmup_steps_for(arguments, total_steps);
  values.total_steps = total_steps;
  values.max_grad_norm = arguments.max_grad_norm;
  values.fp16 = arguments.fp16;
  values.bf16 = arguments.bf16;
  values.hidden_size = hidden_size;
  return values;
}

DefaultedValues with_hf_defaults(const config::TrainerValues& given) {
  const TrainingArguments defaults;
  DefaultedValues result{given, {}};
  config::TrainerValues& values = result.values;
  auto fill = [&result](auto& field, auto value, std::string_view name) {
    if (field.has_value()) return;
    field = value;
    std::ostringstream line;
    if constexpr (std::is_same_v<decltype(value), bool>) {
      line << "--" << name << " " << (value ? "True" : "False");
    } else if constexpr (std::is_floating_point_v<decltype(value)>) {
      line << "--" << name << " " << format_number(value);
    } else {
      line << "--" << name << " " << value;
    }
    result.defaulted.push_back(line.str());
  };
  fill(values.per_device_train_batch_size, defaults.per_device_train_batch_size,
       "per_device_train_batch_size");
  fill(values.gradient_accumulation_steps, defaults.gradient_accumulation_steps,
       "gradient_accumulation_steps");
  fill(values.learning_rate, defaults.learning_rate, "learning_rate");
  fill(values.adam_beta1, defaults.adam_beta1, "adam_beta1");
  fill(values.adam_beta2, defaults.adam_beta2, "adam_beta2");
  fill(values.adam_epsilon, defaults.adam_epsilon, "adam_epsilon");
  fill(values.weight_decay, defaults.weight_decay, "weight_decay");
  fill(values.warmup_steps, warmup_steps_for(defaults, 0), "warmup_steps");
  fill(values.max_grad_norm, defaults.max_grad_norm, "max_grad_norm");
  fill(values.fp16, defaults.fp16, "fp16");
  fill(values.bf16, defaults.bf16, "bf16");
  return result;
}

}  // namespace zero::train
