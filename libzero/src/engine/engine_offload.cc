// ZeRO-Offload and ZeRO-Infinity in the engine: the host gradient partition (reduced blocks
// copied device->host and accumulated there), the optimizer step on the host one sub-group at a
// time (nvme: master and state swapped in and out around it), the compute parameters refreshed
// host->device behind it, and stage 3 parameter shards copied in (or swapped in) for each gather.
//
// Streams: device->host copies of reduced blocks and host->device copies of updated parameters
// run on the context's copy stream; the host-side accumulation of a block is a host task on that
// stream after its copy; the host thread runs the optimizer while the copy stream copies the
// previous sub-group's parameters. Every hand-over is an event (the communication stream waits
// for the copy stream before it overwrites a block that is still being copied, and before it
// all-gathers refreshed parameters), so the engine never asks which backend it runs on.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../cpu/host_arithmetic.h"
#include "engine_impl.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero {

namespace {

std::size_t round_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// A plan's swap store: records each region under the nvme space of the ledger, moves nothing.
class PlanningSwapStore final : public SwapStore {
 public:
  explicit PlanningSwapStore(MemoryLedger& ledger) : ledger_(ledger) {}
  ~PlanningSwapStore() override {
    for (const auto& [bytes, category] : regions_)
      ledger_.record_free(MemorySpace::kNvme, category, bytes);
  }
  int add_region(std::string, std::size_t bytes, MemoryCategory category) override {
    ledger_.record_allocation(MemorySpace::kNvme, category, bytes);
    regions_.emplace_back(bytes, category);
    return static_cast<int>(regions_.size() - 1);
  }
  SwapTicket write(int, const void*) override { return {}; }
  SwapTicket read(int, void*) override { return {}; }
  SwapTicket read_range(int, std::size_t, std::size_t, void*) override { return {}; }
  void wait(SwapTicket) override {}
  void wait_all() override {}
  std::size_t io_alignment() const override { return 4096; }
  std::size_t padded_bytes(int region) const override {
    return round_up(regions_.at(static_cast<std::size_t>(region)).first, io_alignment());
  }
  const std::filesystem::path& directory() const override { return directory_; }

 private:
  MemoryLedger& ledger_;
  std::vector<std::pair<std::size_t, MemoryCategory>> regions_;
  std::filesystem::path directory_;
};

}  // namespace

void Engine::set_swap_store_factory(SwapStoreFactory factory) {
  ZERO_CHECK(!impl_->initialized,
             "set_swap_store_factory() after the engine was initialised: call it first");
  impl_->swap_factory = std::move(factory);
}

SwapTraffic Engine::swap_traffic() const {
  SwapTraffic traffic;
  if (impl_->optimizer_swap) traffic += impl_->optimizer_swap->traffic();
  if (impl_->param_swap) traffic += impl_->param_swap->traffic();
  return traffic;
}

