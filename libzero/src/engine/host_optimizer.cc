// HostOptimizer: offload_optimizer's step on the host, sub-group by sub-group.
//
// Streams: host->device copies of updated parameters run on the context's copy stream while the
// host thread steps the next sub-group; a swap slot (nvme) or a 16-bit staging buffer is reused
// only after the event of the copy that read it. With nvme, each host sub-group's master, state
// and (swapped) gradients are read into a slot before its step and written back after it; with
// pipeline_read the next sub-group's read, with pipeline_write the previous one's write, run
// during the step.
#include "host_optimizer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "zero/core/error.h"

namespace zero {

HostOptimizer::HostOptimizer(HostOptimizerSetup setup)
    : setup_(std::move(setup)),
      planning_(setup_.context.planning()),
      states_(static_cast<std::size_t>(setup_.optimizer.states_per_element())) {}

bool HostOptimizer::take_params_refreshed() { return std::exchange(params_refreshed_, false); }

SwapSlot HostOptimizer::make_swap_slot(std::size_t elements) const {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapSlot slot;
  if (!policy.swap_optimizer()) return slot;
  std::size_t largest = elements;
  if (largest == 0)
    for (const SubGroup& group : storage.sub_groups())
      largest = std::max(largest, group.num_elements);
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  const std::size_t master_bytes = round_up(largest * sizeof(float), alignment);
  const std::size_t state_bytes = round_up(states_ * largest * sizeof(float), alignment);
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

std::size_t HostOptimizer::swap_slot_bytes(std::size_t elements) const {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  const std::size_t master_bytes = round_up(elements * sizeof(float), alignment);
  const std::size_t state_bytes = round_up(states_ * elements * sizeof(float), alignment);
  const std::size_t grads_bytes = policy.swap_grads() ? master_bytes : 0;
  return master_bytes + state_bytes + grads_bytes + alignment;
}

std::size_t HostOptimizer::step_slot_count() const {
  const bool pipeline_read = setup_.options.offload_optimizer.pipeline_read;
  const bool pipeline_write = setup_.options.offload_optimizer.pipeline_write;
  return pipeline_read && pipeline_write ? 3 : (pipeline_read || pipeline_write ? 2 : 1);
}

std::size_t HostOptimizer::step_slot_elements(std::size_t slot) const {
  const StateStorage& storage = setup_.storage;
  const std::vector<SubGroup>& groups = storage.sub_groups();
  const std::size_t count = step_slot_count();
  std::size_t elements = 0;
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g)
    if (g % count == slot) elements = std::max(elements, groups[g].num_elements);
  return elements;
}

void HostOptimizer::initialize_unit(UnitId u, const float* master, SwapSlot& slot,
                                    AlignedHostBuffer& param_io) {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  const StateStorage::Placement& at = storage.unit(u);
  const std::size_t count = at.owned_count;
  if (!policy.swap_optimizer()) {
    std::memcpy(storage.owned_params(u), master, count * sizeof(float));
  } else {
    std::size_t g = 0;
    while (!(static_cast<std::size_t>(u) < groups[g].last_unit)) ++g;
    const SubGroup& group = groups[g];
    std::memcpy(slot.master + (at.owned_offset - group.owned_offset), master,
                count * sizeof(float));
    if (static_cast<std::size_t>(u) + 1 == group.last_unit) {  // the sub-group is complete
      std::memset(slot.state, 0, states_ * group.num_elements * sizeof(float));
      const SwapTicket master_write = swap->write(storage.master_region(g), slot.master);
      SwapTicket state_write;
      if (storage.state_region(g) >= 0)
        state_write = swap->write(storage.state_region(g), slot.state);
      swap->wait(master_write);
      swap->wait(state_write);
    }
  }
  if (!policy.offload_params()) return;
  if (at.param_region < 0) {
    convert(master, DType::kFloat32, storage.owned_compute_params(u), policy.compute, at.shard);
  } else {
    convert(master, DType::kFloat32, param_io.data, policy.compute, at.shard);
    storage.param_store()->wait(storage.param_store()->write(at.param_region, param_io.data));
  }
}

void HostOptimizer::device_groups_step(const OptimizerStep& args) {
  DeviceContext& ctx = setup_.context;
  const StateStorage& storage = setup_.storage;
  if (storage.owned_split() == 0 || planning_) return;
  std::vector<ShardChunk> chunks;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()) && storage.on_device(u); ++u)
    chunks.push_back(setup_.shard_chunk(u, storage.owned_params(u),
                                        static_cast<const float*>(storage.owned_grads(u)),
                                        storage.owned_state(u)));
  ctx.optimizer_step(ctx.compute_stream(), setup_.optimizer, chunks, args);
  device_groups_params_from_master();
}

