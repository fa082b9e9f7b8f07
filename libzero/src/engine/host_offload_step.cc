// HostOffload's step (host_offload.h): offload_optimizer's step on the host, sub-group by
// sub-group.
//
// Streams: host->device copies of updated parameters run on the context's copy stream while the
// host thread steps the next sub-group; a swap slot (nvme) or a 16-bit staging buffer is reused
// only after the event of the copy that read it. With nvme, each host sub-group's master, state
// and (swapped) gradients are read into a slot before its step and written back after it; with
// pipeline_read the next sub-group's read, with pipeline_write the previous one's write, run
// during the step.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "host_offload.h"
#include "stored_gradients.h"
#include "zero/core/error.h"

namespace zero {

HostOffload::HostOffload(HostOffloadSetup setup)
    : setup_(std::move(setup)),
      planning_(setup_.context.planning()),
      states_(static_cast<std::size_t>(setup_.optimizer.states_per_element())) {}

bool HostOffload::take_params_refreshed() { return std::exchange(params_refreshed_, false); }

SwapSlot HostOffload::make_swap_slot(std::size_t elements) const {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  if (!policy.swap_optimizer()) return SwapSlot();
  std::size_t largest = elements;
  if (largest == 0)
    for (const SubGroup& group : storage.sub_groups())
      largest = std::max(largest, group.num_elements);
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  return slot_in(
      allocate_aligned(setup_.context.allocator(policy.staging_space),
                       swap_slot_bytes(largest) - alignment, alignment, MemoryCategory::kWorkspace),
      largest);
}

SwapSlot HostOffload::slot_in(AlignedHostBuffer memory, std::size_t elements) const {
  const std::size_t alignment = setup_.storage.optimizer_swap()->io_alignment();
  const std::size_t master_bytes = round_up(elements * sizeof(float), alignment);
  const std::size_t grads_bytes = setup_.policy.swap_grads() ? master_bytes : 0;
  SwapSlot slot;
  slot.memory = std::move(memory);
  if (slot.memory.data != nullptr) {
    char* base = static_cast<char*>(slot.memory.data);
    if (grads_bytes > 0) slot.grads = reinterpret_cast<float*>(base);
    slot.master = reinterpret_cast<float*>(base + grads_bytes);
    slot.state = reinterpret_cast<float*>(base + grads_bytes + master_bytes);
  }
  return slot;
}

std::size_t HostOffload::swap_slot_bytes(std::size_t elements) const {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  const std::size_t master_bytes = round_up(elements * sizeof(float), alignment);
  const std::size_t state_bytes = round_up(states_ * elements * sizeof(float), alignment);
  const std::size_t grads_bytes = policy.swap_grads() ? master_bytes : 0;
  return master_bytes + state_bytes + grads_bytes + alignment;
}

std::size_t HostOffload::step_slot_count() const {
  const bool pipeline_read = setup_.options.offload_optimizer.pipeline_read;
  const bool pipeline_write = setup_.options.offload_optimizer.pipeline_write;
  return pipeline_read && pipeline_write ? 3 : (pipeline_read || pipeline_write ? 2 : 1);
}

std::size_t HostOffload::step_slot_elements(std::size_t slot) const {
  const StateStorage& storage = setup_.storage;
  const std::vector<SubGroup>& groups = storage.sub_groups();
  const std::size_t count = step_slot_count();
  std::size_t elements = 0;
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g)
    if (g % count == slot) elements = std::max(elements, groups[g].num_elements);
  return elements;
}

