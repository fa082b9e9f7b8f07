// HostOffload's gradients (host_offload.h): the reduced blocks' copy to the host and their
// unpacking into the host gradient partition or, swapped (offload_optimizer nvme), its two
// sub-group windows.
//
// Streams: device->host copies of reduced blocks run on the context's copy stream; the host-side
// accumulation of a block is a host task on that stream after its copy. Every hand-over is an
// event (the communication stream waits for the copy stream before it overwrites a block that is
// still being copied), so the partition never asks which backend it runs on.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>

#include "../cpu/host_arithmetic.h"
#include "host_offload.h"
#include "stored_gradients.h"
#include "zero/core/error.h"

namespace zero {

static_assert(kSubGroupQuantumElements % host::kSquaresBlockElements == 0,
              "a split unit's pieces must start at the squares' block boundaries");

void HostOffload::allocate(std::size_t receive_elements) {
  const StatePolicy& policy = setup_.policy;
  receive_ =
      setup_.context.allocator(policy.staging_space)
          .allocate(receive_elements * size_of(policy.model_grads), MemoryCategory::kCommBuffers);
  if (!policy.swap_grads()) return;
  const StateStorage& storage = setup_.storage;
  const std::vector<SubGroup>& groups = storage.sub_groups();
  holds_.assign(groups.size(), 0);
  posts_.assign(groups.size(), 1.0f);
  unit_blocks_.assign(1, 0);
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u)
    unit_blocks_.push_back(unit_blocks_.back() + host::squares_blocks(storage.unit(u).owned_count));
  block_squares_.assign(unit_blocks_.back(), 0.0);
  for (std::size_t g = storage.device_groups(); g < groups.size(); ++g)
    for (const SubGroupPiece& piece : storage.pieces(g))
      largest_piece_ = std::max(largest_piece_, piece.num_elements);
}

void HostOffload::unpack(const void* reduced, std::size_t count, std::vector<HostGradPiece> pieces,
                         bool accumulate, float post) {
  if (planning_) return;
  DeviceContext& ctx = setup_.context;
  Communicator& comm = setup_.communicator;
  const DType dtype = setup_.policy.model_grads;
  Stream& copy = ctx.copy_stream();
  copy.wait(comm.stream().record());
  ctx.copy(copy, reduced, receive_.data(), count * size_of(dtype));
  // The next flush overwrites the bucket and the receive block: after this copy.
  comm.stream().wait(copy.record());
  void* host = receive_.data();
  const std::size_t bytes = size_of(dtype);
  const bool swapped = setup_.policy.swap_grads();
  copy.submit([this, host, dtype, bytes, pieces = std::move(pieces), accumulate, post, swapped] {
    for (const HostGradPiece& piece : pieces) {
      const void* source = static_cast<const char*>(host) + piece.bucket_offset * bytes;
      if (swapped)  // into its sub-groups' windows (swapped in or out here, on this stream)
        unpack_into_windows(piece, source, accumulate, post);
      else if (accumulate)
        host::axpy_values(source, dtype, piece.destination, DType::kFloat32, piece.count, post);
      else
        host::scale_values(source, dtype, piece.destination, DType::kFloat32, piece.count, post);
    }
  });
}

void HostOffload::unpack_into_windows(const HostGradPiece& piece, const void* source,
                                      bool accumulate, float post) {
  const StateStorage& storage = setup_.storage;
  const DType dtype = setup_.policy.model_grads;
  const std::size_t bytes = size_of(dtype);
  // The piece's owned elements may span sub-groups (a unit split over them): each part into its
  // group's window, starting with the window in use (the previous block's last group: blocks of
  // a unit come in ascending order) or else the last group (the backward's order), so each group
  // is taken once per pass rather than written out and read back.
  const std::size_t begin = storage.unit(piece.unit).owned_offset + piece.offset;
  const std::size_t end = begin + piece.count;
  const std::size_t first_group = storage.group_at(begin), last_group = storage.group_at(end - 1);
  const bool ascending = window_group_[current_] == static_cast<int>(first_group);
  for (std::size_t i = 0; i <= last_group - first_group; ++i) {
    const std::size_t g = ascending ? first_group + i : last_group - i;
    const SubGroup& group = storage.sub_groups()[g];
    const std::size_t first = std::max(begin, group.owned_offset);
    const std::size_t count = std::min(end, group.owned_offset + group.num_elements) - first;
    const void* values = static_cast<const char*>(source) + (first - begin) * bytes;
    const std::size_t offset = first - group.owned_offset;   // in the window
    if (setup_.policy.grad_swap_dtype != DType::kFloat32) {  // stored as reduced, once a step
      std::memcpy(window(g) + offset * bytes, values, count * bytes);
      posts_[g] = post;
    } else {
      float* destination = reinterpret_cast<float*>(window(g)) + offset;
      if (accumulate)
        host::axpy_values(values, dtype, destination, DType::kFloat32, count, post);
      else
        host::scale_values(values, dtype, destination, DType::kFloat32, count, post);
    }
  }
}

