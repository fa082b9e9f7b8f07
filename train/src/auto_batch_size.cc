// --auto_find_batch_size through the planner (auto_batch_size.h).
#include "auto_batch_size.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "prepare.h"
#include "zero/comm/host_collectives.h"
#include "zero/core/launch.h"
#include "zero/train/config_precedence.h"
#include "zero/train/plan.h"

namespace zero::train::detail {

namespace {

std::string value_of(const std::map<std::string, std::string>& environment, const char* name) {
  const auto found = environment.find(name);
  return found == environment.end() ? "" : found->second;
}

// A number from the first line of `path`; none when absent or not a number ("max").
std::optional<std::int64_t> read_number(const std::filesystem::path& path) {
  std::ifstream in(path);
  long long value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

std::int64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long long kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<std::int64_t>(kib) * 1024;
  return std::numeric_limits<std::int64_t>::max();
}

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1ll << 30));
  return text;
}

}  // namespace

std::int64_t node_memory_bytes(const std::map<std::string, std::string>& environment) {
  if (const std::string given = value_of(environment, "ZERO_NODE_MEMORY_BYTES"); !given.empty()) {
    char* end = nullptr;
    const long long bytes = std::strtoll(given.c_str(), &end, 10);
    if (end == given.c_str() || *end != '\0' || bytes <= 0)
      input_error("ZERO_NODE_MEMORY_BYTES=", given, " is not a positive number of bytes");
    return bytes;
  }
  std::int64_t bytes = mem_available_bytes();
  const std::filesystem::path cgroup = "/sys/fs/cgroup";
  if (const auto limit = read_number(cgroup / "memory.max")) {
    bytes = std::min(bytes, *limit - read_number(cgroup / "memory.current").value_or(0));
  } else if (const auto v1 = read_number(cgroup / "memory" / "memory.limit_in_bytes")) {
    bytes =
        std::min(bytes, *v1 - read_number(cgroup / "memory" / "memory.usage_in_bytes").value_or(0));
  }
  return bytes;
}

int ranks_per_node(const std::map<std::string, std::string>& environment, int world) {
  for (const char* name :
       {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    const int ranks = std::atoi(value_of(environment, name).c_str());
    if (ranks > 0) return std::min(ranks, world);
  }
  return world;
}

std::int64_t planned_node_bytes(const TrainingArguments& arguments, int world, int ranks) {
  const RankPlan plan = plan_rank(plan_setup(arguments, world), world, 0);
  const std::int64_t per_rank = plan.peaks.reserved_peak(MemorySpace::kDevice) +
                                plan.peaks.reserved_peak(MemorySpace::kHost) +
                                plan.peaks.reserved_peak(MemorySpace::kHostPinned);
  return ranks * per_rank + std::max(ranks * plan.load_host_bytes, plan.save_host_bytes);
}

std::int64_t fitting_batch_size(const TrainingArguments& arguments, int world, int ranks,
                                std::int64_t node_bytes, std::string& note) {
  if (arguments.task != "causal-lm")
    input_error(
        "--auto_find_batch_size: the planner plans --task causal-lm runs only; give "
        "--per_device_train_batch_size");
  if (!arguments.deepspeed.empty()) {  // the batch must be the flag's to halve it
    const nlohmann::json config =
        nlohmann::json::parse(read_deepspeed_file(arguments.deepspeed), nullptr, false);
    for (const char* key : {"train_micro_batch_size_per_gpu", "train_batch_size"})
      if (config.is_object() && config.contains(key) && config[key].is_number())
        input_error("--auto_find_batch_size: ", arguments.deepspeed, " writes ", key, " ",
                    config[key].dump(), "; give it \"auto\" so the batch found is the run's");
  }
  TrainingArguments trial = arguments;
  std::ostringstream tried;
  for (std::int64_t batch = arguments.per_device_train_batch_size; batch >= 1; batch /= 2) {
    trial.per_device_train_batch_size = batch;
    const std::int64_t bytes = planned_node_bytes(trial, world, ranks);
    tried << (batch == arguments.per_device_train_batch_size ? "" : ", ") << batch << ": "
          << gib(bytes);
    if (bytes <= node_bytes) {
      note = "--auto_find_batch_size: per_device_train_batch_size " + std::to_string(batch) +
             " (planned per node of " + std::to_string(ranks) + " rank(s): " + tried.str() +
             "; the node has " + gib(node_bytes) + ")";
      return batch;
    }
  }
  input_error("--auto_find_batch_size: no micro-batch fits this node's ", gib(node_bytes),
              " (planned per node of ", ranks, " rank(s): ", tried.str(),
              "); give the run more memory, more ranks or a ZeRO stage that shards more");
}

std::string apply_auto_find_batch_size(TrainingArguments& arguments, Communicator& communicator,
                                       DeviceContext& context) {
  const std::map<std::string, std::string> environment = process_environment();
  const int world = communicator.world_size();
  std::string note;
  const std::int64_t batch = fitting_batch_size(
      arguments, world, ranks_per_node(environment, world), node_memory_bytes(environment), note);
  // Every rank runs the smallest batch any node fits (the maximum of the negated batches).
  float negated = -static_cast<float>(batch);
  all_reduce_host(communicator, context, {&negated, 1}, ReduceOp::kMax, "auto_find_batch_size");
  arguments.per_device_train_batch_size = static_cast<std::int64_t>(-negated);
  arguments.auto_find_batch_size = false;
  return note;
}

}  // namespace zero::train::detail
