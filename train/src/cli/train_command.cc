// `zero train`'s run from its parsed flags: process settings, communicator, precedence, train().
#include "zero/train/train_command.h"

#include <stdlib.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/train/arguments.h"
#include "zero/train/hub_cache.h"
#include "zero/train/launch_flags.h"
#include "zero/train/run_config.h"

namespace zero::train {

TrainResult train_from_flags(cli::CommandFlags& flags, const RunOptions& options) {
  TrainingArguments& a = flags.values().training;  // Hugging Face's defaults, then the flags
  a.plot = !flags.values().train.no_plot;
  a.given_flags = flags.given_names();
  // Hugging Face's process flags (--local_rank, --ddp_backend, --ddp_timeout, --log_level*)
  // become the environment the launch detection, communicator and logger read.
  std::vector<std::string> notes = apply_accelerate_environment(a, process_environment());
  for (std::string& line : apply_flag_equivalents(a)) notes.push_back(std::move(line));
  for (const std::string& line : resolve_hub_names(a, process_environment()))
    notes.push_back("from the Hugging Face cache: " + line);
  const ProcessSettings process = process_settings(a, process_environment(), detect_launch().rank);
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
  // The run's configuration, resolved once (zero/train/run_config.h): the config precedence rule
  // and the DeepSpeed config, before anything is sized or read.
  const int world =
      a.dry_run && a.world_size > 0 ? static_cast<int>(a.world_size) : communicator->world_size();
  const RunConfig run = make_run_config(a, world);
  for (const std::string& line : run.from_file) log_info("from the DeepSpeed config: ", line);
  return train(run, *communicator, options);
}

}  // namespace zero::train