void HostOffload::zero() {
  if (planning_) return;
  DeviceContext& ctx = setup_.context;
  if (step_in_flight() && !setup_.policy.swap_grads()) {  // the step still reads the partition
    zero_after_step_ = true;
    return;
  }
  if (setup_.policy.swap_grads()) {  // on the copy stream too: after the queued accumulations
    if (settled_) spill_windows();   // no task uses them: squares() drained the copy stream
    ctx.copy_stream().submit([this] { reset_swap(); });
    return;
  }
  const Buffer& grad_shard = setup_.storage.host_grad_shard();
  if (grad_shard.data() == nullptr) return;
  // On the copy stream: after every queued accumulation, before the next.
  void* data = grad_shard.data();
  const std::size_t bytes = grad_shard.size_bytes();
  ctx.copy_stream().submit([data, bytes] { std::memset(data, 0, bytes); });
}

void HostOffload::squares(std::vector<SquaresResult>& partial) {
  const StateStorage& storage = setup_.storage;
  if (setup_.policy.swap_grads()) {  // the windows stay, for the step to take
    settle_windows();
    for (std::size_t u = 0; u < storage.num_units(); ++u)
      partial[u] = host::sum_block_squares(
          std::span<const double>(block_squares_)
              .subspan(unit_blocks_[u], unit_blocks_[u + 1] - unit_blocks_[u]));
    return;
  }
  if (planning_) return;  // no values: the squares stay zero, as the planning context's
  for (UnitId u = 0; u < static_cast<UnitId>(storage.num_units()); ++u)
    if (!storage.on_device(u))
      partial[u] =
          host::squares_of(storage.owned_grads(u), DType::kFloat32, storage.unit(u).owned_count);
}

void HostOffload::before_flush() {
  settle_step();  // the step's slots go before the windows come
  allocate_windows(static_cast<std::size_t>(setup_.options.gradient_accumulation_steps));
}

void HostOffload::allocate_windows(std::size_t micro_steps_per_step) {
  const StateStorage& storage = setup_.storage;
  if (!setup_.policy.swap_grads() || windows_[0].buffer.allocated()) return;
  std::size_t largest = 0;
  for (const SubGroup& group : storage.sub_groups())
    largest = std::max(largest, group.num_elements);
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  // Workspace in the staging space, as large as the step's first two swap slots where those are
  // larger: the host allocator caches freed blocks by size, so the slots then reuse the windows'
  // memory instead of adding to the process's resident memory.
  for (std::size_t w = 0; w < 2; ++w) {
    AlignedHostBuffer& window = windows_[w];
    std::size_t bytes =
        round_up(largest * size_of(setup_.policy.grad_swap_dtype), alignment) + alignment;
    if (w < step_slot_count() && step_slot_elements(w) > 0)
      bytes = std::max(bytes, swap_slot_bytes(step_slot_elements(w)));
    window.buffer = setup_.context.allocator(setup_.policy.staging_space)
                        .allocate(bytes, MemoryCategory::kWorkspace);
    if (window.buffer.data() != nullptr)
      window.data = reinterpret_cast<void*>(
          round_up(reinterpret_cast<std::uintptr_t>(window.buffer.data()), alignment));
  }
  // The backward reaches the host sub-groups last to first, each once per micro-step, taking the
  // other window at each: start where the first host sub-group then ends in the window sized for
  // its slot (and the second in the other), so the step can take both (take_windows). Another
  // order of blocks only costs the bytes this saves.
  const std::size_t first_host = storage.device_groups();
  const std::size_t host_groups = storage.sub_groups().size() - first_host;
  const std::size_t slot = first_host % step_slot_count();
  const std::size_t last_window = slot < 2 ? slot : 0;
  const std::size_t takes_after_first = micro_steps_per_step * host_groups - 1;
  current_ = 1 - static_cast<int>(last_window ^ (takes_after_first % 2));
  // Stored 16-bit: a piece's fp32 values for its squares (window_squares), beside the windows.
  if (setup_.policy.grad_swap_dtype != DType::kFloat32)
    widened_ = setup_.context.allocator(setup_.policy.staging_space)
                   .allocate(largest_piece_ * sizeof(float), MemoryCategory::kWorkspace);
}

