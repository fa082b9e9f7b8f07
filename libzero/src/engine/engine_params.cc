// The compute parameters around the step: the end of a micro-step (the reducer's flush, then
// the gatherer), the 16-bit parameters from the fp32 master, and stages 1-2's all-gather of the
// updated shards on the communication stream.
#include <algorithm>

#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

void Engine::Impl::end_micro_step() {
  reducer.end_micro_step(at_boundary_micro_step());
  ++micro_steps;
  gatherer.end_micro_step();
}

void Engine::Impl::params_from_master() {
  if (!policy.master_weights) return;
  if (policy.offload_params()) {  // offload_param without offload_optimizer: copied out
    const Buffer staging = offload.make_param_device_staging();
    AlignedHostBuffer param_io = make_param_io_buffer(ctx, policy, storage);
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
      offload.store_param_shard(u, storage.owned_params(u), staging, param_io);
    offload.after_param_shards_stored();
    return;
  }
  if (planning) return;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
    ctx.convert(ctx.compute_stream(), storage.owned_params(u), DType::kFloat32,
                storage.owned_compute_params(u), policy.compute, storage.unit(u).owned_count);
}

void Engine::Impl::all_gather_params() {
  if (skip_collectives || world == 1) return;
  const DType dtype = policy.compute;
  const std::size_t bytes = size_of(dtype);
  const auto at = [bytes](void* base, std::size_t index) {
    return static_cast<char*>(base) + index * bytes;
  };
  const std::size_t chunk = allgather_chunk_elements(options, world);
  void* staging = gather_staging.data();
  const auto blocks = static_cast<std::size_t>(world);
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    const EngineUnit& unit = units[u];
    const std::size_t shard = storage.unit(u).shard;
    void* base = storage.full_params(u);
    void* own = storage.owned_compute_params(u);
    if (shard <= chunk) {  // in place: every rank's shard lands at its own offset
      comm.all_gather(own, base, shard, dtype, "params " + unit.name);
      continue;
    }
    // Chunk [begin, begin + count) of every rank's shard through the staging buffer.
    for (std::size_t begin = 0; begin < shard; begin += chunk) {
      const std::size_t count = std::min(chunk, shard - begin);
      comm.all_gather(at(own, begin), staging, count, dtype, "params " + unit.name);
      for (std::size_t r = 0; r < blocks; ++r)
        ctx.copy(comm.stream(), at(staging, r * count), at(base, r * shard + begin), count * bytes);
    }
  }
  params_ready = comm.stream().record();
  comm_done = params_ready;
  if (!options.overlap_comm) synchronize("all-gathering updated parameters");
}

}  // namespace zero