void HostOptimizer::device_groups_params_from_master() {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  if (storage.owned_split() == 0 || planning_) return;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()) && storage.on_device(u); ++u)
    ctx.convert(ctx.compute_stream(), storage.owned_params(u), DType::kFloat32,
                storage.owned_compute_params(u), policy.compute, storage.unit(u).owned_count);
}

namespace {

// Double-buffered host staging of 16-bit parameters on their way to the device.
struct ParamStaging {
  AlignedHostBuffer buffers[2];
  Event copied[2];
  int next = 0;
};

}  // namespace

void HostOptimizer::free_slot(SwapSlot& slot) const {
  SwapStore* swap = setup_.storage.optimizer_swap();
  swap->wait(slot.master_write);
  swap->wait(slot.state_write);
  slot.master_write = slot.state_write = {};
  slot.copied.synchronize();
  slot.copied = Event();
}

void HostOptimizer::read_group(SwapSlot& slot, std::size_t g) const {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  free_slot(slot);
  slot.group = static_cast<int>(g);
  slot.master_read = swap->read(storage.master_region(g), slot.master);
  slot.state_read =
      storage.state_region(g) >= 0 ? swap->read(storage.state_region(g), slot.state) : SwapTicket{};
  slot.grads_read = policy.swap_grads() && setup_.gradients_held(g)
                        ? swap->read(storage.grad_region(g), slot.grads)
                        : SwapTicket{};
  // A sub-group no block reached this step (no gradients): zeros, as the partition would hold.
  if (policy.swap_grads() && !setup_.gradients_held(g))
    std::memset(slot.grads, 0, storage.sub_groups()[g].num_elements * sizeof(float));
}

void HostOptimizer::step(const OptimizerStep& args) {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  std::size_t largest = 0;
  for (const SubGroup& group : groups) largest = std::max(largest, group.num_elements);
  // Transient host buffers of the step (workspace): swap slots, 16-bit staging, swapped
  // parameter shards. Allocated in a plan too, so the plan's peaks are the run's.
  // pipeline_read / pipeline_write: a second slot, so one sub-group's read (or write) runs during
  // another's step; both: three, so the step of sub-group k overlaps the read of k+1 and the
  // write of k-1 (k+1's slot is k-2's, whose write had k-1's step to finish).
  const bool pipeline_read = setup_.options.offload_optimizer.pipeline_read;
  const bool pipeline_write = setup_.options.offload_optimizer.pipeline_write;
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
  AlignedHostBuffer param_io = make_param_io_buffer(ctx, policy, storage);
  params_refreshed_ = true;
  if (planning_) return;

  Stream& copy = ctx.copy_stream();
  // Partial offload: the device sub-groups step on the compute stream meanwhile.
  device_groups_step(args);
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g) {
    const SubGroup& group = groups[g];
    float* master = nullptr;
    float* state = nullptr;
    SwapSlot* slot = nullptr;
    if (policy.swap_optimizer()) {
      slot = &slots[g % num_slots];
      if (slot->group != static_cast<int>(g)) read_group(*slot, g);
      swap->wait(slot->master_read);
      swap->wait(slot->state_read);
      swap->wait(slot->grads_read);
      // pipeline_read: the next sub-group's read runs during this one's step.
      if (pipeline_read && g + 1 < groups.size()) read_group(slots[(g + 1) % num_slots], g + 1);
      master = slot->master;
      state = slot->state;
    } else {
      master = storage.owned_params(static_cast<UnitId>(group.first_unit));
      state = storage.owned_state(static_cast<UnitId>(group.first_unit));
    }
    std::vector<ShardChunk> chunks;
    for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
      const std::size_t offset = storage.unit(u).owned_offset - group.owned_offset;
      const float* grads =
          policy.swap_grads()
              ? slot->grads + offset
              : static_cast<const float*>(storage.owned_grads(static_cast<UnitId>(u)));
      chunks.push_back(setup_.shard_chunk(static_cast<UnitId>(u), master + offset, grads,
                                          state + states_ * offset));
    }
    setup_.optimizer.step(chunks, args);

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
      slot->master_write = swap->write(storage.master_region(g), slot->master);
      if (storage.state_region(g) >= 0)
        slot->state_write = swap->write(storage.state_region(g), slot->state);
      if (!pipeline_write) free_slot(*slot);  // pipeline_write: written behind the next step
    }
  }
  if (policy.swap_optimizer()) {
    for (SwapSlot& slot : slots)
      if (slot.memory.buffer.allocated()) free_slot(slot);
    swap->wait_all();
  }
  if (storage.owned_split() > 0)
    setup_.synchronize_compute("the optimizer step of the device sub-groups");
  // The staging buffers are read by queued copies: freed behind them.
  for (AlignedHostBuffer& buffer : staging.buffers)
    ctx.release_after(copy, std::make_shared<Buffer>(std::move(buffer.buffer)));
}

