// Hugging Face's process flags as zero's environment, and flags that stand for others.
#include "zero/train/launch_flags.h"

#include "zero/core/error.h"
#include "zero/train/trainer.h"

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

}  // namespace zero::train
