// `zero config FILE`: resolves a DeepSpeed JSON config as training would and prints the result.
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include "cli.h"
#include "commands.h"
#include "flag_options.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/train/arguments.h"
#include "zero/train/config_precedence.h"

namespace zero::cli {

namespace {

// `value` when `name` was given on the command line, else empty: a flag not given must not
// contradict the config (it takes Hugging Face's default below, unless --no_defaults).
template <typename Value>
std::optional<Value> if_given(const CommandFlags& flags, std::string_view name, Value value) {
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

}  // namespace

int run_config(std::span<char* const> args) {
  CommandFlags flags(train::Command::kConfig);
  po::positional_options_description positional;
  positional.add("file", 1);
  flags.parse(args, &positional);
  if (flags.help()) {
    std::cout << usage(
        "config FILE",
        "Resolves a DeepSpeed config as `zero train` would: fills \"auto\" from the "
        "flags, maps deprecated keys,\napplies DeepSpeed's defaults and batch rule, "
        "and prints the result as JSON (warnings on stderr).\nA flag given must agree "
        "with a concrete value in the config; a flag not given takes Hugging Face's\n"
        "TrainingArguments default, as `zero train` does (listed on stderr; --no_defaults "
        "turns that off).\nExits 2 listing every error when the config is invalid.",
        flags.options());
    return 0;
  }
  if (!flags.given("file")) throw UsageError{"missing the config FILE"};
  if (flags.given("max_steps") && flags.given("total_steps"))
    throw UsageError{"give --max_steps or --total_steps, not both"};

  const train::TrainingArguments& a = flags.values().training;
  const train::ConfigArguments& own = flags.values().config;
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
  trainer.warmup_steps = if_given(flags, "warmup_steps", a.warmup_steps);
  trainer.total_steps = if_given(flags, "max_steps", a.max_steps);
  if (!trainer.total_steps) trainer.total_steps = if_given(flags, "total_steps", own.total_steps);
  trainer.max_grad_norm = if_given(flags, "max_grad_norm", a.max_grad_norm);
  trainer.fp16 = if_given(flags, "fp16", a.fp16);
  trainer.bf16 = if_given(flags, "bf16", a.bf16);
  trainer.hidden_size = if_given(flags, "hidden_size", own.hidden_size);

  // The config precedence rule (zero/train/config_precedence.h), as `zero train` applies it: a
  // flag not given yields to a value the file writes; else "auto" takes Hugging Face's default.
  std::string text;
  try {
    text = train::with_batch_from_flags(train::read_deepspeed_file(own.file));
  } catch (const Error& error) {
    std::cerr << "zero config: error: " << error.what() << "\n";
    return 2;
  }
  train::TrainingArguments with_given = a;
  with_given.given_flags = flags.given_names();
  const config::TrainerValues by_precedence = train::trainer_values_by_precedence(
      with_given, text, trainer.world_size.value_or(1), trainer.total_steps, trainer.hidden_size);
  if (!own.no_defaults) {
    const std::vector<std::string> lines = train::with_hf_defaults(trainer).defaulted;
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
      std::cerr << "zero config: flags not given take Hugging Face's defaults:" << defaulted
                << "\n";
    if (!from_file.empty())
      std::cerr << "zero config: flags not given take the values the file writes:" << from_file
                << "\n";
  }
  try {
    const config::ConfigResult result = config::resolve_config(text, trainer, own.file);
    for (const std::string& warning : result.warnings)
      std::cerr << "zero config: warning: " << warning << "\n";
    std::cout << config::to_json(result.config) << "\n";
    return 0;
  } catch (const Error& error) {
    std::cerr << "zero config: error: " << error.what() << "\n";
    return 2;
  }
}

}  // namespace zero::cli
