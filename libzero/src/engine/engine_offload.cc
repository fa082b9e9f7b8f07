// ZeRO-Offload and ZeRO-Infinity in the engine, around the host optimizer step (host_optimizer.h):
// the host gradient partition (reduced blocks copied device->host and accumulated there, its
// squared norms, its zeroing), the optimizer's view of a unit's shard, and stage 3 parameter
// shards (offload_param) stored out after a device step and copied in (or swapped in) for each
// gather.
//
// Streams: device->host copies of reduced blocks run on the context's copy stream; the host-side
// accumulation of a block is a host task on that stream after its copy. Every hand-over is an
// event (the communication stream waits for the copy stream before it overwrites a block that is
// still being copied, and before it all-gathers parameter shards copied in), so the engine never
// asks which backend it runs on.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../cpu/host_arithmetic.h"
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

void Engine::Impl::unpack_on_host(const void* reduced, std::size_t count,
                                  std::vector<HostPiece> pieces, bool accumulate, float post) {
  if (planning) return;
  Stream& copy = ctx.copy_stream();
  copy.wait(comm.stream().record());
  ctx.copy(copy, reduced, host_receive.data(), count * size_of(policy.model_grads));
  // The next flush overwrites the bucket and the receive block: after this copy.
  comm.stream().wait(copy.record());
  void* host = host_receive.data();
  const DType dtype = policy.model_grads;
  const std::size_t bytes = size_of(dtype);
  const bool swapped = policy.swap_grads();
  copy.submit([this, host, dtype, bytes, pieces = std::move(pieces), accumulate, post, swapped] {
    for (const HostPiece& piece : pieces) {
      const void* source = static_cast<const char*>(host) + piece.bucket_offset * bytes;
      float* destination = piece.destination;
      if (swapped) {  // into its sub-group's window (swapped in or out here, on this stream)
        const std::size_t g = grad_swap.group_of[piece.unit];
        destination = gradient_window(g) + (storage.unit(piece.unit).owned_offset -
                                            storage.sub_groups()[g].owned_offset + piece.offset);
      }
      if (accumulate)
        host::axpy_values(source, dtype, destination, DType::kFloat32, piece.count, post);
      else
        host::scale_values(source, dtype, destination, DType::kFloat32, piece.count, post);
    }
  });
}

void Engine::Impl::zero_host_grads() {
  if (planning) return;
  if (policy.swap_grads()) {  // on the copy stream too: after the queued accumulations
    ctx.copy_stream().submit([this] { reset_gradient_swap(); });
    return;
  }
  const Buffer& grad_shard = storage.host_grad_shard();
  if (grad_shard.data() == nullptr) return;
  // On the copy stream: after every queued accumulation, before the next.
  void* data = grad_shard.data();
  const std::size_t bytes = grad_shard.size_bytes();
  ctx.copy_stream().submit([data, bytes] { std::memset(data, 0, bytes); });
}

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
  if (policy.swap_grads()) {  // every window out: the regions hold the step's gradients
    flush_gradient_windows();
    release_gradient_windows();  // the copy stream is drained: no task uses them
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
      partial[u] = grad_swap.squares[u];
    return;
  }
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u)
    if (!storage.on_device(u))
      partial[u] =
          host::squares_of(storage.owned_grads(u), DType::kFloat32, storage.unit(u).owned_count);
}

ShardChunk Engine::Impl::shard_chunk(UnitId u, float* params, const float* grads,
                                     float* state) const {
  const EngineUnit& unit = units[u];
  const StateStorage::Placement& at = storage.unit(u);
  ShardChunk chunk;
  chunk.params = params;
  chunk.grads = grads;
  chunk.state = state;
  chunk.num_elements = at.owned_count;
  const ElementRange owned = storage.owned_range(u);
  for (std::size_t t = 0; t < unit.layout.slots().size(); ++t) {
    const ElementRange piece = intersect(unit.layout.slots()[t].range(), owned);
    if (piece.empty()) continue;
    chunk.segments.push_back(
        {piece.begin - owned.begin, piece.size(), at.first_tensor + static_cast<int>(t)});
  }
  return chunk;
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

void Engine::Impl::copy_in_param_shard(UnitId u, void* slot) {
  const StateStorage::Placement& at = storage.unit(u);
  const std::size_t bytes = at.shard * size_of(policy.compute);
  Stream& copy = ctx.copy_stream();
  if (at.param_region >= 0) {
    // Swapped in through a host buffer (the host waits for the read), copied behind it.
    const std::size_t alignment = storage.param_store()->io_alignment();
    auto buffer = std::make_shared<AlignedHostBuffer>(
        allocate_aligned(ctx.allocator(policy.param_cache_space), round_up(bytes, alignment),
                         alignment, MemoryCategory::kWorkspace));
    if (planning) return;
    try {
      storage.param_store()->wait(storage.param_store()->read(at.param_region, buffer->data));
    } catch (const Error& error) {
      ZERO_THROW("engine (rank ", rank, "/", world, ", stage 3) swapping in unit '", units[u].name,
                 "': ", error.what());
    }
    ctx.copy(copy, buffer->data, slot, bytes);
    ctx.release_after(copy, std::move(buffer));
  } else {
    if (planning) return;
    ctx.copy(copy, storage.owned_compute_params(u), slot, bytes);
  }
  comm.stream().wait(copy.record());
}

}  // namespace zero
