// A StateStorage for the engine part tests (state_storage_test, host_offload_test,
// grad_reduce_test): units of given sizes placed and allocated as one rank of a world, the way
// Engine::Impl builds its own.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/state_storage.h"
#include "zero/core/device_context.h"
#include "zero/core/partition.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero::testing {

// Units "u0", "u1", ... of `sizes` elements (padded for `world`, tensor counts from `tensors`:
// unit u has tensors(u), cutting its elements into consecutive ranges) as rank `rank`, their swap
// stores from `factory` (nvme offload), allocated.
template <typename Tensors>
std::unique_ptr<StateStorage> allocated_storage(DeviceContext& context,
                                                const EngineOptions& options,
                                                const StatePolicy& policy,
                                                const std::vector<std::size_t>& sizes, int rank,
                                                int world, std::size_t states_per_element,
                                                SwapStoreFactory factory, Tensors tensors) {
  auto storage = std::make_unique<StateStorage>(StateStorageSetup{
      .context = context,
      .options = options,
      .policy = policy,
      .rank = rank,
      .world = world,
      .states_per_element = states_per_element,
  });
  storage->set_swap_store_factory(std::move(factory));
  std::vector<StateStorage::UnitShape> shapes;
  for (std::size_t u = 0; u < sizes.size(); ++u) {
    const auto count = static_cast<std::size_t>(tensors(u));
    std::vector<ElementRange> ranges;
    for (std::size_t t = 0; t < count; ++t)
      ranges.push_back({sizes[u] * t / count, sizes[u] * (t + 1) / count});
    shapes.push_back({"u" + std::to_string(u), sizes[u],
                      padded_num_elements(sizes[u], world, options.alignment_elements),
                      std::move(ranges)});
  }
  storage->allocate(shapes);
  return storage;
}

}  // namespace zero::testing
