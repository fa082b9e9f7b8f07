// ZeRO-Offload and ZeRO-Infinity in the engine, around the host side of offload (host_offload.h):
// the step's squared norms, the host step's launch, and stage 3 parameter shards (offload_param
// without offload_optimizer) stored out after a device step.
//
// Streams: every hand-over is an event, so the engine never asks which backend it runs on.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero {

void Engine::set_swap_store_factory(SwapStoreFactory factory) {
  ZERO_CHECK(!impl_->initialized,
             "set_swap_store_factory() after the engine was initialised: call it first");
  impl_->storage.set_swap_store_factory(std::move(factory));
}

SwapTraffic Engine::swap_traffic() const { return impl_->storage.swap_traffic(); }

void Engine::Impl::host_squares(std::vector<SquaresResult>& partial) {
  synchronize("reducing gradients before the optimizer step");
  try {
    ctx.copy_stream().synchronize();  // the last blocks' host accumulation
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank, "/", world, ", stage ", options.stage,
               ") copying reduced gradients to the host: ", error.what());
  }
  // Partial offload: the device sub-groups' gradients, on the device.
  if (storage.owned_split() > 0) {
    compute_after_comm();
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()) && storage.on_device(u); ++u)
      ctx.sum_of_squares(ctx.compute_stream(), storage.owned_grads(u), policy.grad_shard_dtype,
                         storage.unit(u).owned_count, &partial[u]);
    synchronize_compute("reducing gradients before the optimizer step");
  }
  offload.squares(partial);
}

bool Engine::Impl::overlaps_step() const {
  return policy.host_step && policy.param_shard && storage.owned_split() == 0;
}

void Engine::Impl::host_step(const OptimizerStep& args) {
  try {
    write_back_checkpoint_view();  // spans written for a load reach the regions first
    // A plan's step runs at once, not beside the next forward: it holds the parameter read that
    // forward's gathers may hold meanwhile.
    const Buffer reads = planning && overlaps_step() ? offload.plan_reads_beside_step() : Buffer();
    if (overlaps_step())
      offload.step_async(args, training.global_steps);
    else
      offload.step(args);
  } catch (const Error& error) {  // e.g. a swap store's I/O error, naming its file
    offload.throw_step_error(error, training.global_steps);
  }
}

Buffer Engine::Impl::make_param_device_staging() {
  if (!policy.offload_params() || policy.host_step) return Buffer();
  std::size_t largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
    largest = std::max(largest, storage.unit(u).shard);
  return ctx.allocator(MemorySpace::kDevice)
      .allocate(largest * size_of(policy.compute), MemoryCategory::kWorkspace);
}

void Engine::Impl::store_param_shard(UnitId u, const float* source, const Buffer& device_staging,
                                     AlignedHostBuffer& param_io) {
  if (planning) return;
  const StateStorage::Placement& at = storage.unit(u);
  Stream& compute = ctx.compute_stream();
  const std::size_t bytes = at.shard * size_of(policy.compute);
  ctx.convert(compute, source, DType::kFloat32, device_staging.data(), policy.compute, at.shard);
  if (at.param_region < 0) {
    ctx.copy(compute, device_staging.data(), storage.owned_compute_params(u), bytes);
    return;
  }
  ctx.copy(compute, device_staging.data(), param_io.data, bytes);
  synchronize_compute("copying unit '" + units[u].name + "' out to its swap region");
  storage.param_store()->wait(storage.param_store()->write(at.param_region, param_io.data));
}

}  // namespace zero
