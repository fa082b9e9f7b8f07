// Aligned host buffers for swap I/O.
#include "swap_io.h"

#include <algorithm>
#include <cstdint>

namespace zero {

AlignedHostBuffer allocate_aligned(Allocator& allocator, std::size_t size_bytes,
                                   std::size_t alignment, MemoryCategory category) {
  AlignedHostBuffer result;
  result.buffer = allocator.allocate(size_bytes + alignment, category);
  if (result.buffer.data() != nullptr) {
    const auto address = reinterpret_cast<std::uintptr_t>(result.buffer.data());
    result.data = reinterpret_cast<void*>(round_up(address, alignment));
  }
  return result;
}

AlignedHostBuffer make_param_io_buffer(DeviceContext& context, const StatePolicy& policy,
                                       const StateStorage& storage) {
  if (!policy.swap_params()) return {};
  std::size_t largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u)
    if (storage.unit(u).param_region >= 0) largest = std::max(largest, storage.unit(u).shard);
  if (largest == 0) return {};
  const std::size_t alignment = storage.param_store()->io_alignment();
  return allocate_aligned(context.allocator(policy.param_cache_space),
                          round_up(largest * size_of(policy.compute), alignment), alignment,
                          MemoryCategory::kWorkspace);
}

}  // namespace zero