void Engine::Impl::create_swap_stores() {
  const EngineOptions& options = engine.options_;
  if (!policy.swap_optimizer() && !policy.swap_params()) return;
  auto make_store = [&](const std::string& path, const char* key) -> std::unique_ptr<SwapStore> {
    if (planning) return std::make_unique<PlanningSwapStore>(ctx.ledger());
    NvmeSwapOptions store_options;
    store_options.nvme_path = path;
    store_options.rank = rank;
    store_options.aio = options.aio;
    store_options.ledger = &ctx.ledger();
    ZERO_CHECK(swap_factory, "engine (rank ", rank, "/", world, ") zero_optimization.", key,
               ".device is \"nvme\" but the engine has no swap store factory: build the engine "
               "with zero::make_engine (zero/factory/engine_factory.h, target zero::factory), or "
               "call engine.set_swap_store_factory(zero::make_nvme_swap_store) "
               "(zero/offload/nvme_swap_store.h, target zero::offload) before initialize()");
    try {
      std::unique_ptr<SwapStore> store = swap_factory(store_options);
      ZERO_CHECK(store != nullptr, "the swap store factory returned no store");
      return store;
    } catch (const Error& error) {
      ZERO_THROW("engine (rank ", rank, "/", world, ") zero_optimization.", key, ".nvme_path '",
                 path, "': ", error.what());
    }
  };
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  if (policy.swap_optimizer()) {
    optimizer_swap = make_store(options.offload_optimizer.nvme_path, "offload_optimizer");
    for (std::size_t g = 0; g < sub_groups.size(); ++g) {
      const std::size_t count = sub_groups[g].num_elements;
      master_regions.push_back(
          optimizer_swap->add_region("master_params sub-group " + std::to_string(g),
                                     count * sizeof(float), MemoryCategory::kMasterParams));
      state_regions.push_back(
          states == 0 ? -1
                      : optimizer_swap->add_region("optimizer_state sub-group " + std::to_string(g),
                                                   states * count * sizeof(float),
                                                   MemoryCategory::kOptimizerState));
    }
    if (policy.swap_grads()) create_gradient_regions(*optimizer_swap);
  }
  if (policy.swap_params()) {
    std::vector<std::size_t> sizes;
    for (const EngineUnit& unit : units) sizes.push_back(unit.layout.num_elements());
    const std::vector<bool> swapped = swapped_param_units(options, sizes, world);
    if (optimizer_swap && options.offload_param.nvme_path == options.offload_optimizer.nvme_path) {
      param_store = optimizer_swap.get();  // one folder per rank and path
    } else {
      param_swap = make_store(options.offload_param.nvme_path, "offload_param");
      param_store = param_swap.get();
    }
    for (std::size_t u = 0; u < units.size(); ++u)
      if (swapped[u])
        units[u].param_region = param_store->add_region("param_shard " + units[u].name,
                                                        units[u].shard * size_of(policy.compute),
                                                        MemoryCategory::kParamShard);
  }
}

namespace {

AlignedHostBuffer allocate_aligned(Allocator& allocator, std::size_t size_bytes,
                                   std::size_t alignment, MemoryCategory category) {
  AlignedHostBuffer result;
  result.buffer = allocator.allocate(size_bytes + alignment, category);
  if (result.buffer.data() != nullptr) {
    const auto address = reinterpret_cast<std::uintptr_t>(result.buffer.data());
    result.data = reinterpret_cast<void*>(round_up(address, alignment));
  }
  return result;
}

}  // namespace

SwapSlot Engine::Impl::make_swap_slot(std::size_t elements) {
  SwapSlot slot;
  if (!policy.swap_optimizer()) return slot;
  std::size_t largest = elements;
  if (largest == 0)
    for (const SubGroup& group : sub_groups) largest = std::max(largest, group.num_elements);
  const std::size_t alignment = optimizer_swap->io_alignment();
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  const std::size_t master_bytes = round_up(largest * sizeof(float), alignment);
  const std::size_t state_bytes = round_up(states * largest * sizeof(float), alignment);
  const std::size_t grads_bytes = policy.swap_grads() ? master_bytes : 0;
  slot.memory =
      allocate_aligned(ctx.allocator(policy.staging_space), swap_slot_bytes(largest) - alignment,
                       alignment, MemoryCategory::kWorkspace);
  if (slot.memory.data != nullptr) {
    char* base = static_cast<char*>(slot.memory.data);
    slot.master = reinterpret_cast<float*>(base);
    slot.state = reinterpret_cast<float*>(base + master_bytes);
    if (grads_bytes > 0) slot.grads = reinterpret_cast<float*>(base + master_bytes + state_bytes);
  }
  return slot;
}

std::size_t Engine::Impl::swap_slot_bytes(std::size_t elements) const {
  const std::size_t alignment = optimizer_swap->io_alignment();
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  const std::size_t master_bytes = round_up(elements * sizeof(float), alignment);
  const std::size_t state_bytes = round_up(states * elements * sizeof(float), alignment);
  const std::size_t grads_bytes = policy.swap_grads() ? master_bytes : 0;
  return master_bytes + state_bytes + grads_bytes + alignment;
}

