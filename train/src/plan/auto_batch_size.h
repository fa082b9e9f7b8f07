// --auto_find_batch_size (internal to zero::train): Hugging Face halves the micro-batch each time
// a step runs out of memory; zero asks its planner before anything is allocated.
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

// The per-device batch from run's per_device_train_batch_size down, halving, until run's plan
// (plan_setup(run), only its micro-batch varied) fits `budget_bytes` of `budget` ("this node",
// "cuda:0"); throws InputError when even 1 does not fit. `note` gets the start-log line.
std::int64_t fitting_batch_size(const RunConfig& run, int ranks, std::int64_t budget_bytes,
                                std::string& note, const std::string& budget = "this node");

// train()'s step (all ranks): `run` at the batch every rank can run (the smallest any rank's node
// fits; with_micro_batch); `note` gets the line for rank 0's log.
RunConfig fit_batch_size(const RunConfig& run, Communicator& communicator, DeviceContext& context,
                         std::string& note);

}  // namespace zero::train::detail
