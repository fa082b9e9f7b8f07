// Hugging Face's process flags as zero's environment, and flags that stand for others.
#include "zero/train/launch_flags.h"

#include <optional>
#include <sstream>

#include "zero/core/error.h"
#include "zero/train/input_error.h"

namespace zero::train {

namespace {

// Hugging Face's log level as ZERO_LOG_LEVEL's word; "" for passive (leave the environment be).
std::string zero_log_level(const std::string& level) {
  if (level == "passive") return "";
  if (level == "critical") return "error";
  if (level == "warning") return "warn";
  return level;  // debug, info, error (the flag table accepts no other)
}

std::string environment_value(const std::map<std::string, std::string>& environment,
                              const std::string& name) {
  const auto found = environment.find(name);
  return found == environment.end() ? "" : found->second;
}

// --log_level on rank 0 (the main process), --log_level_replica on the others, when given.
void log_level_environment(const TrainingArguments& arguments, int rank,
                           std::map<std::string, std::string>& environment) {
  const bool main_process = rank == 0;
  const std::string& level = main_process ? arguments.log_level : arguments.log_level_replica;
  const std::string word = zero_log_level(level);
  if (word.empty() || !arguments.was_given(main_process ? "log_level" : "log_level_replica"))
    return;
  environment["ZERO_LOG_LEVEL"] = word;
  if (!main_process && (word == "info" || word == "debug")) environment["ZERO_LOG_ALL_RANKS"] = "1";
}

}  // namespace

ProcessSettings process_settings(const TrainingArguments& arguments,
                                 const std::map<std::string, std::string>& environment, int rank) {
  ProcessSettings settings;
  if (arguments.was_given("local_rank") && arguments.local_rank >= 0) {
    const std::string value = std::to_string(arguments.local_rank);
    const std::string set = environment_value(environment, "LOCAL_RANK");
    if (!set.empty() && set != value)
      throw InputError("--local_rank " + value + " contradicts LOCAL_RANK=" + set +
                       " in the environment");
    settings.environment["LOCAL_RANK"] = value;
  }
  if (!arguments.ddp_backend.empty()) {
    const std::string set = environment_value(environment, "ZERO_COMM_BACKEND");
    if (!set.empty() && set != arguments.ddp_backend)
      throw InputError("--ddp_backend " + arguments.ddp_backend +
                       " contradicts ZERO_COMM_BACKEND=" + set + " in the environment");
    settings.environment["ZERO_COMM_BACKEND"] = arguments.ddp_backend;
    settings.notes.push_back("--ddp_backend " + arguments.ddp_backend +
                             ": the collectives' backend");
  }
  if (arguments.ddp_timeout < 1)
    throw InputError("--ddp_timeout must be at least 1 second, got " +
                     std::to_string(arguments.ddp_timeout));
  if (environment_value(environment, "ZERO_COMM_TIMEOUT_S").empty())
    settings.timeout = std::chrono::seconds(arguments.ddp_timeout);
  log_level_environment(arguments, rank, settings.environment);
  if (!arguments.run_name.empty()) settings.notes.push_back("run: " + arguments.run_name);
  return settings;
}

std::vector<std::string> apply_flag_equivalents(TrainingArguments& arguments) {
  std::vector<std::string> notes;
  if (arguments.dataloader_num_workers < 0)
    throw InputError("--dataloader_num_workers must be at least 0, got " +
                     std::to_string(arguments.dataloader_num_workers));
  if (arguments.was_given("dataloader_num_workers") &&
      !arguments.was_given("preprocessing_num_workers") && arguments.given_flags) {
    arguments.preprocessing_num_workers = arguments.dataloader_num_workers;
    notes.push_back("--dataloader_num_workers " + std::to_string(arguments.dataloader_num_workers) +
                    ": the tokenizer threads (zero has no data loader workers)");
  }
  return notes;
}

namespace {

// Sets `field` from accelerate's variable `name` (text `value`, the flag's `text`), counted as
// given; a given flag that differs is the error.
template <typename Value>
void take(TrainingArguments& arguments, const std::string& flag, const std::string& name,
          const std::string& value, Value from_environment, Value& field, const std::string& text,
          std::vector<std::string>& notes) {
  if (arguments.given_flags && arguments.was_given(flag)) {
    if (field != from_environment)
      throw InputError("--" + flag + " " + text + " contradicts " + name + "=" + value +
                       " (accelerate's launch config)");
    return;
  }
  field = from_environment;
  if (arguments.given_flags) arguments.given_flags->push_back(flag);
  notes.push_back("--" + flag + " from accelerate's " + name + "=" + value);
}

}  // namespace

std::vector<std::string> apply_accelerate_environment(
    TrainingArguments& arguments, const std::map<std::string, std::string>& environment) {
  std::vector<std::string> notes;
  auto text_of = [](bool value) { return std::string(value ? "True" : "False"); };
  const std::string precision = environment_value(environment, "ACCELERATE_MIXED_PRECISION");
  if (precision == "fp16" || precision == "bf16") {
    const bool fp16 = precision == "fp16";
    take(arguments, fp16 ? "fp16" : "bf16", "ACCELERATE_MIXED_PRECISION", precision, true,
         fp16 ? arguments.fp16 : arguments.bf16, text_of(fp16 ? arguments.fp16 : arguments.bf16),
         notes);
  } else if (!precision.empty() && precision != "no") {
    throw InputError("ACCELERATE_MIXED_PRECISION=" + precision +
                     ": zero trains in fp32, fp16 or bf16 (no, fp16 or bf16)");
  }
  const std::string file = environment_value(environment, "ACCELERATE_DEEPSPEED_CONFIG_FILE");
  if (!file.empty() && file != "none") {
    take(arguments, "deepspeed", "ACCELERATE_DEEPSPEED_CONFIG_FILE", file, file,
         arguments.deepspeed, arguments.deepspeed, notes);
  } else if (!environment_value(environment, "ACCELERATE_DEEPSPEED_ZERO_STAGE").empty() &&
             arguments.deepspeed.empty()) {
    throw InputError(
        "ACCELERATE_DEEPSPEED_ZERO_STAGE: accelerate's DeepSpeed plugin without a config file is "
        "not read by zero; give --deepspeed FILE (or deepspeed_config_file in accelerate's "
        "config)");
  }
  auto number = [&](const char* name) -> std::optional<double> {
    const std::string value = environment_value(environment, name);
    if (value.empty() || value == "none" || value == "auto") return std::nullopt;
    try {
      std::size_t used = 0;
      const double parsed = std::stod(value, &used);
      if (used == value.size()) return parsed;
    } catch (const std::exception&) {
    }
    throw InputError(std::string(name) + "=" + value + " is not a number");
  };
  if (const auto steps = number("ACCELERATE_GRADIENT_ACCUMULATION_STEPS")) {
    const auto value = static_cast<std::int64_t>(*steps);
    take(arguments, "gradient_accumulation_steps", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS",
         std::to_string(value), value, arguments.gradient_accumulation_steps,
         std::to_string(arguments.gradient_accumulation_steps), notes);
  }
  if (const auto clipping = number("ACCELERATE_GRADIENT_CLIPPING")) {
    std::ostringstream text;
    text << arguments.max_grad_norm;
    take(arguments, "max_grad_norm", "ACCELERATE_GRADIENT_CLIPPING",
         environment_value(environment, "ACCELERATE_GRADIENT_CLIPPING"), *clipping,
         arguments.max_grad_norm, text.str(), notes);
  }
  const std::string cpu = environment_value(environment, "ACCELERATE_USE_CPU");
  if (cpu == "true" || cpu == "True" || cpu == "1")
    take(arguments, "use_cpu", "ACCELERATE_USE_CPU", cpu, true, arguments.use_cpu,
         text_of(arguments.use_cpu), notes);
  return notes;
}

}  // namespace zero::train