std::size_t Engine::Impl::step_slot_count() const {
  const bool pipeline_read = engine.options_.offload_optimizer.pipeline_read;
  const bool pipeline_write = engine.options_.offload_optimizer.pipeline_write;
  return pipeline_read && pipeline_write ? 3 : (pipeline_read || pipeline_write ? 2 : 1);
}

std::size_t Engine::Impl::step_slot_elements(std::size_t slot) const {
  const std::size_t count = step_slot_count();
  std::size_t elements = 0;
  for (std::size_t g = device_groups; g < sub_groups.size(); ++g)
    if (g % count == slot) elements = std::max(elements, sub_groups[g].num_elements);
  return elements;
}

AlignedHostBuffer Engine::Impl::make_param_io_buffer() {
  if (!policy.swap_params()) return {};
  std::size_t largest = 0;
  for (const EngineUnit& unit : units)
    if (unit.param_region >= 0) largest = std::max(largest, unit.shard);
  if (largest == 0) return {};
  const std::size_t alignment = param_store->io_alignment();
  return allocate_aligned(ctx.allocator(policy.param_cache_space),
                          round_up(largest * size_of(policy.compute), alignment), alignment,
                          MemoryCategory::kWorkspace);
}

void Engine::Impl::host_initialize_unit(UnitId u, const float* master, SwapSlot& slot,
                                        AlignedHostBuffer& param_io) {
  const EngineUnit& unit = units[u];
  const std::size_t count = unit.owned_count;
  if (!policy.swap_optimizer()) {
    std::memcpy(owned_params(u), master, count * sizeof(float));
  } else {
    std::size_t g = 0;
    while (!(static_cast<std::size_t>(u) < sub_groups[g].last_unit)) ++g;
    const SubGroup& group = sub_groups[g];
    std::memcpy(slot.master + (unit.owned_offset - group.owned_offset), master,
                count * sizeof(float));
    if (static_cast<std::size_t>(u) + 1 == group.last_unit) {  // the sub-group is complete
      const auto states = static_cast<std::size_t>(optimizer->states_per_element());
      std::memset(slot.state, 0, states * group.num_elements * sizeof(float));
      const SwapTicket master_write = optimizer_swap->write(master_regions[g], slot.master);
      SwapTicket state_write;
      if (state_regions[g] >= 0) state_write = optimizer_swap->write(state_regions[g], slot.state);
      optimizer_swap->wait(master_write);
      optimizer_swap->wait(state_write);
    }
  }
  if (!policy.offload_params()) return;
  if (unit.param_region < 0) {
    convert(master, DType::kFloat32, owned_compute_params(u), policy.compute, unit.shard);
  } else {
    convert(master, DType::kFloat32, param_io.data, policy.compute, unit.shard);
    param_store->wait(param_store->write(unit.param_region, param_io.data));
  }
}

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
        destination = gradient_window(g) +
                      (units[piece.unit].owned_offset - sub_groups[g].owned_offset + piece.offset);
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
    ZERO_THROW("engine (rank ", rank, "/", world, ", stage ", engine.options_.stage,
               ") copying reduced gradients to the host: ", error.what());
  }
  if (owned_split > 0) {  // partial offload: the device sub-groups' gradients, on the device
    compute_after_comm();
    for (UnitId u = 0; u < static_cast<UnitId>(units.size()) && on_device(u); ++u)
      ctx.sum_of_squares(ctx.compute_stream(), owned_grads(u), policy.grad_shard_dtype,
                         units[u].owned_count, &partial[u]);
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
    if (!on_device(u))
      partial[u] = host::squares_of(owned_grads(u), DType::kFloat32, units[u].owned_count);
}

ShardChunk Engine::Impl::shard_chunk(UnitId u, float* params, const float* grads,
                                     float* state) const {
  const EngineUnit& unit = units[u];
  ShardChunk chunk;
  chunk.params = params;
  chunk.grads = grads;
  chunk.state = state;
  chunk.num_elements = unit.owned_count;
  const ElementRange owned =
      policy.partitioned ? unit.layout.shard(rank) : ElementRange{0, unit.padded};
  for (std::size_t t = 0; t < unit.layout.slots().size(); ++t) {
    const ElementRange piece = intersect(unit.layout.slots()[t].range(), owned);
    if (piece.empty()) continue;
    chunk.segments.push_back(
        {piece.begin - owned.begin, piece.size(), unit.first_tensor + static_cast<int>(t)});
  }
  return chunk;
}

