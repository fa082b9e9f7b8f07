// `zero train`: Hugging Face run_clm's command line on zero::train (train/), under mpirun or alone.
#include <stdlib.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"
#include "flag_options.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/train/arguments.h"
#include "zero/train/config_precedence.h"
#include "zero/train/hub_cache.h"
#include "zero/train/launch_flags.h"
#include "zero/train/trainer.h"

namespace zero::cli {

int run_train_command(std::span<char* const> args) {
  CommandFlags flags(train::Command::kTrain);
  flags.parse(args);
  if (flags.help()) {
    if (detect_launch().rank == 0)
      std::cout << usage("train",
                         "Trains and evaluates GPT-2 as Hugging Face run_clm.py does (or, with "
                         "--task text-classification,\nrun_classification.py with "
                         "GPT2ForSequenceClassification), with the engine set up from "
                         "--deepspeed.\nRun it under mpirun for several "
                         "ranks. Writes output_dir/{config.json, model.safetensors, tokenizer "
                         "files,\ncheckpoint-N/, metrics.jsonl, trainer_state.json, "
                         "*_results.json, loss.svg}.",
                         flags.options());
    return 0;
  }
  train::TrainingArguments& a = flags.values().training;  // Hugging Face's defaults, then the flags
  a.plot = !flags.values().train.no_plot;
  a.given_flags = flags.given_names();
  // Hugging Face's process flags (--local_rank, --ddp_backend, --ddp_timeout, --log_level*)
  // become the environment the launch detection, communicator and logger read.
  train::ProcessSettings process;
  std::vector<std::string> notes;
  try {
    notes = train::apply_accelerate_environment(a, process_environment());
    for (std::string& line : train::apply_flag_equivalents(a)) notes.push_back(std::move(line));
    for (const std::string& line : train::resolve_hub_names(a, process_environment()))
      notes.push_back("from the Hugging Face cache: " + line);
    process = train::process_settings(a, process_environment(), detect_launch().rank);
  } catch (const train::InputError& error) {
    std::cerr << "zero train: error: " << error.what() << "\n";
    return 2;
  }
  for (const auto& [name, value] : process.environment) ::setenv(name.c_str(), value.c_str(), 1);
  std::string bound_cpus;
  if (flags.values().train.bind_cores_to_rank) {
    // Before any thread starts (the communicator's streams, OpenMP): they inherit the binding.
    const LaunchInfo launch = detect_launch();
    const std::vector<int> cpus = bind_cores_to_rank(launch.local_rank, launch.local_world_size);
    std::ostringstream text;
    for (std::size_t i = 0; i < cpus.size(); ++i) text << (i ? "," : "") << cpus[i];
    bound_cpus = text.str();
  }
  // The trainer's collectives take buffers where the model runs: this local rank's device
  // (cuda:LOCAL_RANK mod the visible devices, or the CPU with --use_cpu or no GPU), which
  // zero::train's Trainer chooses by the same rule.
  CommOptions comm_options = CommOptions::from_environment();
  if (process.timeout) comm_options.timeout = *process.timeout;
  std::unique_ptr<Communicator> communicator =
      make_communicator(choose_device(a.use_cpu).device.kind, comm_options);
  set_log_rank(communicator->rank(), communicator->world_size());
  if (!bound_cpus.empty()) log_info("bound to CPUs ", bound_cpus, " (--bind_cores_to_rank)");
  for (const std::string& note : flags.notes()) log_info(note);
  for (const std::string& note : process.notes) log_info(note);
  for (const std::string& note : notes) log_info(note);
  try {
    // The config precedence rule (zero/train/config_precedence.h) before anything is sized.
    const std::int64_t world =
        a.dry_run && a.world_size > 0 ? a.world_size : communicator->world_size();
    for (const std::string& line : train::apply_config_precedence(a, world))
      log_info("from the DeepSpeed config: ", line);
    train::train(a, *communicator);
  } catch (const train::InputError& error) {
    if (communicator->rank() == 0) std::cerr << "zero train: error: " << error.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace zero::cli
