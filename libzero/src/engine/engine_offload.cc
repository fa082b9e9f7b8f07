// ZeRO-Offload and ZeRO-Infinity in the engine, around the host optimizer step (host_optimizer.h)
// and the host gradient partition (host_gradients.h): the step's squared norms, the optimizer's
// view of a unit's shard, and stage 3 parameter shards (offload_param) stored out after a device
// step and copied in (or swapped in) for each gather.
//
// Streams: every hand-over is an event (the communication stream waits for the copy stream before
// it all-gathers parameter shards copied in), so the engine never asks which backend it runs on.
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
  host_grads.squares(partial);
}

void Engine::Impl::throw_host_step_error(const Error& error) const {
  ZERO_THROW("engine (rank ", rank, "/", world, ", stage ", options.stage,
             ") the offloaded optimizer step of global step ", training.global_steps, ": ",
             error.what());
}

bool Engine::Impl::overlaps_step() const {
  return policy.host_step && policy.param_shard && storage.owned_split() == 0;
}

void Engine::Impl::host_step(const OptimizerStep& args) {
  try {
    write_back_checkpoint_view();  // spans written for a load reach the regions first
    // A plan's step runs at once, not beside the next forward: it holds the parameter read that
    // forward's gathers may hold meanwhile.
    const Buffer reads = planning && overlaps_step() ? plan_reads_beside_step() : Buffer();
    if (overlaps_step())
      host_optimizer.step_async(args);
    else
      host_optimizer.step(args);
  } catch (const Error& error) {  // e.g. a swap store's I/O error, naming its file
    throw_host_step_error(error);
  }
}

void Engine::Impl::settle_step() {
  if (!host_optimizer.step_in_flight()) return;
  try {
    host_optimizer.wait_for_step();
  } catch (const Error& error) {
    throw_host_step_error(error);
  }
  if (std::exchange(zero_host_grads_after_step, false)) host_grads.zero();
  // The step's parameter copies (each sub-group's, on the copy stream) come before any gather:
  // once settled, gather_source no longer waits per unit (on CUDA an evaluation or a save right
  // after the step would all-gather shards still being copied; gpt2_async_engine_test's
  // evaluation after wait_for_step fails under stream stress without this).
  if (!planning) {
    params_ready = ctx.copy_stream().record();
    comm.stream().wait(params_ready);
  }
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

namespace {

// A parameter shard's read in flight into its host buffer. The copy stream waits for it before the
// buffer is read; if that wait never runs (a stream that failed earlier drops its later tasks),
// the last owner still waits before the buffer is freed, so the store never writes into freed
// memory.
struct ParamShardRead {
  ParamShardRead(SwapStore& swap_store, AlignedHostBuffer host_buffer, std::string error_prefix)
      : store(swap_store), buffer(std::move(host_buffer)), what(std::move(error_prefix)) {}
  ParamShardRead(const ParamShardRead&) = delete;
  ParamShardRead& operator=(const ParamShardRead&) = delete;

  SwapStore& store;
  AlignedHostBuffer buffer;
  std::string what;  // the error's prefix, naming the unit
  SwapTicket ticket;
  bool waited = true;  // until a read is issued: nothing in flight

  void wait() {
    waited = true;
    try {
      store.wait(ticket);
    } catch (const Error& error) {
      ZERO_THROW(what, error.what());
    }
  }
  ~ParamShardRead() {
    if (waited) return;
    try {
      store.wait(ticket);
    } catch (...) {  // reported by the wait that failed, or by the task that was dropped
    }
  }
};

}  // namespace

void Engine::Impl::copy_in_param_shard(UnitId u, void* slot) {
  const StateStorage::Placement& at = storage.unit(u);
  const std::size_t bytes = at.shard * size_of(policy.compute);
  Stream& copy = ctx.copy_stream();
  if (at.param_region >= 0) {
    // Swapped in through a host buffer: the read is issued here and waited for on the copy stream,
    // which then copies the buffer into the slot. The host goes on, so a prefetch's read overlaps
    // the compute of the units before it (it used to wait here, stalling the model for each read).
    SwapStore& store = *storage.param_store();
    plan_param_reads();
    const std::size_t alignment = store.io_alignment();
    auto read = std::make_shared<ParamShardRead>(
        store,
        allocate_aligned(ctx.allocator(policy.param_cache_space), round_up(bytes, alignment),
                         alignment, MemoryCategory::kWorkspace),
        "engine (rank " + std::to_string(rank) + "/" + std::to_string(world) +
            ", stage 3) swapping in unit '" + units[u].name + "': ");
    if (planning) return;
    try {
      read->ticket = store.read(at.param_region, read->buffer.data);
    } catch (const Error& error) {
      ZERO_THROW(read->what, error.what());
    }
    read->waited = false;
    copy.submit([read] { read->wait(); });
    ctx.copy(copy, read->buffer.data, slot, bytes);
    ctx.release_after(copy, std::move(read));
  } else {
    if (planning) return;
    ctx.copy(copy, storage.owned_compute_params(u), slot, bytes);
  }
  comm.stream().wait(copy.record());
}

}  // namespace zero
