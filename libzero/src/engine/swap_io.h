// Host buffers for swap I/O: allocations aligned to a SwapStore's io_alignment() (O_DIRECT), for
// the optimizer's sub-group slots (host_offload.h), the gradient windows and the swapped
// parameter shards.
#pragma once

#include <cstddef>

#include "state_storage.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/state_policy.h"

namespace zero {

inline std::size_t round_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// `data` is the first aligned byte inside `buffer`; null in a plan (nothing allocated).
struct AlignedHostBuffer {
  Buffer buffer;
  void* data = nullptr;
};

// `size_bytes` at an `alignment`-aligned address: size_bytes + alignment from `allocator`.
AlignedHostBuffer allocate_aligned(Allocator& allocator, std::size_t size_bytes,
                                   std::size_t alignment, MemoryCategory category);

// offload_param nvme: a buffer for the largest swapped parameter shard in the compute dtype
// (workspace in policy.param_cache_space); empty when no shard is swapped.
AlignedHostBuffer make_param_io_buffer(DeviceContext& context, const StatePolicy& policy,
                                       const StateStorage& storage);

}  // namespace zero
