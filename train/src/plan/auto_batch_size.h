// --auto_find_batch_size (internal to zero::train): Hugging Face halves the micro-batch each time
// a step runs out of memory; zero asks its planner before anything is allocated.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/train/arguments.h"

namespace zero::train::detail {

// The bytes this node can give the run: ZERO_NODE_MEMORY_BYTES when set (tests), else what the
// run plan's refusal checks against (read_node_memory(): MemTotal or the process's memory cgroup
// limit, zero/core/node_memory.h), so a batch found here passes that check. The ranks sharing it:
// the launcher's local world size, else `world` (ranks_on_this_node, phase_memory.h).
std::int64_t node_memory_bytes(const std::map<std::string, std::string>& environment);

// What a plan (plan.h) of `arguments` at `world` ranks needs of the memory that bounds it. On the
// CPU backend (trainer_device_is_host) the node's: `ranks` x its largest phase's planned resident
// bytes, as the run plan's node check counts them. On a CUDA device its own GPU's: the largest
// phase's device bytes + the GPU allowance (GpuAllowance: CUDA context, cuBLAS, NCCL).
std::int64_t planned_node_bytes(const TrainingArguments& arguments, int world, int ranks);

// The per-device batch from per_device_train_batch_size down, halving, until the plan fits
// `budget_bytes` of `budget` ("this node", "cuda:0"); throws InputError when even 1 does not
// fit. `note` gets the start-log line.
std::int64_t fitting_batch_size(const TrainingArguments& arguments, int world, int ranks,
                                std::int64_t budget_bytes, std::string& note,
                                const std::string& budget = "this node");

// train()'s step (all ranks): the batch every rank can run (the smallest any rank's node fits),
// set in `arguments`; returns the note for rank 0's log.
std::string apply_auto_find_batch_size(TrainingArguments& arguments, Communicator& communicator,
                                       DeviceContext& context);

}  // namespace zero::train::detail