void HostOffload::initialize_unit(UnitId u, const float* master, SwapSlot& slot,
                                  AlignedHostBuffer& param_io) {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  const StateStorage::Placement& at = storage.unit(u);
  const std::size_t count = at.owned_count;
  if (!policy.swap_optimizer()) {
    std::memcpy(storage.owned_params(u), master, count * sizeof(float));
  } else {  // piece by piece into its sub-groups, each written out once complete
    const auto [first, last] = storage.groups_of(u);
    for (std::size_t g = first; g < last; ++g)
      for (const SubGroupPiece& piece : storage.pieces(g)) {
        if (piece.unit != static_cast<std::size_t>(u)) continue;
        std::memcpy(slot.master + piece.group_offset, master + piece.unit_offset,
                    piece.num_elements * sizeof(float));
        if (piece.group_offset + piece.num_elements < groups[g].num_elements) continue;
        std::memset(slot.state, 0, states_ * groups[g].num_elements * sizeof(float));
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

std::vector<ShardChunk> HostOffload::group_chunks(std::size_t g, const SwapSlot* slot) const {
  const StateStorage& storage = setup_.storage;
  std::vector<ShardChunk> chunks;
  for (const SubGroupPiece& piece : storage.pieces(g)) {
    const auto u = static_cast<UnitId>(piece.unit);
    const std::size_t count = piece.num_elements;
    if (slot != nullptr) {  // laid out piece by piece: k × count states each
      const float* grads =
          setup_.policy.swap_grads()
              ? slot->grads + piece.group_offset
              : static_cast<const float*>(storage.owned_grads(u)) + piece.unit_offset;
      chunks.push_back(storage.shard_chunk(u, piece.unit_offset, count,
                                           slot->master + piece.group_offset, grads,
                                           slot->state + states_ * piece.group_offset, count));
    } else {  // the resident buffers: each unit's states k × owned_count
      const std::size_t owned = storage.unit(u).owned_count;
      chunks.push_back(storage.shard_chunk(
          u, piece.unit_offset, count, storage.owned_params(u) + piece.unit_offset,
          static_cast<const float*>(storage.owned_grads(u)) + piece.unit_offset,
          states_ > 0 ? storage.owned_state(u) + piece.unit_offset : nullptr, owned));
    }
  }
  return chunks;
}

void HostOffload::device_groups_step(const OptimizerStep& args) {
  DeviceContext& ctx = setup_.context;
  const StateStorage& storage = setup_.storage;
  if (storage.owned_split() == 0 || planning_) return;
  std::vector<ShardChunk> chunks;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()) && storage.on_device(u); ++u)
    chunks.push_back(storage.shard_chunk(u, storage.owned_params(u),
                                         static_cast<const float*>(storage.owned_grads(u)),
                                         storage.owned_state(u)));
  setup_.optimizer.step_on(ctx, ctx.compute_stream(), chunks, args);
}

void HostOffload::device_groups_params_from_master(const Buffer& device_staging,
                                                   AlignedHostBuffer& param_io) {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  if (storage.owned_split() == 0 || planning_) return;
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()) && storage.on_device(u); ++u)
    if (policy.offload_params())
      store_param_shard(u, storage.owned_params(u), device_staging, param_io);
    else
      ctx.convert(ctx.compute_stream(), storage.owned_params(u), DType::kFloat32,
                  storage.owned_compute_params(u), policy.compute, storage.unit(u).owned_count);
  if (policy.offload_params()) after_param_shards_stored();
}

struct HostOffload::StepWork {
  // nvme: slot i holds the sub-groups g with g % num_slots == i, sized for the largest of those
  // (a large embedding sub-group then enlarges one slot, not all).
  std::size_t num_slots = 1;
  SwapSlot slots[3];
  // Double-buffered host staging of 16-bit parameters on their way to the device.
  AlignedHostBuffer staging[2];
  Event staging_copied[2];
  int next_staging = 0;
  ParamAssembly params;  // offload_param nvme: shards on their way to their regions
  // Partial offload with offload_param: the device sub-groups' shards converted on the device on
  // their way out (store_param_shard).
  Buffer device_staging;
  // The host sub-groups in the order they are stepped: those whose gradients the step took from
  // the backward's windows first.
  std::vector<std::size_t> order;
  std::vector<char> held;  // per sub-group: held() when the step began
  // Per sub-group: stored_scale() when the step began (16-bit stored gradients).
  std::vector<float> scale;
};

struct HostOffload::AsyncStep {
  std::thread worker;
  std::mutex mutex;
  std::condition_variable progress;
  std::vector<char> done;               // per sub-group: stepped, compute parameters refreshed
  std::vector<Event> refreshed;         // per sub-group: after the copies of its compute parameters
  std::vector<std::size_t> order_done;  // per sub-group: 1 + its place in the step's order
  bool finished = false;
  std::exception_ptr error;
  std::int64_t global_step = 0;  // the boundary it belongs to, which its errors name
};

