// HostOffload's parameters (host_offload.h): the shard each stage-3 all-gather starts from, after
// an overlapped step's sub-group, and offload_param's shards copied in from the host or read from
// their swap regions for each gather; the step's assembly of a split unit's swapped shard
// (ParamAssembly).
//
// Streams: a swapped shard's read is issued on the host and waited for on the copy stream, which
// then copies it into the gathered buffer; the communication stream waits for the copy stream
// before it all-gathers in place, so the host never waits for a read.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "host_offload.h"
#include "waits.h"
#include "zero/core/error.h"

namespace zero {

const void* HostOffload::param_shard(UnitId u, void* gathered) {
  // An overlapped step in flight: this unit's sub-group first (the gathers come in the forward's
  // order, the step's order).
  if (async_) {
    Event refreshed;
    const std::int64_t global_step = global_step_in_flight();
    try {
      refreshed = wait_for_unit(u);
    } catch (const Error& error) {
      throw_step_error(error, global_step);
    }
    if (refreshed.impl() != nullptr)  // its copy to the device
      setup_.communicator.stream().wait(refreshed);
  }
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  if (!policy.offload_params()) return storage.owned_compute_params(u);
  // offload_param: the shard rests in host memory (or a swap region) and is copied to its slot
  // of the gathered buffer first, then gathered in place.
  const std::size_t bytes = storage.unit(u).shard * size_of(policy.compute);
  void* slot =
      static_cast<char*>(gathered) + static_cast<std::size_t>(setup_.communicator.rank()) * bytes;
  copy_in_param_shard(u, slot);
  return slot;
}

std::size_t HostOffload::swapped_shard_bytes(UnitId u) const {
  const StateStorage& storage = setup_.storage;
  const StateStorage::Placement& at = storage.unit(u);
  if (at.param_region < 0) return 0;
  return round_up(at.shard * size_of(setup_.policy.compute), storage.param_store()->io_alignment());
}

// A swapped shard's read is issued when its unit is gathered or prefetched and its host buffer
// freed after the copy stream copied it (copy_in_param_shard): at most the units gathered at
// once (stage3_max_live_parameters elements, at least the largest unit) have buffers in flight,
// and only the swapped ones. A real run allocates them as it goes; the plan holds the bound from
// the first such read on (training: loading reads no parameter shard this way).
void HostOffload::plan_param_reads() {
  const EngineOptions& options = setup_.options;
  const StateStorage& storage = setup_.storage;
  if (!planning_ || planned_param_reads_.allocated() || storage.param_store() == nullptr ||
      !options.overlap_comm || options.prefetch_bucket_size <= 0)
    return;
  std::size_t swapped = 0, largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u) {
    swapped += swapped_shard_bytes(u);
    largest = std::max(largest, swapped_shard_bytes(u));
  }
  const auto live =
      static_cast<std::size_t>(std::max<std::int64_t>(options.max_live_parameters, 0));
  const auto world = static_cast<std::size_t>(setup_.communicator.world_size());
  const std::size_t window =
      std::min(swapped, std::max(largest, live / world * size_of(setup_.policy.compute)));
  if (window > 0)
    planned_param_reads_ = setup_.context.allocator(setup_.policy.param_cache_space)
                               .allocate(window, MemoryCategory::kWorkspace);
}

Buffer HostOffload::plan_reads_beside_step() {
  const StateStorage& storage = setup_.storage;
  if (planned_param_reads_.allocated() || storage.param_store() == nullptr) return Buffer();
  std::size_t largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u)
    largest = std::max(largest, swapped_shard_bytes(u));
  if (largest == 0) return Buffer();
  const std::size_t alignment = storage.param_store()->io_alignment();
  // As copy_in_param_shard allocates it, so the run's cached block is the plan's.
  return std::move(allocate_aligned(setup_.context.allocator(setup_.policy.param_cache_space),
                                    largest, alignment, MemoryCategory::kWorkspace)
                       .buffer);
}

bool HostOffload::steps_on_device(UnitId u) const {
  return !setup_.policy.host_step || setup_.storage.on_device(u);
}

Buffer HostOffload::make_param_device_staging() const {
  const StateStorage& storage = setup_.storage;
  if (!setup_.policy.offload_params()) return Buffer();
  std::size_t largest = 0;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u)
    if (steps_on_device(u)) largest = std::max(largest, storage.unit(u).shard);
  if (largest == 0) return Buffer();
  return setup_.context.allocator(MemorySpace::kDevice)
      .allocate(largest * size_of(setup_.policy.compute), MemoryCategory::kWorkspace);
}

void HostOffload::store_param_shard(UnitId u, const float* source, const Buffer& device_staging,
                                    AlignedHostBuffer& param_io) {
  if (planning_) return;
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const StateStorage::Placement& at = storage.unit(u);
  Stream& compute = ctx.compute_stream();
  const std::size_t bytes = at.shard * size_of(policy.compute);
  ctx.convert(compute, source, DType::kFloat32, device_staging.data(), policy.compute, at.shard);
  if (at.param_region < 0) {
    ctx.copy(compute, device_staging.data(), storage.owned_compute_params(u), bytes);
    return;
  }
  ctx.copy(compute, device_staging.data(), param_io.data, bytes);
  synchronize_naming(compute, setup_.communicator, setup_.options.stage,
                     "copying unit '" + storage.unit_name(u) + "' out to its swap region");
  storage.param_store()->wait(storage.param_store()->write(at.param_region, param_io.data));
}

void HostOffload::after_param_shards_stored() {
  if (planning_) return;
  Stream& compute = setup_.context.compute_stream();
  setup_.context.copy_stream().wait(compute.record());
  synchronize_naming(compute, setup_.communicator, setup_.options.stage,
                     "copying the updated parameter shard out");  // the staging buffers
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

void HostOffload::copy_in_param_shard(UnitId u, void* slot) {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const Communicator& comm = setup_.communicator;
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
        "engine (rank " + std::to_string(comm.rank()) + "/" + std::to_string(comm.world_size()) +
            ", stage 3) swapping in unit '" + storage.unit_name(u) + "': ");
    if (planning_) return;
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
    if (planning_) return;
    ctx.copy(copy, storage.owned_compute_params(u), slot, bytes);
  }
  setup_.communicator.stream().wait(copy.record());
}

ParamAssembly HostOffload::make_param_assembly(const std::vector<std::size_t>& order) const {
  const StateStorage& storage = setup_.storage;
  ParamAssembly params;
  params.io = make_param_io_buffer(setup_.context, setup_.policy, storage);
  params.converted.assign(storage.num_units(), 0);
  params.in_order.assign(storage.num_units(), 1);
  std::vector<std::size_t> position(storage.sub_groups().size(), order.size());
  for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u) {
    const auto [first, last] = storage.groups_of(u);
    for (std::size_t g = first + 1; g < last; ++g)
      if (position[g] != position[first] + (g - first)) params.in_order[u] = 0;
  }
  return params;
}

void HostOffload::flush_params(ParamAssembly& params) const {
  if (params.unit < 0) return;
  SwapStore& store = *setup_.storage.param_store();
  const int region = setup_.storage.unit(params.unit).param_region;
  params.unit = -1;
  store.wait(store.write(region, params.io.data));
}

}  // namespace zero