void Engine::Impl::device_sub_groups_step(const OptimizerStep& args) {
  if (owned_split == 0 || planning) return;
  std::vector<ShardChunk> chunks;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()) && on_device(u); ++u)
    chunks.push_back(
        shard_chunk(u, owned_params(u), static_cast<const float*>(owned_grads(u)), owned_state(u)));
  ctx.optimizer_step(ctx.compute_stream(), *optimizer, chunks, args);
  device_sub_groups_params_from_master();
}

void Engine::Impl::device_sub_groups_params_from_master() {
  if (owned_split == 0 || planning) return;
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()) && on_device(u); ++u)
    ctx.convert(ctx.compute_stream(), owned_params(u), DType::kFloat32, owned_compute_params(u),
                policy.compute, units[u].owned_count);
}

namespace {

// Double-buffered host staging of 16-bit parameters on their way to the device.
struct ParamStaging {
  AlignedHostBuffer buffers[2];
  Event copied[2];
  int next = 0;
};

}  // namespace

void Engine::Impl::host_step(const OptimizerStep& args) {
  write_back_checkpoint_view();
  const auto states = static_cast<std::size_t>(optimizer->states_per_element());
  std::size_t largest = 0;
  for (const SubGroup& group : sub_groups) largest = std::max(largest, group.num_elements);
  // Transient host buffers of the step (workspace): swap slots, 16-bit staging, swapped
  // parameter shards. Allocated in a plan too, so the plan's peaks are the run's.
  // pipeline_read / pipeline_write: a second slot, so one sub-group's read (or write) runs during
  // another's step; both: three, so the step of sub-group k overlaps the read of k+1 and the
  // write of k-1 (k+1's slot is k-2's, whose write had k-1's step to finish).
  const bool pipeline_read = engine.options_.offload_optimizer.pipeline_read;
  const bool pipeline_write = engine.options_.offload_optimizer.pipeline_write;
  const std::size_t num_slots = step_slot_count();
  SwapSlot slots[3];
  // Slot i holds the sub-groups g with g % num_slots == i, sized for the largest of those (a
  // large embedding sub-group then enlarges one slot, not all).
  if (policy.swap_optimizer())
    for (std::size_t i = 0; i < num_slots; ++i)
      if (step_slot_elements(i) > 0) slots[i] = make_swap_slot(step_slot_elements(i));
  ParamStaging staging;
  const bool device_params = !policy.offload_params();
  const bool convert_on_host = device_params && policy.compute != DType::kFloat32;
  if (convert_on_host)
    for (AlignedHostBuffer& buffer : staging.buffers)
      buffer = allocate_aligned(ctx.allocator(policy.staging_space),
                                largest * size_of(policy.compute), 64, MemoryCategory::kWorkspace);
  AlignedHostBuffer param_io = make_param_io_buffer();
  params_refreshed_by_step = true;
  if (planning) return;

  Stream& copy = ctx.copy_stream();
  // A slot is free once its writes are done and the copies reading its master have run.
  auto free_slot = [&](SwapSlot& slot) {
    optimizer_swap->wait(slot.master_write);
    optimizer_swap->wait(slot.state_write);
    slot.master_write = slot.state_write = {};
    slot.copied.synchronize();
    slot.copied = Event();
  };
  auto start_read = [&](SwapSlot& slot, std::size_t g) {
    free_slot(slot);
    slot.group = static_cast<int>(g);
    slot.master_read = optimizer_swap->read(master_regions[g], slot.master);
    slot.state_read =
        state_regions[g] >= 0 ? optimizer_swap->read(state_regions[g], slot.state) : SwapTicket{};
    slot.grads_read = policy.swap_grads() && grad_swap.holds[g] != 0
                          ? optimizer_swap->read(grad_swap.regions[g], slot.grads)
                          : SwapTicket{};
    // A sub-group no block reached this step (no gradients): zeros, as the partition would hold.
    if (policy.swap_grads() && grad_swap.holds[g] == 0)
      std::memset(slot.grads, 0, sub_groups[g].num_elements * sizeof(float));
  };

  // Partial offload: the device sub-groups step on the compute stream meanwhile.
  device_sub_groups_step(args);
  for (std::size_t g = device_groups; g < sub_groups.size(); ++g) {
    const SubGroup& group = sub_groups[g];
    float* master = nullptr;
    float* state = nullptr;
    SwapSlot* slot = nullptr;
    if (policy.swap_optimizer()) {
      slot = &slots[g % num_slots];
      if (slot->group != static_cast<int>(g)) start_read(*slot, g);
      optimizer_swap->wait(slot->master_read);
      optimizer_swap->wait(slot->state_read);
      optimizer_swap->wait(slot->grads_read);
      // pipeline_read: the next sub-group's read runs during this one's step.
      if (pipeline_read && g + 1 < sub_groups.size()) start_read(slots[(g + 1) % num_slots], g + 1);
      master = slot->master;
      state = slot->state;
    } else {
      master = owned_params(static_cast<UnitId>(group.first_unit));
      state = owned_state(static_cast<UnitId>(group.first_unit));
    }
    std::vector<ShardChunk> chunks;
    for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
      const std::size_t offset = units[u].owned_offset - group.owned_offset;
      const float* grads = policy.swap_grads()
                               ? slot->grads + offset
                               : static_cast<const float*>(owned_grads(static_cast<UnitId>(u)));
      chunks.push_back(
          shard_chunk(static_cast<UnitId>(u), master + offset, grads, state + states * offset));
    }
    optimizer->step(chunks, args);

    // The sub-group's compute parameters from its updated master: host->device on the copy
    // stream (through 16-bit staging), or into the host / swapped parameter shard (offload_param).
    AlignedHostBuffer* stage = nullptr;
    if (convert_on_host) {
      const int index = staging.next;
      staging.next = 1 - index;
      staging.copied[index].synchronize();  // the copy that read this buffer two groups ago
      stage = &staging.buffers[index];
      convert(master, DType::kFloat32, stage->data, policy.compute, group.num_elements);
    }
    send_group_params(group, master, stage ? stage->data : nullptr, copy, device_params, param_io);
    const Event copied = copy.record();
    if (stage) staging.copied[staging.next == 0 ? 1 : 0] = copied;
    if (slot) {
      slot->copied = copied;
      slot->master_write = optimizer_swap->write(master_regions[g], slot->master);
      if (state_regions[g] >= 0)
        slot->state_write = optimizer_swap->write(state_regions[g], slot->state);
      if (!pipeline_write) free_slot(*slot);  // pipeline_write: written behind the next step
    }
  }
  if (policy.swap_optimizer()) {
    for (SwapSlot& slot : slots)
      if (slot.memory.buffer.allocated()) free_slot(slot);
    optimizer_swap->wait_all();
  }
  if (owned_split > 0) synchronize_compute("the optimizer step of the device sub-groups");
  // The staging buffers are read by queued copies: freed behind them.
  for (AlignedHostBuffer& buffer : staging.buffers)
    ctx.release_after(copy, std::make_shared<Buffer>(std::move(buffer.buffer)));
}

