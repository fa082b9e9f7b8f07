// --auto_find_batch_size and --recompute_blocks auto (internal to zero::train): Hugging Face halves
// the micro-batch each time a step runs out of memory; zero asks its planner before anything is
// allocated, for the batch and for the fewest blocks to recompute.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/train/plan.h"
#include "zero/train/run_config.h"

namespace zero::train::detail {

// The bytes this node can give the run: ZERO_NODE_MEMORY_BYTES when set (tests), else what the
// run plan's refusal checks against (read_node_memory(): MemTotal or the process's memory cgroup
// limit, zero/core/node_memory.h), so a batch found here passes that check. The ranks sharing it:
// the launcher's local world size, else `world` (ranks_on_this_node, phase_memory.h).
std::int64_t node_memory_bytes(const std::map<std::string, std::string>& environment);

// What `setup` (plan.h) at `world` ranks needs of the memory that bounds it. On the CPU backend
// (trainer_device_is_host) the node's: `ranks` x its largest phase's planned resident bytes, as
// the run plan's node check counts them. On a CUDA device its own GPU's: the largest phase's
// device bytes + the GPU allowance (GpuAllowance: CUDA context, cuBLAS, NCCL).
std::int64_t planned_node_bytes(const PlanSetup& setup, int world, int ranks);
// The same of a plan already made (of a setup on the CPU backend when `device_is_host`).
std::int64_t planned_node_bytes(const RankPlan& plan, bool device_is_host, int ranks);

// The per-device batch from run's per_device_train_batch_size down, halving, until run's plan
// (plan_setup(run), only its micro-batch varied) fits `budget_bytes` of `budget` ("this node",
// "cuda:0"); throws InputError when even 1 does not fit. `note` gets the start-log line.
std::int64_t fitting_batch_size(const RunConfig& run, int ranks, std::int64_t budget_bytes,
                                std::string& note, const std::string& budget = "this node");

// The fewest first blocks (--recompute_blocks auto) whose plan of `run` fits `budget_bytes` of
// `budget`, as fitting_batch_size counts the memory; throws InputError when even every block does
// not fit. `note` gets the start-log line.
int fitting_recompute_blocks(const RunConfig& run, int ranks, std::int64_t budget_bytes,
                             std::string& note, const std::string& budget = "this node");

// The memory that bounds a rank on `device`: a CUDA device's own (cuda_devices(); throws
// zero::Error naming `flag` when it cannot be read), else this node's (node_memory_bytes).
// `budget` gets its name ("cuda:0", "this node").
std::int64_t rank_budget_bytes(const Device& device, const char* flag, std::string& budget);

// train()'s step for --recompute_blocks auto (all ranks of `communicator`):
// `run` with the count every rank can run (the largest any rank's budget needs) in place of
// "auto"; `note` gets the line for rank 0's log.
RunConfig fit_recompute_blocks(const RunConfig& run, Communicator& communicator,
                               DeviceContext& context, std::string& note);

// The dry run's --recompute_blocks auto: `run` with the count this node's budget needs (the device
// trainer_device_is_host picks: this node, or the first GPU), for ranks_on_this_node ranks.
RunConfig fit_recompute_blocks_planned(const RunConfig& run, std::string& note);

// train()'s step (all ranks): `run` at the batch every rank can run (the smallest any rank's node
// fits; with_micro_batch); `note` gets the line for rank 0's log.
RunConfig fit_batch_size(const RunConfig& run, Communicator& communicator, DeviceContext& context,
                         std::string& note);

}  // namespace zero::train::detail
