// ZeRO-Offload and ZeRO-Infinity in the engine, around the host side of offload (host_offload.h):
// the step's squared norms and the host step's launch.
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

}  // namespace zero