HostOffload::~HostOffload() {
  try {
    wait_for_step();
  } catch (...) {  // reported by the wait that failed, or lost with the engine
  }
}

void HostOffload::free_slot(SwapSlot& slot) const {
  SwapStore* swap = setup_.storage.optimizer_swap();
  swap->wait(slot.master_write);
  swap->wait(slot.state_write);
  slot.master_write = slot.state_write = {};
  slot.copied.synchronize();
  slot.copied = Event();
}

void HostOffload::read_group(SwapSlot& slot, std::size_t g, bool held) const {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  free_slot(slot);
  slot.group = static_cast<int>(g);
  slot.master_read = swap->read(storage.master_region(g), slot.master);
  slot.state_read =
      storage.state_region(g) >= 0 ? swap->read(storage.state_region(g), slot.state) : SwapTicket{};
  slot.grads_read = SwapTicket{};
  // Its gradient window, taken from the backward: the gradients are in place.
  if (!policy.swap_grads() || std::exchange(slot.grads_group, -1) == static_cast<int>(g)) return;
  slot.grads_stored = held && policy.grad_swap_dtype != DType::kFloat32;
  if (held)
    slot.grads_read = swap->read(storage.grad_region(g), slot.grads);
  else  // a sub-group no block reached this step (no gradients): zeros, as the partition holds
    std::memset(slot.grads, 0, storage.sub_groups()[g].num_elements * sizeof(float));
}

HostOffload::StepWork HostOffload::begin_step() {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const std::vector<SubGroup>& groups = storage.sub_groups();
  StepWork work;
  // pipeline_read / pipeline_write: a second slot, so one sub-group's read (or write) runs during
  // another's step; both: three, so the step of sub-group k overlaps the read of k+1 and the
  // write of k-1 (k+1's slot is k-2's, whose write had k-1's step to finish).
  work.num_slots = step_slot_count();
  const std::size_t num_slots = work.num_slots;
  if (policy.swap_optimizer()) {
    // A window becomes the slot of its sub-group when its buffer is that slot's size, so the step
    // holds the bytes it would allocate (the windows were sized for the first slots).
    std::vector<char> claimed(num_slots, 0);
    std::vector<GradientWindow> windows;
    if (policy.swap_grads())
      windows = take_windows([&](std::size_t g, std::size_t size_bytes) {
        const std::size_t slot = g % num_slots;
        if (g < storage.device_groups() || claimed[slot] != 0 ||
            size_bytes != swap_slot_bytes(step_slot_elements(slot)))
          return false;
        claimed[slot] = 1;
        return true;
      });
    for (GradientWindow& window : windows) {
      const std::size_t slot = window.group % num_slots;
      work.slots[slot] = slot_in(std::move(window.memory), step_slot_elements(slot));
      work.slots[slot].grads_group = static_cast<int>(window.group);
      work.slots[slot].grads_stored = policy.grad_swap_dtype != DType::kFloat32;
      work.order.push_back(window.group);
    }
    for (std::size_t i = 0; i < num_slots; ++i)
      if (claimed[i] == 0 && step_slot_elements(i) > 0)
        work.slots[i] = make_swap_slot(step_slot_elements(i));
  }
  std::vector<char> first(groups.size(), 0);  // stepped first: their windows were adopted
  for (const std::size_t g : work.order) first[g] = 1;
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g)
    if (first[g] == 0) work.order.push_back(g);
  std::size_t largest = 0;
  for (const SubGroup& group : groups) largest = std::max(largest, group.num_elements);
  if (!policy.offload_params() && policy.compute != DType::kFloat32)
    for (AlignedHostBuffer& buffer : work.staging)
      buffer = allocate_aligned(ctx.allocator(policy.staging_space),
                                largest * size_of(policy.compute), 64, MemoryCategory::kWorkspace);
  work.params = make_param_assembly(work.order);
  work.device_staging = make_param_device_staging();
  work.held.assign(groups.size(), 0);
  work.scale.assign(groups.size(), 1.0f);
  if (policy.swap_grads())
    for (std::size_t g = storage.device_groups(); g < groups.size(); ++g) {
      work.held[g] = held(g) ? 1 : 0;
      if (policy.grad_swap_dtype != DType::kFloat32) work.scale[g] = stored_scale(g);
    }
  return work;
}

