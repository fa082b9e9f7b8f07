// `zero config`'s resolution: the flags given become TrainerValues, the config precedence rule
// and Hugging Face's defaults fill the rest, and the config is resolved with them.
#include "zero/train/config_command.h"

#include <optional>
#include <sstream>

#include "zero/config/ds_config.h"
#include "zero/train/arguments.h"
#include "zero/train/config_precedence.h"

namespace zero::train {

namespace {

// `value` when `name` was given on the command line, else empty: a flag not given must not
// contradict the config (it takes Hugging Face's default below, unless --no_defaults).
template <typename Value>
std::optional<Value> if_given(const cli::CommandFlags& flags, std::string_view name, Value value) {
  if (!flags.given(name)) return std::nullopt;
  return value;
}

// Whether the rule leaves the flag `name` (a with_hf_defaults name) to the file.
bool yields_to_file(const config::TrainerValues& values, const std::string& name) {
  if (name == "per_device_train_batch_size") return !values.per_device_train_batch_size;
  if (name == "gradient_accumulation_steps") return !values.gradient_accumulation_steps;
  if (name == "learning_rate") return !values.learning_rate;
  if (name == "adam_beta1") return !values.adam_beta1;
  if (name == "adam_beta2") return !values.adam_beta2;
  if (name == "adam_epsilon") return !values.adam_epsilon;
  if (name == "weight_decay") return !values.weight_decay;
  if (name == "warmup_steps") return !values.warmup_steps;
  if (name == "max_grad_norm") return !values.max_grad_norm;
  if (name == "fp16") return !values.fp16;
  if (name == "bf16") return !values.bf16;
  return false;
}

config::TrainerValues given_trainer_values(const cli::CommandFlags& flags) {
  const FlagValues& values = flags.values();
  const TrainingArguments& a = values.training;
  const ConfigArguments& own = values.config;
  config::TrainerValues trainer;
  trainer.world_size = if_given(flags, "world_size", a.world_size);
  trainer.per_device_train_batch_size =
      if_given(flags, "per_device_train_batch_size", a.per_device_train_batch_size);
  trainer.gradient_accumulation_steps =
      if_given(flags, "gradient_accumulation_steps", a.gradient_accumulation_steps);
  trainer.learning_rate = if_given(flags, "learning_rate", a.learning_rate);
  trainer.adam_beta1 = if_given(flags, "adam_beta1", a.adam_beta1);
  trainer.adam_beta2 = if_given(flags, "adam_beta2", a.adam_beta2);
  trainer.adam_epsilon = if_given(flags, "adam_epsilon", a.adam_epsilon);
  trainer.weight_decay = if_given(flags, "weight_decay", a.weight_decay);
  trainer.total_steps = if_given(flags, "max_steps", a.max_steps);
  if (!trainer.total_steps) trainer.total_steps = if_given(flags, "total_steps", own.total_steps);
  // 5.x's fractional --warmup_steps is a share of the total steps, which only a flag gives here.
  if (flags.given("warmup_steps") && a.warmup_steps > 0.0 && a.warmup_steps < 1.0 &&
      !trainer.total_steps)
    throw cli::UsageError{"--warmup_steps " + (std::ostringstream() << a.warmup_steps).str() +
                          " is a fraction of the total steps: give --max_steps (or "
                          "--total_steps) too"};
  trainer.warmup_steps =
      if_given(flags, "warmup_steps", warmup_steps_for(a, trainer.total_steps.value_or(0)));
  trainer.max_grad_norm = if_given(flags, "max_grad_norm", a.max_grad_norm);
  trainer.fp16 = if_given(flags, "fp16", a.fp16);
  trainer.bf16 = if_given(flags, "bf16", a.bf16);
  trainer.hidden_size = if_given(flags, "hidden_size", own.hidden_size);
  return trainer;
}

}  // namespace

ResolvedConfig resolve_config_flags(const cli::CommandFlags& flags, const std::string& text,
                                    std::string_view source_name, std::vector<std::string>& notes) {
  if (flags.given("max_steps") && flags.given("total_steps"))
    throw cli::UsageError{"give --max_steps or --total_steps, not both"};
  const FlagValues& values = flags.values();
  config::TrainerValues trainer = given_trainer_values(flags);
  // The config precedence rule (zero/train/config_precedence.h), as `zero train` applies it: a
  // flag not given yields to a value the file writes; else "auto" takes Hugging Face's default.
  const std::string with_batch = with_batch_from_flags(text);
  TrainingArguments with_given = values.training;
  with_given.given_flags = flags.given_names();
  const config::TrainerValues by_precedence =
      trainer_values_by_precedence(with_given, with_batch, trainer.world_size.value_or(1),
                                   trainer.total_steps, trainer.hidden_size);
  if (!values.config.no_defaults) {
    const std::vector<std::string> lines = with_hf_defaults(trainer).defaulted;
    const std::optional<std::int64_t> world_size = trainer.world_size;
    trainer = by_precedence;
    trainer.world_size = world_size;
    std::string defaulted, from_file;
    for (const std::string& line : lines) {
      const std::string flag = line.substr(0, line.find(' '));
      if (yields_to_file(by_precedence, flag.substr(2)))
        from_file += " " + flag;
      else
        defaulted += " " + line;
    }
    if (!defaulted.empty())
      notes.push_back("flags not given take Hugging Face's defaults:" + defaulted);
    if (!from_file.empty())
      notes.push_back("flags not given take the values the file writes:" + from_file);
  }
  config::ConfigResult result = config::resolve_config(with_batch, trainer, source_name);
  return {config::to_json(result.config), std::move(result.warnings)};
}

}  // namespace zero::train
