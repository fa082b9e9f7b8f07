// Engine::gather_master: one unit's fp32 master, whole, for saving a 16-bit run's model.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {

Buffer Engine::gather_master(UnitId unit_id) {
  initialize();
  Impl& d = *impl_;
  d.offload.settle_step();
  d.check_unit(unit_id, "gather_master");
  ZERO_CHECK(d.policy.master_weights, "gather_master: the engine keeps no fp32 master (",
             name_of(d.policy.compute), " parameters without master weights)");
  const auto u = static_cast<std::size_t>(unit_id);
  const EngineUnit& unit = d.units[u];
  const StateStorage::Placement& at = d.storage.unit(unit_id);
  d.drain_for_shard_states();
  // The whole unit in device memory (the communicator's buffers); the rank's shard at its slot.
  Buffer full = d.ctx.allocator(MemorySpace::kDevice)
                    .allocate(at.padded * sizeof(float), MemoryCategory::kWorkspace);
  // Where the rank's shard of the master lives: resident (device or host memory), the host copy a
  // checkpoint load made, or its sub-group's swap region (nvme): only the whole blocks of the
  // region around this unit's part are read, so a save reads each region once (a block at a unit
  // boundary twice), not once per unit of its sub-group. The buffer stays the size of the
  // sub-group's master, as before: the host allocator caches freed blocks by exact size, and a
  // buffer sized to each unit missed the cached one (the second gradient window's size) and added
  // its sizes to the final save's peak (+199 MiB for GPT-2 124M, configs/ds_zero3_nvme.json).
  const bool swapped = d.policy.swap_optimizer() && !d.storage.on_device(unit_id);
  AlignedHostBuffer region;
  const float* source = nullptr;
  if (swapped && !d.checkpoint_view.allocated()) {
    const std::size_t g = d.storage.group_of(unit_id);
    SwapStore& swap = *d.storage.optimizer_swap();
    const std::size_t alignment = swap.io_alignment();
    const std::size_t padded = swap.padded_bytes(d.storage.master_region(g));
    const std::size_t first =  // in the region
        (at.owned_offset - d.storage.sub_groups()[g].owned_offset) * sizeof(float);
    const std::size_t begin = first / alignment * alignment;
    const std::size_t end =
        std::min(round_up(first + at.owned_count * sizeof(float), alignment), padded);
    region = allocate_aligned(d.ctx.allocator(d.policy.staging_space), padded, alignment,
                              MemoryCategory::kWorkspace);
    if (!d.planning) {
      auto* part = static_cast<char*>(region.data);
      swap.wait(swap.read_range(d.storage.master_region(g), begin, end - begin, part));
      source = reinterpret_cast<const float*>(part + (first - begin));
    }
  } else if (swapped) {
    source = d.view_master() + at.owned_offset;
  } else {
    source = d.storage.owned_params(unit_id);
  }
  const bool host_reads_full = d.ctx.host_addressable(MemorySpace::kDevice);
  Buffer host;  // rank 0, where `full` is not host memory
  if (d.rank == 0 && !host_reads_full)
    host = d.ctx.allocator(MemorySpace::kHost)
               .allocate(at.padded * sizeof(float), MemoryCategory::kWorkspace);
  if (d.planning)
    return d.rank == 0 ? (host_reads_full ? std::move(full) : std::move(host)) : Buffer{};

  Stream& compute = d.ctx.compute_stream();
  const std::size_t slot = d.storage.owned_range(unit_id).begin;
  float* own = full.data_as<float>() + slot;
  d.ctx.copy(compute, source, own, at.owned_count * sizeof(float));
  compute.synchronize();
  if (d.policy.partitioned && !d.skip_collectives) {  // in place: send == recv + rank × shard
    d.comm.all_gather(own, full.data(), at.shard, DType::kFloat32, "master " + unit.name);
    try {
      d.comm.synchronize();
    } catch (const Error& error) {
      ZERO_THROW("engine (rank ", d.rank, "/", d.world, ") gathering the master of unit '",
                 unit.name, "' failed: ", error.what());
    }
  }
  if (d.rank != 0) return {};
  if (host_reads_full) return full;
  d.ctx.copy(compute, full.data(), host.data(), at.padded * sizeof(float));
  compute.synchronize();
  return host;
}

}  // namespace zero
