// The swapped fp32 gradient partition (offload_optimizer nvme, ZeRO-Infinity): one swap region per
// sub-group, two host windows that reduced blocks are accumulated into (GradientSwap in
// engine_impl.h), the flush before the step and the reset after it.
//
// As DeepSpeed (stage3.py partition_grads, partitioned_optimizer_swapper.py): the reduced fp32
// gradients of a sub-group go out to its gradient file, the optimizer reads them back in with
// the sub-group's master and state, and they are not written again after the step. Unlike
// DeepSpeed, micro-steps accumulate into the regions (read back when a sub-group's blocks come
// again) rather than into a device copy, so the device holds no gradient partition either.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "../cpu/host_arithmetic.h"
#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {

void Engine::Impl::init_gradient_swap() {
  GradientSwap& swap = grad_swap;
  const std::vector<SubGroup>& groups = storage.sub_groups();
  swap.holds.assign(groups.size(), 0);
  swap.group_of.assign(units.size(), 0);
  swap.squares.assign(units.size(), SquaresResult{});
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t u = groups[g].first_unit; u < groups[g].last_unit; ++u) swap.group_of[u] = g;
}

void Engine::Impl::allocate_gradient_windows() {
  if (!policy.swap_grads() || grad_swap.windows[0].buffer.allocated()) return;
  std::size_t largest = 0;
  for (const SubGroup& group : storage.sub_groups())
    largest = std::max(largest, group.num_elements);
  const std::size_t alignment = storage.optimizer_swap()->io_alignment();
  // Workspace in the staging space, as large as the step's first two swap slots where those are
  // larger: the host allocator caches freed blocks by size, so the slots then reuse the windows'
  // memory instead of adding to the process's resident memory.
  for (std::size_t w = 0; w < 2; ++w) {
    AlignedHostBuffer& window = grad_swap.windows[w];
    std::size_t bytes = round_up(largest * sizeof(float), alignment) + alignment;
    if (w < host_optimizer.step_slot_count() && host_optimizer.step_slot_elements(w) > 0)
      bytes = std::max(bytes, host_optimizer.swap_slot_bytes(host_optimizer.step_slot_elements(w)));
    window.buffer = ctx.allocator(policy.staging_space).allocate(bytes, MemoryCategory::kWorkspace);
    if (window.buffer.data() != nullptr)
      window.data = reinterpret_cast<void*>(
          round_up(reinterpret_cast<std::uintptr_t>(window.buffer.data()), alignment));
  }
}

namespace {

// The squared norm of each unit of `group` over its gradients in `window` (the step's global norm
// takes these per-unit parts in unit order, as without swapping).
void window_squares(const StateStorage& storage, const SubGroup& group, const float* window,
                    std::vector<SquaresResult>& squares) {
  for (std::size_t u = group.first_unit; u < group.last_unit; ++u) {
    const StateStorage::Placement& at = storage.unit(static_cast<UnitId>(u));
    squares[u] = host::squares_of(window + (at.owned_offset - group.owned_offset), DType::kFloat32,
                                  at.owned_count);
  }
}

}  // namespace

float* Engine::Impl::gradient_window(std::size_t g) {
  SwapStore* store = storage.optimizer_swap();
  const std::vector<SubGroup>& groups = storage.sub_groups();
  GradientSwap& swap = grad_swap;
  if (swap.window_group[swap.current] == static_cast<int>(g))
    return static_cast<float*>(swap.windows[swap.current].data);
  // Write the current window out (behind), then take the other one for g.
  const int leaving = swap.window_group[swap.current];
  if (leaving >= 0) {
    const auto h = static_cast<std::size_t>(leaving);
    window_squares(storage, groups[h], static_cast<float*>(swap.windows[swap.current].data),
                   swap.squares);
    swap.window_write[swap.current] =
        store->write(storage.grad_region(h), swap.windows[swap.current].data);
  }
  const int other = 1 - swap.current;
  store->wait(std::exchange(swap.window_write[other], SwapTicket{}));
  auto* window = static_cast<float*>(swap.windows[other].data);
  // The other window still holds g when g was the one written out before (its write is done).
  if (swap.window_group[other] != static_cast<int>(g)) {
    if (swap.holds[g] != 0)
      store->wait(store->read(storage.grad_region(g), window));
    else
      std::memset(window, 0, groups[g].num_elements * sizeof(float));
  }
  swap.holds[g] = 1;
  swap.window_group[other] = static_cast<int>(g);
  swap.current = other;
  return window;
}

void Engine::Impl::flush_gradient_windows() {
  if (planning || !policy.swap_grads()) return;
  SwapStore* store = storage.optimizer_swap();
  GradientSwap& swap = grad_swap;
  for (int i = 0; i < 2; ++i) {
    const int w = (swap.current + 1 + i) % 2;  // the current window last
    store->wait(std::exchange(swap.window_write[w], SwapTicket{}));
    const int group = swap.window_group[w];
    if (group < 0) continue;
    const auto g = static_cast<std::size_t>(group);
    if (w == swap.current) {  // the other window was written when it was left
      window_squares(storage, storage.sub_groups()[g], static_cast<float*>(swap.windows[w].data),
                     swap.squares);
      store->wait(store->write(storage.grad_region(g), swap.windows[w].data));
    }
    swap.window_group[w] = -1;
  }
}

void Engine::Impl::release_gradient_windows() {
  for (AlignedHostBuffer& window : grad_swap.windows) window = AlignedHostBuffer();
}

void Engine::Impl::reset_gradient_swap() {
  GradientSwap& swap = grad_swap;
  for (int w = 0; w < 2; ++w) {
    storage.optimizer_swap()->wait(std::exchange(swap.window_write[w], SwapTicket{}));
    swap.window_group[w] = -1;
  }
  std::fill(swap.holds.begin(), swap.holds.end(), 0);
  std::fill(swap.squares.begin(), swap.squares.end(), SquaresResult{});
}

}  // namespace zero
