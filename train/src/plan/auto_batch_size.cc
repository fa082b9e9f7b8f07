// --auto_find_batch_size through the planner (auto_batch_size.h).
#include "plan/auto_batch_size.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "config/input_checks.h"
#include "kind/task_kind.h"
#include "plan/phase_memory.h"
#include "zero/comm/host_collectives.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/launch.h"
#include "zero/core/node_memory.h"
#include "zero/train/plan.h"

namespace zero::train::detail {

namespace {

std::string value_of(const std::map<std::string, std::string>& environment, const char* name) {
  const auto found = environment.find(name);
  return found == environment.end() ? "" : found->second;
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
  return read_node_memory().limit_bytes();
}

std::int64_t planned_node_bytes(const PlanSetup& setup, int world, int ranks) {
  return planned_node_bytes(plan_rank(setup, world, 0), setup.device_is_host, ranks);
}

std::int64_t planned_node_bytes(const RankPlan& plan, bool device_is_host, int ranks) {
  std::int64_t largest = 0;
  for (std::size_t p = 0; p < kNumPhases; ++p) {
    if (!plan.phases[p].runs) continue;
    largest =
        std::max(largest, device_is_host ? planned_resident_bytes(plan, static_cast<Phase>(p), true)
                                         : plan.phases[p].in(MemorySpace::kDevice));
  }
  return device_is_host ? ranks * largest : largest + GpuAllowance{}.total();
}

std::int64_t fitting_batch_size(const RunConfig& run, int ranks, std::int64_t budget_bytes,
                                std::string& note, const std::string& budget) {
  const TrainingArguments& arguments = run.arguments;
  if (!task_kind(arguments.task).planned())
    input_error(
        "--auto_find_batch_size: the planner plans --task causal-lm runs only; give "
        "--per_device_train_batch_size");
  if (!arguments.deepspeed.empty()) {  // the batch must be the flag's to halve it
    const nlohmann::json config = nlohmann::json::parse(run.deepspeed_text.text, nullptr, false);
    for (const char* key : {"train_micro_batch_size_per_gpu", "train_batch_size"})
      if (config.is_object() && config.contains(key) && config[key].is_number())
        input_error("--auto_find_batch_size: ", arguments.deepspeed, " writes ", key, " ",
                    config[key].dump(), "; give it \"auto\" so the batch found is the run's");
  }
  PlanSetup setup = plan_setup(run);
  std::ostringstream tried;
  for (std::int64_t batch = arguments.per_device_train_batch_size; batch >= 1; batch /= 2) {
    setup.batch_size = batch;
    const std::int64_t bytes = planned_node_bytes(setup, run.world_size, ranks);
    tried << (batch == arguments.per_device_train_batch_size ? "" : ", ") << batch << ": "
          << gib(bytes);
    if (bytes <= budget_bytes) {
      note = "--auto_find_batch_size: per_device_train_batch_size " + std::to_string(batch) +
             " (planned for " + budget + ", " + std::to_string(ranks) +
             " rank(s) per node: " + tried.str() + "; " + budget + " has " + gib(budget_bytes) +
             ")";
      return batch;
    }
  }
  input_error("--auto_find_batch_size: no micro-batch fits ", budget, "'s ", gib(budget_bytes),
              " (planned for ", ranks, " rank(s) per node: ", tried.str(),
              "); give the run more memory, more ranks or a ZeRO stage that shards more");
}

int fitting_recompute_blocks(const RunConfig& run, int ranks, std::int64_t budget_bytes,
                             std::string& note, const std::string& budget) {
  if (!task_kind(run.arguments.task).planned())
    input_error(
        "--recompute_blocks auto: the planner plans --task causal-lm runs only; give a count");
  PlanSetup setup = plan_setup(run);
  ZERO_CHECK(setup.model, "--recompute_blocks auto: the plan has no model");
  const std::int64_t layers = setup.model->n_layer;
  std::ostringstream tried;
  auto fits = [&](int blocks, const RankPlan& plan) {
    const std::int64_t bytes = planned_node_bytes(plan, setup.device_is_host, ranks);
    tried << (tried.tellp() > 0 ? ", " : "") << blocks << ": " << gib(bytes);
    return bytes <= budget_bytes;
  };
  const int blocks = smallest_recompute_blocks(setup, run.world_size, fits);
  if (blocks < 0)
    input_error("--recompute_blocks auto: even recomputing all ", layers, " blocks does not fit ",
                budget, "'s ", gib(budget_bytes), " (planned for ", ranks,
                " rank(s) per node, blocks recomputed: ", tried.str(),
                "); give the run more memory, more ranks or a ZeRO stage that shards more");
  note = "--recompute_blocks auto: the first " + std::to_string(blocks) + " of " +
         std::to_string(layers) + " blocks recomputed (planned for " + budget + ", " +
         std::to_string(ranks) + " rank(s) per node, blocks recomputed: " + tried.str() + "; " +
         budget + " has " + gib(budget_bytes) + ")";
  return blocks;
}

std::int64_t rank_budget_bytes(const Device& device, const char* flag, std::string& budget) {
  // A CUDA rank is bounded by its own GPU's memory, a CPU rank by the node's.
  if (device.kind != DeviceKind::kCuda) {
    budget = "this node";
    return node_memory_bytes(process_environment());
  }
  budget = device.to_string();
  std::int64_t budget_bytes = 0;
  for (const CudaDeviceInfo& info : cuda_devices())
    if (info.index == device.index)
      budget_bytes = static_cast<std::int64_t>(info.total_memory_bytes);
  ZERO_CHECK(budget_bytes > 0, flag, ": cannot read the memory of ", budget);
  return budget_bytes;
}

RunConfig fit_recompute_blocks(const RunConfig& run, Communicator& communicator,
                               DeviceContext& context, std::string& note) {
  std::string budget;
  const std::int64_t budget_bytes =
      rank_budget_bytes(context.device(), "--recompute_blocks auto", budget);
  const int blocks =
      fitting_recompute_blocks(run, ranks_on_this_node(run.world_size), budget_bytes, note, budget);
  // Every rank recomputes the most blocks any rank needs.
  float most = static_cast<float>(blocks);
  all_reduce_host(communicator, context, {&most, 1}, ReduceOp::kMax, "recompute_blocks");
  RunConfig fitted = run;
  fitted.arguments.recompute_blocks = std::to_string(static_cast<int>(most));
  return fitted;
}

RunConfig fit_recompute_blocks_planned(const RunConfig& run, std::string& note) {
  const Device device{trainer_device_is_host(run.arguments) ? DeviceKind::kCpu : DeviceKind::kCuda,
                      0};
  std::string budget;
  const std::int64_t budget_bytes = rank_budget_bytes(device, "--recompute_blocks auto", budget);
  RunConfig fitted = run;
  fitted.arguments.recompute_blocks = std::to_string(fitting_recompute_blocks(
      run, ranks_on_this_node(run.world_size), budget_bytes, note, budget));
  return fitted;
}

RunConfig fit_batch_size(const RunConfig& run, Communicator& communicator, DeviceContext& context,
                         std::string& note) {
  const int world = communicator.world_size();
  std::string budget;
  const std::int64_t budget_bytes =
      rank_budget_bytes(context.device(), "--auto_find_batch_size", budget);
  const std::int64_t batch =
      fitting_batch_size(run, ranks_on_this_node(world), budget_bytes, note, budget);
  // Every rank runs the smallest batch any node fits (the maximum of the negated batches).
  float negated = -static_cast<float>(batch);
  all_reduce_host(communicator, context, {&negated, 1}, ReduceOp::kMax, "auto_find_batch_size");
  RunConfig fitted = with_micro_batch(run, static_cast<std::int64_t>(-negated));
  fitted.arguments.auto_find_batch_size = false;
  return fitted;
}

}  // namespace zero::train::detail
