// `zero config FILE`: resolves a DeepSpeed JSON config as training would and prints the result.
#include <iostream>
#include <optional>
#include <string>

#include "cli.h"
#include "commands.h"
#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/train/arguments.h"

namespace zero::cli {

namespace {

template <typename T>
std::optional<T> optional_value(const po::variables_map& variables, const char* name) {
  if (!variables.count(name)) return std::nullopt;
  return variables[name].as<T>();
}

}  // namespace

int run_config(std::span<char* const> args) {
  po::options_description options("Options");
  // clang-format off
  options.add_options()
      ("help,h", "print this help")
      ("file", po::value<std::string>(), "the DeepSpeed JSON config (positional)")
      ("world_size", po::value<std::int64_t>(),
       "data-parallel ranks the batch sizes are resolved for (default 1)")
      ("per_device_train_batch_size", po::value<std::int64_t>(),
       "fills train_micro_batch_size_per_gpu \"auto\"")
      ("gradient_accumulation_steps", po::value<std::int64_t>(),
       "fills gradient_accumulation_steps \"auto\"")
      ("learning_rate", po::value<double>(),
       "fills optimizer lr and scheduler warmup_max_lr \"auto\"")
      ("adam_beta1", po::value<double>(), "fills optimizer betas \"auto\" (with --adam_beta2)")
      ("adam_beta2", po::value<double>(), "fills optimizer betas \"auto\" (with --adam_beta1)")
      ("adam_epsilon", po::value<double>(), "fills optimizer eps \"auto\"")
      ("weight_decay", po::value<double>(), "fills optimizer weight_decay \"auto\"")
      ("warmup_steps", po::value<std::int64_t>(), "fills scheduler warmup_num_steps \"auto\"")
      ("max_steps", po::value<std::int64_t>(), "fills scheduler total_num_steps \"auto\"")
      ("total_steps", po::value<std::int64_t>(), "the same as --max_steps")
      ("max_grad_norm", po::value<double>(), "fills gradient_clipping \"auto\"")
      ("fp16", "fills fp16.enabled \"auto\" with true")
      ("bf16", "fills bf16.enabled \"auto\" with true")
      ("hidden_size", po::value<std::int64_t>(),
       "the model's; fills bucket sizes and stage-3 thresholds \"auto\"")
      ("no_defaults",
       "fill \"auto\" only from the flags given, not from Hugging Face's defaults for the others");
  // clang-format on
  po::positional_options_description positional;
  positional.add("file", 1);
  const auto variables = parse(args, options, &positional);
  if (variables.count("help")) {
    std::cout << usage(
        "config FILE",
        "Resolves a DeepSpeed config as `zero train` would: fills \"auto\" from the "
        "flags, maps deprecated keys,\napplies DeepSpeed's defaults and batch rule, "
        "and prints the result as JSON (warnings on stderr).\nA flag given must agree "
        "with a concrete value in the config; a flag not given takes Hugging Face's\n"
        "TrainingArguments default, as `zero train` does (listed on stderr; --no_defaults "
        "turns that off).\nExits 2 listing every error when the config is invalid.",
        options);
    return 0;
  }
  if (!variables.count("file")) throw UsageError{"missing the config FILE"};
  if (variables.count("max_steps") && variables.count("total_steps"))
    throw UsageError{"give --max_steps or --total_steps, not both"};

  config::TrainerValues trainer;
  trainer.world_size = optional_value<std::int64_t>(variables, "world_size");
  trainer.per_device_train_batch_size =
      optional_value<std::int64_t>(variables, "per_device_train_batch_size");
  trainer.gradient_accumulation_steps =
      optional_value<std::int64_t>(variables, "gradient_accumulation_steps");
  trainer.learning_rate = optional_value<double>(variables, "learning_rate");
  trainer.adam_beta1 = optional_value<double>(variables, "adam_beta1");
  trainer.adam_beta2 = optional_value<double>(variables, "adam_beta2");
  trainer.adam_epsilon = optional_value<double>(variables, "adam_epsilon");
  trainer.weight_decay = optional_value<double>(variables, "weight_decay");
  trainer.warmup_steps = optional_value<std::int64_t>(variables, "warmup_steps");
  trainer.total_steps = optional_value<std::int64_t>(variables, "max_steps");
  if (!trainer.total_steps)
    trainer.total_steps = optional_value<std::int64_t>(variables, "total_steps");
  trainer.max_grad_norm = optional_value<double>(variables, "max_grad_norm");
  if (variables.count("fp16")) trainer.fp16 = true;
  if (variables.count("bf16")) trainer.bf16 = true;
  trainer.hidden_size = optional_value<std::int64_t>(variables, "hidden_size");

  if (!variables.count("no_defaults")) {
    const train::DefaultedValues filled = train::with_hf_defaults(trainer);
    trainer = filled.values;
    if (!filled.defaulted.empty()) {
      std::cerr << "zero config: flags not given take Hugging Face's defaults:";
      for (const std::string& flag : filled.defaulted) std::cerr << " " << flag;
      std::cerr << "\n";
    }
  }
  try {
    const config::ConfigResult result =
        config::load_config_file(variables["file"].as<std::string>(), trainer);
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