void Engine::Impl::send_group_params(const SubGroup& group, const float* master, const void* staged,
                                     Stream& copy, bool device_params,
                                     AlignedHostBuffer& param_io) {
  for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
    const EngineUnit& unit = units[u];
    const std::size_t offset = unit.owned_offset - group.owned_offset;
    if (device_params) {
      const void* source = staged != nullptr
                               ? static_cast<const char*>(staged) + offset * size_of(policy.compute)
                               : static_cast<const void*>(master + offset);
      ctx.copy(copy, source, owned_compute_params(static_cast<UnitId>(u)),
               unit.owned_count * size_of(policy.compute));
    } else if (unit.param_region < 0) {
      convert(master + offset, DType::kFloat32, owned_compute_params(static_cast<UnitId>(u)),
              policy.compute, unit.owned_count);
    } else {
      convert(master + offset, DType::kFloat32, param_io.data, policy.compute, unit.owned_count);
      param_store->wait(param_store->write(unit.param_region, param_io.data));
    }
  }
}

void Engine::Impl::host_params_from_master() {
  // After a checkpoint load (or any rewrite of the master): every sub-group's compute
  // parameters, as the step refreshes them.
  SwapSlot slot = make_swap_slot();
  AlignedHostBuffer param_io = make_param_io_buffer();
  AlignedHostBuffer stage;
  const bool device_params = !policy.offload_params();
  std::size_t largest = 0;
  for (const SubGroup& group : sub_groups) largest = std::max(largest, group.num_elements);
  if (device_params && policy.compute != DType::kFloat32)
    stage = allocate_aligned(ctx.allocator(policy.staging_space), largest * size_of(policy.compute),
                             64, MemoryCategory::kWorkspace);
  if (planning) return;
  device_sub_groups_params_from_master();
  Stream& copy = ctx.copy_stream();
  for (std::size_t g = device_groups; g < sub_groups.size(); ++g) {
    const SubGroup& group = sub_groups[g];
    const float* master = owned_params(static_cast<UnitId>(group.first_unit));
    if (policy.swap_optimizer()) {
      optimizer_swap->wait(optimizer_swap->read(master_regions[g], slot.master));
      master = slot.master;
    }
    if (stage.data != nullptr)
      convert(master, DType::kFloat32, stage.data, policy.compute, group.num_elements);
    send_group_params(group, master, stage.data, copy, device_params, param_io);
    copy.synchronize();  // the slot and the staging buffer are reused by the next sub-group
  }
}