void HostOffload::step(const OptimizerStep& args) {
  // Transient host buffers of the step (workspace): swap slots, 16-bit staging, swapped
  // parameter shards. Allocated in a plan too, so the plan's peaks are the run's.
  StepWork work = begin_step();
  params_refreshed_ = true;
  if (planning_) return;
  // Partial offload: the device sub-groups step on the compute stream meanwhile. Their
  // parameters on the device are converted behind their step; offload_param's are stored out
  // after the host sub-groups, as storing waits for the compute stream (the device step).
  device_groups_step(args);
  const bool device_params = !setup_.policy.offload_params();
  if (device_params) device_groups_params_from_master(work.device_staging, work.params.io);
  try {
    for (std::size_t i = 0; i < work.order.size(); ++i) step_group(work, i, args);
    if (!device_params) device_groups_params_from_master(work.device_staging, work.params.io);
  } catch (...) {
    drain_failed_step();
    throw;
  }
  finish_step(work);
}

void HostOffload::step_async(const OptimizerStep& args, std::int64_t global_step) {
  wait_for_step();
  ZERO_CHECK(setup_.storage.owned_split() == 0,
             "the overlapped optimizer step has no device sub-groups (partial offload)");
  auto work = std::make_shared<StepWork>(begin_step());
  params_refreshed_ = true;
  if (planning_) return;
  async_ = std::make_unique<AsyncStep>();
  AsyncStep& async = *async_;
  async.global_step = global_step;
  async.done.assign(setup_.storage.sub_groups().size(), 0);
  async.refreshed.resize(async.done.size());
  async.order_done.assign(async.done.size(), 0);
  // The worker issues no collective: an optimizer asking for one (LAMB's trust ratios, refused
  // with offload) fails instead of running a collective off the rank's thread.
  OptimizerStep worker_args = args;
  worker_args.all_reduce_sum = [](float*, std::size_t count) {
    ZERO_CHECK(count == 0, "an all-reduce in the overlapped optimizer step");
  };
  async.worker = std::thread([this, &async, work, args = std::move(worker_args)] {
    try {
      setup_.context.use_on_this_thread();
      for (std::size_t i = 0; i < work->order.size(); ++i) {
        const Event copied = step_group(*work, i, args);
        std::lock_guard lock(async.mutex);
        async.done[work->order[i]] = 1;
        async.refreshed[work->order[i]] = copied;
        async.order_done[work->order[i]] = i + 1;
        async.progress.notify_all();
      }
      finish_step(*work);
    } catch (...) {
      drain_failed_step();  // before `work`'s buffers go with this thread's function
      std::lock_guard lock(async.mutex);
      async.error = std::current_exception();
    }
    std::lock_guard lock(async.mutex);
    async.finished = true;
    async.progress.notify_all();
  });
}

Event HostOffload::wait_for_unit(UnitId u) {
  if (!async_) return Event();
  const auto [first, last] = setup_.storage.groups_of(u);
  AsyncStep& async = *async_;
  {
    // Every sub-group holding part of it; the copy stream runs their copies in the order queued,
    // so the event of the last one queued covers them all.
    auto done = [&] {
      for (std::size_t g = first; g < last; ++g)
        if (async.done[g] == 0) return false;
      return true;
    };
    std::unique_lock lock(async.mutex);
    async.progress.wait(lock, [&] { return done() || async.finished; });
    if (async.error == nullptr && done()) {
      std::size_t latest = first;
      for (std::size_t g = first; g < last; ++g)
        if (async.order_done[g] > async.order_done[latest]) latest = g;
      return async.refreshed[latest];
    }
  }
  wait_for_step();  // its error, rethrown
  return Event();
}

void HostOffload::wait_for_step() {
  if (!async_) return;
  async_->worker.join();
  const std::exception_ptr error = async_->error;
  async_.reset();
  if (error) std::rethrow_exception(error);
}