void HostOptimizer::send_group_params(const SubGroup& group, const float* master,
                                      const void* staged, Stream& copy, bool device_params,
                                      AlignedHostBuffer& param_io) {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
    const StateStorage::Placement& at = storage.unit(static_cast<UnitId>(u));
    const std::size_t offset = at.owned_offset - group.owned_offset;
    if (device_params) {
      const void* source = staged != nullptr
                               ? static_cast<const char*>(staged) + offset * size_of(policy.compute)
                               : static_cast<const void*>(master + offset);
      ctx.copy(copy, source, storage.owned_compute_params(static_cast<UnitId>(u)),
               at.owned_count * size_of(policy.compute));
    } else if (at.param_region < 0) {
      convert(master + offset, DType::kFloat32,
              storage.owned_compute_params(static_cast<UnitId>(u)), policy.compute, at.owned_count);
    } else {
      convert(master + offset, DType::kFloat32, param_io.data, policy.compute, at.owned_count);
      storage.param_store()->wait(storage.param_store()->write(at.param_region, param_io.data));
    }
  }
}

void HostOptimizer::params_from_master() {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  // After a checkpoint load (or any rewrite of the master): every sub-group's compute
  // parameters, as the step refreshes them.
  SwapSlot slot = make_swap_slot();
  AlignedHostBuffer param_io = make_param_io_buffer(ctx, policy, storage);
  AlignedHostBuffer stage;
  const bool device_params = !policy.offload_params();
  std::size_t largest = 0;
  for (const SubGroup& group : groups) largest = std::max(largest, group.num_elements);
  if (device_params && policy.compute != DType::kFloat32)
    stage = allocate_aligned(ctx.allocator(policy.staging_space), largest * size_of(policy.compute),
                             64, MemoryCategory::kWorkspace);
  if (planning_) return;
  device_groups_params_from_master();
  Stream& copy = ctx.copy_stream();
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g) {
    const SubGroup& group = groups[g];
    const float* master = storage.owned_params(static_cast<UnitId>(group.first_unit));
    if (policy.swap_optimizer()) {
      swap->wait(swap->read(storage.master_region(g), slot.master));
      master = slot.master;
    }
    if (stage.data != nullptr)
      convert(master, DType::kFloat32, stage.data, policy.compute, group.num_elements);
    send_group_params(group, master, stage.data, copy, device_params, param_io);
    copy.synchronize();  // the slot and the staging buffer are reused by the next sub-group
  }
}

}  // namespace zero
