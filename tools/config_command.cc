// `zero config FILE`: resolves a DeepSpeed JSON config as training would and prints the result.
#include <iostream>
#include <optional>
#include <string>

#include "cli.h"
#include "commands.h"
#include "flag_options.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/train/arguments.h"

namespace zero::cli {

namespace {

// `value` when `name` was given on the command line, else empty: a flag not given must not
// contradict the config (it takes Hugging Face's default below, unless --no_defaults).
template <typename Value>
std::optional<Value> if_given(const CommandFlags& flags, std::string_view name, Value value) {
  if (!flags.given(name)) return std::nullopt;
  return value;
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

  if (!own.no_defaults) {
    const train::DefaultedValues filled = train::with_hf_defaults(trainer);
    trainer = filled.values;
    if (!filled.defaulted.empty()) {
      std::cerr << "zero config: flags not given take Hugging Face's defaults:";
      for (const std::string& flag : filled.defaulted) std::cerr << " " << flag;
      std::cerr << "\n";
    }
  }
  try {
    const config::ConfigResult result = config::load_config_file(own.file, trainer);
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