std::int64_t HostOffload::global_step_in_flight() const { return async_ ? async_->global_step : 0; }

void HostOffload::settle_step() {
  if (!async_) return;
  const std::int64_t global_step = global_step_in_flight();
  try {
    wait_for_step();
  } catch (const Error& error) {
    throw_step_error(error, global_step);
  }
  if (std::exchange(zero_after_step_, false)) zero();
  // The step's parameter copies (each sub-group's, on the copy stream) come before any gather:
  // once settled, param_shard() no longer waits per unit (gpt2_async_engine_test's evaluation
  // after wait_for_step fails under stream stress without this).
  if (!planning_) setup_.communicator.stream().wait(setup_.context.copy_stream().record());
}

void HostOffload::throw_step_error(const Error& error, std::int64_t global_step) const {
  const Communicator& comm = setup_.communicator;
  ZERO_THROW("engine (rank ", comm.rank(), "/", comm.world_size(), ", stage ", setup_.options.stage,
             ") the offloaded optimizer step of global step ", global_step, ": ", error.what());
}

Event HostOffload::step_group(StepWork& work, std::size_t i, const OptimizerStep& args) {
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::size_t g = work.order[i];
  const SubGroup& group = storage.sub_groups()[g];
  const float* master = storage.group_master(g);
  SwapSlot* slot = nullptr;
  if (policy.swap_optimizer()) {
    slot = &work.slots[g % work.num_slots];
    if (slot->group != static_cast<int>(g)) read_group(*slot, g, work.held[g] != 0);
    swap->wait(slot->master_read);
    swap->wait(slot->state_read);
    swap->wait(slot->grads_read);
    if (std::exchange(slot->grads_stored, false))
      widen_gradients_in_place(slot->grads, policy.grad_swap_dtype, work.scale[g],
                               group.num_elements);
    // pipeline_read: the next sub-group's read runs during this one's step (when it goes to
    // another slot: after the adopted windows the order may skip).
    if (setup_.options.offload_optimizer.pipeline_read && i + 1 < work.order.size() &&
        work.order[i + 1] % work.num_slots != g % work.num_slots)
      read_group(work.slots[work.order[i + 1] % work.num_slots], work.order[i + 1],
                 work.held[work.order[i + 1]] != 0);
    master = slot->master;
  }
  std::vector<ShardChunk> chunks = group_chunks(g, slot);
  setup_.optimizer.step(chunks, args);

  // The sub-group's compute parameters from its updated master: host->device on the copy
  // stream (through 16-bit staging), or into the host / swapped parameter shard (offload_param).
  Stream& copy = setup_.context.copy_stream();
  const bool device_params = !policy.offload_params();
  AlignedHostBuffer* stage = nullptr;
  const int index = work.next_staging;
  if (work.staging[0].buffer.allocated()) {
    work.next_staging = 1 - index;
    work.staging_copied[index].synchronize();  // the copy that read this buffer two groups ago
    stage = &work.staging[index];
    convert(master, DType::kFloat32, stage->data, policy.compute, group.num_elements);
  }
  send_group_params(g, master, stage ? stage->data : nullptr, copy, device_params, work.params);
  const Event copied = copy.record();
  if (stage) work.staging_copied[index] = copied;
  if (slot) {
    slot->copied = copied;
    slot->master_write = swap->write(storage.master_region(g), slot->master);
    if (storage.state_region(g) >= 0)
      slot->state_write = swap->write(storage.state_region(g), slot->state);
    // pipeline_write: written behind the next step.
    if (!setup_.options.offload_optimizer.pipeline_write) free_slot(*slot);
  }
  return copied;
}

void HostOffload::finish_step(StepWork& work) {
  const StateStorage& storage = setup_.storage;
  if (setup_.policy.swap_optimizer()) {
    // Only the step's own tickets: each slot's writes (free_slot) and each read (its sub-group's
    // step_group waited it). Never the store's wait_all: the parameters' swap regions may share
    // this store (offload_param on the same path), and a gather's read in flight on the engine's
    // thread is the gather's to wait.
    for (SwapSlot& slot : work.slots)
      if (slot.memory.buffer.allocated()) free_slot(slot);
  }
  if (storage.owned_split() > 0) {
    try {
      setup_.context.compute_stream().synchronize();
    } catch (const Error& error) {
      ZERO_THROW("the optimizer step of the device sub-groups: ", error.what());
    }
  }
  // The staging buffers are read by queued copies: freed behind them.
  Stream& copy = setup_.context.copy_stream();
  for (AlignedHostBuffer& buffer : work.staging)
    setup_.context.release_after(copy, std::make_shared<Buffer>(std::move(buffer.buffer)));
}

