// The ZeRO model-state memory formula (bytes per rank and space from the StatePolicy), sub-groups
// and the reduction and all-gather buffer sizes.
#include "zero/engine/memory_formula.h"

#include <algorithm>

#include "zero/core/error.h"
#include "zero/core/partition.h"

namespace zero {
namespace {

std::size_t padded_total(std::span<const std::size_t> unit_num_elements, int world_size,
                         std::size_t alignment_elements) {
  std::size_t total = 0;
  for (std::size_t count : unit_num_elements)
    total += padded_num_elements(count, world_size, alignment_elements);
  return total;
}

}  // namespace

std::vector<SubGroup> optimizer_sub_groups(std::span<const std::size_t> owned_num_elements,
                                           std::int64_t sub_group_size) {
  const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(sub_group_size, 1));
  const std::size_t piece =
      std::max(limit / kSubGroupQuantumElements, std::size_t{1}) * kSubGroupQuantumElements;
  std::vector<SubGroup> groups;
  std::size_t offset = 0;
  for (std::size_t u = 0; u < owned_num_elements.size(); ++u) {
    const std::size_t count = owned_num_elements[u];
    if (count > limit) {  // split: a group per piece, the last one open to the next units
      for (std::size_t at = 0; at < count; at += piece)
        groups.push_back({u, u + 1, offset + at, std::min(piece, count - at), at});
      offset += count;
      continue;
    }
    if (groups.empty() || groups.back().num_elements + count > limit)
      groups.push_back({u, u, offset, 0, 0});
    groups.back().last_unit = u + 1;
    groups.back().num_elements += count;
    offset += count;
  }
  return groups;
}

std::vector<SubGroupPiece> sub_group_pieces(const SubGroup& group,
                                            std::span<const std::size_t> owned_num_elements) {
  std::vector<SubGroupPiece> pieces;
  std::size_t at = 0;  // in the group
  for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
    const std::size_t begin = u == group.first_unit ? group.first_unit_offset : 0;
    const std::size_t count = std::min(owned_num_elements[u] - begin, group.num_elements - at);
    pieces.push_back({u, begin, at, count});
    at += count;
  }
  ZERO_CHECK(at == group.num_elements, "sub-group at owned element ", group.owned_offset, ": its ",
             pieces.size(), " units hold ", at, " of its ", group.num_elements, " elements");
  return pieces;
}

std::size_t device_sub_groups(const StatePolicy& policy, std::span<const SubGroup> groups) {
  if (!policy.host_step || policy.offload_ratio >= 1.0) return 0;
  auto device =
      static_cast<std::size_t>((1.0 - policy.offload_ratio) * static_cast<double>(groups.size()));
  // A unit's master and state are one buffer's: the split falls at a unit's start.
  while (device > 0 && device < groups.size() && groups[device].first_unit_offset != 0) --device;
  return device;
}

std::size_t device_owned_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size) {
  const StatePolicy policy = state_policy(options);
  if (!policy.host_step) return 0;
  std::vector<std::size_t> owned;
  for (std::size_t count : unit_num_elements)
    owned.push_back(padded_num_elements(count, world_size, options.alignment_elements) /
                    static_cast<std::size_t>(world_size));
  const std::vector<SubGroup> groups = optimizer_sub_groups(owned, options.sub_group_size);
  const std::size_t device = device_sub_groups(policy, groups);
  return device < groups.size()
             ? groups[device].owned_offset
             : (groups.empty() ? 0 : groups.back().owned_offset + groups.back().num_elements);
}

std::vector<bool> swapped_param_units(const EngineOptions& options,
                                      std::span<const std::size_t> unit_num_elements,
                                      int world_size) {
  std::vector<bool> swapped(unit_num_elements.size(), false);
  if (!state_policy(options).swap_params()) return swapped;
  const auto max_in_cpu =
      static_cast<std::size_t>(std::max<std::int64_t>(options.offload_param.max_in_cpu, 0));
  std::size_t in_cpu = 0;
  bool full = false;
  for (std::size_t u = 0; u < unit_num_elements.size(); ++u) {
    const std::size_t shard =
        padded_num_elements(unit_num_elements[u], world_size, options.alignment_elements) /
        static_cast<std::size_t>(world_size);
    full = full || in_cpu + shard > max_in_cpu;  // in order: the first units stay cached
    swapped[u] = full;
    if (!full) in_cpu += shard;
  }
  return swapped;
}

ModelStateBytes model_state_bytes(int stage, std::span<const std::size_t> unit_num_elements,
                                  int world_size, std::size_t alignment_elements,
                                  DType compute_dtype, int optimizer_states_per_element,
                                  DType accumulate_dtype) {
  const StatePolicy policy = state_policy(stage, compute_dtype, accumulate_dtype);
  return model_state_bytes(policy, unit_num_elements, world_size, alignment_elements,
                           optimizer_states_per_element)
      .total();
}

ModelStateBytes ModelStateBytesBySpace::total() const {
  ModelStateBytes sum;
  for (const ModelStateBytes& bytes : spaces) {
    sum.params += bytes.params;
    sum.param_shard += bytes.param_shard;
    sum.grads += bytes.grads;
    sum.grad_shard += bytes.grad_shard;
    sum.master_params += bytes.master_params;
    sum.optimizer_state += bytes.optimizer_state;
  }
  return sum;
}