void HostOffload::release_windows() {
  for (AlignedHostBuffer& window : windows_) window = AlignedHostBuffer();
  widened_ = Buffer();
}

void HostOffload::window_squares(std::size_t g, const void* window) {
  const StateStorage& storage = setup_.storage;
  const DType stored = setup_.policy.grad_swap_dtype;
  for (const SubGroupPiece& piece : storage.pieces(g)) {
    const void* values = static_cast<const char*>(window) + piece.group_offset * size_of(stored);
    if (stored != DType::kFloat32) {  // the fp32 values the step will widen them to
      widen_gradients(values, stored, posts_[g], static_cast<float*>(widened_.data()),
                      piece.num_elements);
      values = widened_.data();
    }
    // A split unit's pieces start at block boundaries, so its blocks are the whole unit's.
    ZERO_DCHECK(piece.unit_offset % host::kSquaresBlockElements == 0,
                "a sub-group piece off the squares' blocks");
    host::block_squares(static_cast<const float*>(values), piece.num_elements,
                        block_squares_.data() + unit_blocks_[piece.unit] +
                            piece.unit_offset / host::kSquaresBlockElements);
  }
}

char* HostOffload::window(std::size_t g) {
  const StateStorage& storage = setup_.storage;
  SwapStore* store = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  if (window_group_[current_] == static_cast<int>(g))
    return static_cast<char*>(windows_[current_].data);
  // Write the current window out (behind), then take the other one for g.
  const int leaving = window_group_[current_];
  if (leaving >= 0) {
    const auto h = static_cast<std::size_t>(leaving);
    window_squares(h, windows_[current_].data);
    window_write_[current_] = store->write(storage.grad_region(h), windows_[current_].data);
  }
  const int other = 1 - current_;
  store->wait(std::exchange(window_write_[other], SwapTicket{}));
  auto* data = static_cast<char*>(windows_[other].data);
  // The other window still holds g when g was the one written out before (its write is done).
  if (window_group_[other] != static_cast<int>(g)) {
    if (holds_[g] != 0)
      store->wait(store->read(storage.grad_region(g), data));
    else
      std::memset(data, 0, groups[g].num_elements * size_of(setup_.policy.grad_swap_dtype));
  }
  holds_[g] = 1;
  window_group_[other] = static_cast<int>(g);
  current_ = other;
  return data;
}

void HostOffload::settle_windows() {
  if (!setup_.policy.swap_grads()) return;
  if (planning_) {  // no window holds gradients: freed, as the step frees those it does not take
    release_windows();
    return;
  }
  const StateStorage& storage = setup_.storage;
  SwapStore* store = storage.optimizer_swap();
  // The window left last was written out behind the blocks of the current one: its data stays
  // valid once the write is done.
  for (SwapTicket& write : window_write_) store->wait(std::exchange(write, SwapTicket{}));
  unwritten_ = -1;
  const int group = window_group_[current_];
  if (group >= 0) {
    window_squares(static_cast<std::size_t>(group), windows_[current_].data);
    unwritten_ = current_;
  }
  settled_ = true;
}

std::vector<GradientWindow> HostOffload::take_windows(
    const std::function<bool(std::size_t group, std::size_t size_bytes)>& adopt) {
  std::vector<GradientWindow> taken;
  if (!settled_) return taken;  // none kept (a plan, or outside a step)
  const StateStorage& storage = setup_.storage;
  SwapStore* store = storage.optimizer_swap();
  const bool swapped_order = window_group_[1] >= 0 && window_group_[1] < window_group_[0];
  for (const int w : {swapped_order ? 1 : 0, swapped_order ? 0 : 1}) {
    const int group = std::exchange(window_group_[w], -1);
    if (group < 0) continue;
    const auto g = static_cast<std::size_t>(group);
    if (adopt(g, windows_[w].buffer.size_bytes()))
      taken.push_back({g, std::exchange(windows_[w], AlignedHostBuffer())});
    else if (w == unwritten_)  // the region lacks the last blocks: written now
      store->wait(store->write(storage.grad_region(g), windows_[w].data));
  }
  settled_ = false;
  unwritten_ = -1;
  release_windows();  // the copy stream is drained: no task uses them
  return taken;
}

void HostOffload::spill_windows() {
  take_windows([](std::size_t, std::size_t) { return false; });
}

void HostOffload::reset_swap() {
  for (int w = 0; w < 2; ++w) {
    setup_.storage.optimizer_swap()->wait(std::exchange(window_write_[w], SwapTicket{}));
    window_group_[w] = -1;
  }
  std::fill(holds_.begin(), holds_.end(), 0);
  std::fill(block_squares_.begin(), block_squares_.end(), 0.0);
}

}  // namespace zero