void HostOffload::drain_failed_step() noexcept {
  try {
    setup_.context.copy_stream().synchronize();
  } catch (...) {
  }
  if (!setup_.policy.swap_optimizer()) return;
  try {
    setup_.storage.optimizer_swap()->wait_all();
  } catch (...) {
  }
}

void HostOffload::send_group_params(std::size_t g, const float* master, const void* staged,
                                    Stream& copy, bool device_params, ParamAssembly& params) {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  const std::size_t compute = size_of(policy.compute);
  for (const SubGroupPiece& piece : storage.pieces(g)) {
    const auto u = static_cast<UnitId>(piece.unit);
    const StateStorage::Placement& at = storage.unit(u);
    const float* values = master + piece.group_offset;
    const std::size_t count = piece.num_elements;
    if (device_params) {
      const void* source = staged != nullptr
                               ? static_cast<const void*>(static_cast<const char*>(staged) +
                                                          piece.group_offset * compute)
                               : static_cast<const void*>(values);
      ctx.copy(copy, source,
               static_cast<char*>(storage.owned_compute_params(u)) + piece.unit_offset * compute,
               count * compute);
      continue;
    }
    if (at.param_region < 0) {
      convert(values, DType::kFloat32,
              static_cast<char*>(storage.owned_compute_params(u)) + piece.unit_offset * compute,
              policy.compute, count);
      continue;
    }
    SwapStore& store = *storage.param_store();
    if (params.unit != static_cast<int>(u)) {  // `io` becomes this unit's
      flush_params(params);
      const bool split = !piece.whole(at.owned_count);
      if (split && params.in_order[piece.unit] == 0)
        store.wait(store.read(at.param_region, params.io.data));
      params.unit = static_cast<int>(u);
    }
    convert(values, DType::kFloat32,
            static_cast<char*>(params.io.data) + piece.unit_offset * compute, policy.compute,
            count);
    params.converted[piece.unit] += count;
    if (params.converted[piece.unit] == at.owned_count) flush_params(params);
  }
}

void HostOffload::params_from_master() {
  DeviceContext& ctx = setup_.context;
  const StatePolicy& policy = setup_.policy;
  const StateStorage& storage = setup_.storage;
  SwapStore* swap = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  // After a checkpoint load (or any rewrite of the master): every sub-group's compute
  // parameters, as the step refreshes them.
  SwapSlot slot = make_swap_slot();
  std::vector<std::size_t> ascending;
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g) ascending.push_back(g);
  ParamAssembly params = make_param_assembly(ascending);
  AlignedHostBuffer stage;
  const bool device_params = !policy.offload_params();
  std::size_t largest = 0;
  for (const SubGroup& group : groups) largest = std::max(largest, group.num_elements);
  if (device_params && policy.compute != DType::kFloat32)
    stage = allocate_aligned(ctx.allocator(policy.staging_space), largest * size_of(policy.compute),
                             64, MemoryCategory::kWorkspace);
  const Buffer device_staging = make_param_device_staging();
  if (planning_) return;
  device_groups_params_from_master(device_staging, params.io);
  Stream& copy = ctx.copy_stream();
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g) {
    const SubGroup& group = groups[g];
    const float* master = storage.group_master(g);
    if (policy.swap_optimizer()) {
      swap->wait(swap->read(storage.master_region(g), slot.master));
      master = slot.master;
    }
    if (stage.data != nullptr)
      convert(master, DType::kFloat32, stage.data, policy.compute, group.num_elements);
    send_group_params(g, master, stage.data, copy, device_params, params);
    copy.synchronize();  // the slot and the staging buffer are reused by the next sub-group
  }
}

}  // namespace zero
