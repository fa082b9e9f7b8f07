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

// The bytes this node can give the run: ZERO_NODE_MEMORY_BYTES when set, else the smaller of
// /proc/meminfo's MemAvailable and the cgroup's memory.max less its memory.current (v2) or
// memory.limit_in_bytes less memory.usage_in_bytes (v1). The ranks sharing it: LOCAL_WORLD_SIZE,
// OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE, else `world`.
std::int64_t node_memory_bytes(const std::map<std::string, std::string>& environment);
int ranks_per_node(const std::map<std::string, std::string>& environment, int world);

// What a plan (plan.h) of `arguments` at `world` ranks needs on one node: `ranks` ranks' device,
// host and pinned bytes reserved at peak (the model runs on the CPU, so its "device" is host
// memory too), plus the larger of every rank's load of a pretrained model and rank 0's save.
std::int64_t planned_node_bytes(const TrainingArguments& arguments, int world, int ranks);

// The per-device batch from per_device_train_batch_size down, halving, until the plan fits
// `node_bytes`; throws InputError when even 1 does not fit. `note` gets the start-log line.
std::int64_t fitting_batch_size(const TrainingArguments& arguments, int world, int ranks,
                                std::int64_t node_bytes, std::string& note);

// train()'s step (all ranks): the batch every rank can run (the smallest any rank's node fits),
// set in `arguments`; returns the note for rank 0's log.
std::string apply_auto_find_batch_size(TrainingArguments& arguments, Communicator& communicator,
                                       DeviceContext& context);

}  // namespace zero::train::detail