ModelStateBytesBySpace model_state_bytes(const StatePolicy& policy,
                                         std::span<const std::size_t> unit_num_elements,
                                         int world_size, std::size_t alignment_elements,
                                         int optimizer_states_per_element,
                                         const std::vector<bool>& swapped_param_units,
                                         std::size_t device_owned_elements) {
  const auto padded =
      static_cast<std::int64_t>(padded_total(unit_num_elements, world_size, alignment_elements));
  const std::int64_t shard = padded / world_size;
  const auto compute = static_cast<std::int64_t>(size_of(policy.compute));
  const auto accumulate = static_cast<std::int64_t>(size_of(policy.accumulate));
  const auto grad_shard = static_cast<std::int64_t>(size_of(policy.grad_shard_dtype));
  const std::int64_t master = policy.master_weights ? 4 : 0;
  const std::int64_t states = 4 * optimizer_states_per_element;
  ModelStateBytesBySpace bytes;
  const std::int64_t owned = policy.partitioned ? shard : padded;
  const auto on_device = static_cast<std::int64_t>(device_owned_elements);  // partial offload
  bytes.in(policy.master_space).master_params = master * (owned - on_device);
  bytes.in(policy.optimizer_state_space).optimizer_state = states * (owned - on_device);
  bytes.in(MemorySpace::kDevice).master_params += master * on_device;
  bytes.in(MemorySpace::kDevice).optimizer_state += states * on_device;
  if (policy.full_params) bytes.in(policy.params_space).params = compute * padded;
  if (policy.full_grads) bytes.in(policy.full_grads_space).grads = accumulate * padded;
  if (policy.grad_shard) {
    const auto stored = static_cast<std::int64_t>(
        size_of(policy.swap_grads() ? policy.grad_swap_dtype : policy.grad_shard_dtype));
    bytes.in(policy.grad_shard_space).grad_shard = stored * (shard - on_device);
    bytes.in(MemorySpace::kDevice).grad_shard += grad_shard * on_device;
  }
  if (policy.param_shard) {
    if (!policy.swap_params()) {
      bytes.in(policy.params_space).param_shard = compute * shard;
    } else {  // the first units (max_in_cpu elements) cached on the host, the rest swapped
      ZERO_CHECK(swapped_param_units.size() == unit_num_elements.size(),
                 "model_state_bytes: offload_param nvme needs swapped_param_units() per unit");
      for (std::size_t u = 0; u < unit_num_elements.size(); ++u) {
        const auto unit_shard = static_cast<std::int64_t>(
            padded_num_elements(unit_num_elements[u], world_size, alignment_elements) /
            static_cast<std::size_t>(world_size));
        const MemorySpace space =
            swapped_param_units[u] ? MemorySpace::kNvme : policy.param_cache_space;
        bytes.in(space).param_shard += compute * unit_shard;
      }
    }
  }
  return bytes;
}

ModelStateBytesBySpace model_state_bytes(const EngineOptions& options,
                                         std::span<const std::size_t> unit_num_elements,
                                         int world_size, int optimizer_states_per_element) {
  return model_state_bytes(state_policy(options), unit_num_elements, world_size,
                           options.alignment_elements, optimizer_states_per_element,
                           swapped_param_units(options, unit_num_elements, world_size),
                           device_owned_elements(options, unit_num_elements, world_size));
}

BucketSize reduce_bucket_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size) {
  const std::size_t total = padded_total(unit_num_elements, world_size, options.alignment_elements);
  const std::size_t quantum = static_cast<std::size_t>(world_size) * options.alignment_elements;
  BucketSize size;
  const auto requested = static_cast<std::size_t>(options.reduce_bucket_size);  // validated >= 0
  std::size_t bucket = std::max(requested / quantum * quantum, quantum);
  size.bucket_elements = std::min(bucket, total);
  const StatePolicy policy = state_policy(options);
  size.element_bytes = size_of(policy.model_grads);
  if (policy.partitioned && options.reduce_scatter && world_size > 1)
    size.receive_elements = size.bucket_elements / static_cast<std::size_t>(world_size);
  return size;
}

std::size_t allgather_chunk_elements(const EngineOptions& options, int world_size) {
  const std::size_t align = options.alignment_elements;
  const std::size_t per_rank = static_cast<std::size_t>(options.allgather_bucket_size) /
                               static_cast<std::size_t>(world_size);
  return std::max(per_rank / align * align, align);
}

std::size_t allgather_staging_elements(const EngineOptions& options,
                                       std::span<const std::size_t> unit_num_elements,
                                       int world_size) {
  if (!state_policy(options).gather_after_step || world_size == 1) return 0;
  const std::size_t chunk = allgather_chunk_elements(options, world_size);
  for (std::size_t count : unit_num_elements) {
    const std::size_t padded = padded_num_elements(count, world_size, options.alignment_elements);
    if (padded / static_cast<std::size_t>(world_size) > chunk)
      return chunk * static_cast<std::size_t>(world_size);
  }
  return 0;
}

}  // namespace zero
