// Engine::gather_master: one unit's fp32 master, whole, for saving a 16-bit run's model.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {

namespace {

std::size_t round_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// The sub-group holding unit `u` (offload_optimizer: sub-groups of whole units).
std::size_t group_of(const Engine::Impl& d, std::size_t u) {
  for (std::size_t g = 0; g < d.sub_groups.size(); ++g)
    if (u >= d.sub_groups[g].first_unit && u < d.sub_groups[g].last_unit) return g;
  ZERO_THROW("gather_master: unit '", d.units[u].name, "' is in no optimizer sub-group");
}

}  // namespace

Buffer Engine::gather_master(UnitId unit_id) {
  initialize();
  Impl& d = *impl_;
  ZERO_CHECK(unit_id >= 0 && static_cast<std::size_t>(unit_id) < d.units.size(),
             "gather_master: no unit ", unit_id, " (the engine has ", d.units.size(), ")");
  ZERO_CHECK(d.policy.master_weights, "gather_master: the engine keeps no fp32 master (",
             name_of(d.policy.compute), " parameters without master weights)");
  const auto u = static_cast<std::size_t>(unit_id);
  const EngineUnit& unit = d.units[u];
  d.drain_for_shard_states();
  // The whole unit in device memory (the communicator's buffers); the rank's shard at its slot.
  Buffer full = d.ctx.allocator(MemorySpace::kDevice)
                    .allocate(unit.padded * sizeof(float), MemoryCategory::kWorkspace);
  // Where the rank's shard of the master lives: resident (device or host memory), the host copy a
  // checkpoint load made, or its sub-group's swap region (nvme): only the whole blocks of the
  // region around this unit's part are read, so a save reads each region once (a block at a unit
  // boundary twice), not once per unit of its sub-group. The buffer stays the size of the
  // sub-group's master, as before: the host allocator caches freed blocks by exact size, and a
  // buffer sized to each unit missed the cached one (the second gradient window's size) and added
  // its sizes to the final save's peak (+199 MiB for GPT-2 124M, configs/ds_zero3_nvme.json).
  const bool swapped = d.policy.swap_optimizer() && !d.on_device(unit_id);
  Buffer region;
  const float* source = nullptr;
  if (swapped && !d.checkpoint_view.allocated()) {
    const std::size_t g = group_of(d, u);
    const std::size_t alignment = d.optimizer_swap->io_alignment();
    const std::size_t padded = d.optimizer_swap->padded_bytes(d.master_regions[g]);
    const std::size_t first =
        (unit.owned_offset - d.sub_groups[g].owned_offset) * sizeof(float);  // in the region
    const std::size_t begin = first / alignment * alignment;
    const std::size_t end =
        std::min(round_up(first + unit.owned_count * sizeof(float), alignment), padded);
    region = d.ctx.allocator(d.policy.staging_space)
                 .allocate(padded + alignment, MemoryCategory::kWorkspace);
    if (!d.planning) {
      const auto address = reinterpret_cast<std::uintptr_t>(region.data());
      auto* part = reinterpret_cast<char*>(round_up(address, alignment));
      d.optimizer_swap->wait(
          d.optimizer_swap->read_range(d.master_regions[g], begin, end - begin, part));
      source = reinterpret_cast<const float*>(part + (first - begin));
    }
  } else if (swapped) {
    source = d.view_master() + unit.owned_offset;
  } else {
    source = d.owned_params(unit_id);
  }
  const bool host_reads_full = d.ctx.host_addressable(MemorySpace::kDevice);
  Buffer host;  // rank 0, where `full` is not host memory
  if (d.rank == 0 && !host_reads_full)
    host = d.ctx.allocator(MemorySpace::kHost)
               .allocate(unit.padded * sizeof(float), MemoryCategory::kWorkspace);
  if (d.planning)
    return d.rank == 0 ? (host_reads_full ? std::move(full) : std::move(host)) : Buffer{};

  Stream& compute = d.ctx.compute_stream();
  const std::size_t slot = d.policy.partitioned ? static_cast<std::size_t>(d.rank) * unit.shard : 0;
  float* own = full.data_as<float>() + slot;
  d.ctx.copy(compute, source, own, unit.owned_count * sizeof(float));
  compute.synchronize();
  if (d.policy.partitioned && !d.skip_collectives) {  // in place: send == recv + rank × shard
    d.comm.all_gather(own, full.data(), unit.shard, DType::kFloat32, "master " + unit.name);
    try {
      d.comm.synchronize();
    } catch (const Error& error) {
      ZERO_THROW("engine (rank ", d.rank, "/", d.world, ") gathering the master of unit '",
                 unit.name, "' failed: ", error.what());
    }
  }
  if (d.rank != 0) return {};
  if (host_reads_full) return full;
  d.ctx.copy(compute, full.data(), host.data(), unit.padded * sizeof(float));
  compute.synchronize();
  return host;
}

}  // namespace zero
