// Engine::gather_master: one unit's fp32 master, whole, for saving a 16-bit run's model.
#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {

namespace {

// The piece's master values, read from sub-group g's master region into `region` (a host buffer
// of its padded bytes): only the whole blocks around the piece, so a save reads each region once
// (a block at a unit boundary twice), not once per unit of its sub-group.
const float* read_master_piece(const Engine::Impl& d, std::size_t g, const SubGroupPiece& piece,
                               const AlignedHostBuffer& region) {
  SwapStore& swap = *d.storage.optimizer_swap();
  const std::size_t alignment = swap.io_alignment();
  const std::size_t padded = swap.padded_bytes(d.storage.master_region(g));
  const std::size_t first = piece.group_offset * sizeof(float);  // in the region
  const std::size_t begin = first / alignment * alignment;
  const std::size_t end =
      std::min(round_up(first + piece.num_elements * sizeof(float), alignment), padded);
  auto* part = static_cast<char*>(region.data);
  swap.wait(swap.read_range(d.storage.master_region(g), begin, end - begin, part));
  return reinterpret_cast<const float*>(part + (first - begin));
}

}  // namespace

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
  // checkpoint load made, or its sub-groups' swap regions (nvme; read_master_piece). The buffer
  // stays the size of the
  // sub-group's master, as before: the host allocator caches freed blocks by exact size, and a
  // buffer sized to each unit missed the cached one (the second gradient window's size) and added
  // its sizes to the final save's peak (+199 MiB for GPT-2 124M, configs/ds_zero3_nvme.json).
  const bool swapped = d.policy.swap_optimizer() && !d.storage.on_device(unit_id);
  const bool from_regions = swapped && !d.checkpoint_view.allocated();
  AlignedHostBuffer region;
  const float* source = nullptr;
  std::pair<std::size_t, std::size_t> groups{0, 0};  // its sub-groups, [first, last)
  if (from_regions) {
    groups = d.storage.groups_of(unit_id);
    std::size_t padded = 0;  // the largest of its sub-groups' master regions
    for (std::size_t g = groups.first; g < groups.second; ++g)
      padded =
          std::max(padded, d.storage.optimizer_swap()->padded_bytes(d.storage.master_region(g)));
    region =
        allocate_aligned(d.ctx.allocator(d.policy.staging_space), padded,
                         d.storage.optimizer_swap()->io_alignment(), MemoryCategory::kWorkspace);
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
  if (from_regions) {  // each of its sub-groups' part (a unit split over several: one piece each)
    for (std::size_t g = groups.first; g < groups.second; ++g)
      for (const SubGroupPiece& piece : d.storage.pieces(g))
        if (piece.unit == u) {
          d.ctx.copy(compute, read_master_piece(d, g, piece, region), own + piece.unit_offset,
                     piece.num_elements * sizeof(float));
          compute.synchronize();  // `region` is reused by the next piece
        }
  } else {
    d.ctx.copy(compute, source, own, at.owned_count * sizeof(float));
    compute.synchronize();
  }
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