Buffer Engine::Impl::make_param_device_staging() {
  if (!policy.offload_params() || policy.host_step) return Buffer();
  std::size_t largest = 0;
  for (const EngineUnit& unit : units) largest = std::max(largest, unit.shard);
  return ctx.allocator(MemorySpace::kDevice)
      .allocate(largest * size_of(policy.compute), MemoryCategory::kWorkspace);
}

void Engine::Impl::store_param_shard(UnitId u, const float* source, const Buffer& device_staging,
                                     AlignedHostBuffer& param_io) {
  if (planning) return;
  const EngineUnit& unit = units[u];
  Stream& compute = ctx.compute_stream();
  const std::size_t bytes = unit.shard * size_of(policy.compute);
  ctx.convert(compute, source, DType::kFloat32, device_staging.data(), policy.compute, unit.shard);
  if (unit.param_region < 0) {
    ctx.copy(compute, device_staging.data(), owned_compute_params(u), bytes);
    return;
  }
  ctx.copy(compute, device_staging.data(), param_io.data, bytes);
  synchronize_compute("copying unit '" + unit.name + "' out to its swap region");
  param_store->wait(param_store->write(unit.param_region, param_io.data));
}

void Engine::Impl::copy_in_param_shard(UnitId u, void* slot) {
  const EngineUnit& unit = units[u];
  const std::size_t bytes = unit.shard * size_of(policy.compute);
  Stream& copy = ctx.copy_stream();
  if (unit.param_region >= 0) {
    // Swapped in through a host buffer (the host waits for the read), copied behind it.
    const std::size_t alignment = param_store->io_alignment();
    auto buffer = std::make_shared<AlignedHostBuffer>(
        allocate_aligned(ctx.allocator(policy.param_cache_space), round_up(bytes, alignment),
                         alignment, MemoryCategory::kWorkspace));
    if (planning) return;
    try {
      param_store->wait(param_store->read(unit.param_region, buffer->data));
    } catch (const Error& error) {
      ZERO_THROW("engine (rank ", rank, "/", world, ", stage 3) swapping in unit '", unit.name,
                 "': ", error.what());
    }
    ctx.copy(copy, buffer->data, slot, bytes);
    ctx.release_after(copy, std::move(buffer));
  } else {
    if (planning) return;
    ctx.copy(copy, owned_compute_params(u), slot, bytes);
  }
  comm.stream().wait(copy.record());
}

}  // namespace zero
