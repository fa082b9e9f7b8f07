// StateStorage: the units' flat state storage. One allocation per kind of state (llm.c): full
// parameters and gradients (stages 0-2 / 0-1), the parameter and gradient shards (stage 3 /
// stages 2-3), the fp32 master and the optimizer moments, each in the memory space and dtype
// StatePolicy gives it; what lives beyond memory (offload nvme) in swap regions of a SwapStore; and
// every unit's place in them (its offsets, its optimizer sub-group) with the views the rest of the
// engine reads and writes through.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/optimizer.h"
#include "zero/core/partition.h"
#include "zero/core/stream.h"
#include "zero/core/swap_store.h"
#include "zero/engine/memory_formula.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"
#include "zero/engine/types.h"

namespace zero {

// What the storage is sized and placed by. References outlive the storage (the engine's members).
struct StateStorageSetup {
  DeviceContext& context;
  // sub_group_size, offload_optimizer / offload_param (nvme paths, max_in_cpu), aio.
  const EngineOptions& options;
  // What is held where, in which dtype: every allocation below follows it.
  const StatePolicy& policy;
  int rank = 0;
  int world = 1;
  // The optimizer's fp32 states per element (Adam: 2), k in k × Σ owned.
  std::size_t states_per_element = 0;
};

// Allocated once (allocate), then read through the views. Until allocate() there is nothing.
class StateStorage {
 public:
  explicit StateStorage(StateStorageSetup setup);

  // A unit as registered: `elements` real elements, `padded` = P_u (a multiple of the world
  // size), its tensors' ranges in its layout (FlatLayout's slots, in order).
  struct UnitShape {
    std::string name;
    std::size_t elements = 0;
    std::size_t padded = 0;
    std::vector<ElementRange> tensors;
  };
  // Where unit u's state sits in the flat buffers.
  struct Placement {
    std::size_t padded = 0;        // P_u: padded elements
    std::size_t shard = 0;         // S_u = P_u / W
    std::size_t owned_offset = 0;  // into the owned-space buffers (optimizer state, shards)
    std::size_t owned_count = 0;   // P_u at stage 0, S_u otherwise
    std::size_t full_offset = 0;   // into the full params / grads buffers (stages 0-2)
    std::size_t param_offset = 0;  // stage 3: into param_shard (offload_param nvme: cached units)
    int param_region = -1;         // offload_param nvme: the unit's swap region (-1: cached)
    int first_tensor = 0;          // global index of its first tensor
  };

  // offload nvme: the factory of the swap stores (Engine::set_swap_store_factory); before allocate.
  void set_swap_store_factory(SwapStoreFactory factory);
  // Places the units, allocates every state (planning: records it), creates the swap stores and
  // their regions (master and state per sub-group, then the gradient partition's, then swapped
  // parameter shards), and zeroes the gradients and the optimizer state. Once.
  void allocate(const std::vector<UnitShape>& units);
  bool allocated() const { return allocated_; }

  const Placement& unit(UnitId u) const;
  const std::string& unit_name(UnitId u) const;
  std::size_t num_units() const { return units_.size(); }
  int num_tensors() const { return num_tensors_; }
  std::size_t owned_total() const { return owned_total_; }
  // The rank's owned range of unit u in its padded elements: its shard (stages 1-3) or all of it.
  ElementRange owned_range(UnitId u) const;
  // The optimizer's view of unit u's owned shard at these buffers (owned_count elements each;
  // `state`: k × owned_count): its tensors' segments within the shard, numbered globally.
  ShardChunk shard_chunk(UnitId u, float* params, const float* grads, float* state) const;
  // The same for a piece of it: owned elements [begin, begin + count) of unit u at `params` and
  // `grads` (count each) and `state` (state k at k × state_stride elements).
  ShardChunk shard_chunk(UnitId u, std::size_t begin, std::size_t count, float* params,
                         const float* grads, float* state, std::size_t state_stride) const;

  // offload_optimizer: the sub-groups the host optimizer steps one at a time (ranges of the owned
  // space; a unit larger than sub_group_size spans several). Partial offload (ratio < 1): the
  // first device_groups() keep master, state and gradient partition in device buffers, owned
  // elements [0, owned_split()); the host buffers hold the rest.
  const std::vector<SubGroup>& sub_groups() const { return sub_groups_; }
  // Sub-group g's units' parts (sub_group_pieces), in order.
  const std::vector<SubGroupPiece>& pieces(std::size_t g) const { return pieces_.at(g); }
  // The sub-groups holding part of unit u: [first, last).
  std::pair<std::size_t, std::size_t> groups_of(UnitId u) const {
    return groups_of_.at(static_cast<std::size_t>(u));
  }
  // The sub-group holding owned element `element` (of the concatenated owned shards).
  std::size_t group_at(std::size_t element) const;
  // Sub-group g's fp32 master where it is resident (its elements are contiguous there); null
  // where it is in swap regions.
  const float* group_master(std::size_t g) const;
  std::size_t device_groups() const { return device_groups_; }
  std::size_t owned_split() const { return owned_split_; }
  bool on_device(UnitId u) const { return unit(u).owned_offset < owned_split_; }

  // Owned (optimizer-visible) views of unit u: the fp32 parameters the optimizer updates (the
  // master in 16-bit training; null where it is in swap regions), its optimizer state (k ×
  // owned_count floats; null when swapped), the compute-dtype parameters the model reads (null
  // for a shard in a swap region) and the accumulated gradients (policy.owned_grads_dtype(); null
  // for a swapped gradient partition).
  float* owned_params(UnitId u) const;
  float* owned_state(UnitId u) const;
  void* owned_compute_params(UnitId u) const;
  void* owned_grads(UnitId u) const;
  void* full_grads(UnitId u) const;   // stages 0-1: the whole unit (policy.accumulate)
  void* full_params(UnitId u) const;  // stages 0-2: the whole unit (policy.compute)
  // The host gradient partition (offload_optimizer; empty when swapped or on the device).
  const Buffer& host_grad_shard() const { return grad_shard_; }
  // Zeroes the gradients in device memory on `stream`: the full gradients, a device gradient
  // shard and partial offload's device part. The host partition is the caller's (copy stream).
  void zero_device_grads(Stream& stream) const;
  // Where unit u's master and optimizer state can be read as ShardState spans (ShardState::space):
  // kDevice unless the context says the host addresses both.
  MemorySpace shard_space(UnitId u) const;

  // offload nvme: the store of the optimizer's sub-groups (master, state and, with the gradient
  // partition swapped, gradients) and the store of swapped parameter shards (the same store when
  // the paths agree); null when nothing is swapped there.
  SwapStore* optimizer_swap() const { return optimizer_swap_.get(); }
  SwapStore* param_store() const { return param_store_; }
  int master_region(std::size_t g) const { return master_regions_.at(g); }
  int state_region(std::size_t g) const { return state_regions_.at(g); }  // -1: no state
  int grad_region(std::size_t g) const { return grad_regions_.at(g); }    // -1: a device group
  SwapTraffic swap_traffic() const;

 private:
  void place(const std::vector<UnitShape>& units);
  void allocate_buffers();
  void create_swap_stores(const std::vector<UnitShape>& units);
  std::unique_ptr<SwapStore> make_store(const std::string& path, const char* key);
  void zero_fill() const;

  StateStorageSetup setup_;
  bool allocated_ = false;
  SwapStoreFactory swap_factory_;
  std::vector<Placement> units_;
  std::vector<std::string> names_;                  // per unit
  std::vector<std::vector<ElementRange>> tensors_;  // per unit: its tensors' ranges
  std::vector<bool> swapped_params_;  // per unit: its shard in a swap region (offload_param nvme)
  int num_tensors_ = 0;
  std::size_t full_total_ = 0, owned_total_ = 0, shard_total_ = 0, param_total_ = 0;

  // Dtypes: params and param_shard policy.compute, full_grads and grad_shard policy.accumulate
  // (grad_shard: policy.grad_shard_dtype), master and optimizer state fp32.
  Buffer full_params_;      // stages 0-2: Σ P_u, params
  Buffer full_grads_;       // stages 0-1: Σ P_u, grads
  Buffer param_shard_;      // stage 3: Σ S_u (cached units with offload_param nvme), param_shard
  Buffer grad_shard_;       // stages 2-3: Σ S_u (less the device part), grad_shard
  Buffer master_params_;    // 16-bit compute or host step: Σ owned (less the device part)
  Buffer optimizer_state_;  // k × Σ owned (less the device part)

  std::vector<SubGroup> sub_groups_;
  std::vector<std::vector<SubGroupPiece>> pieces_;  // per sub-group
  // Per unit: the sub-groups holding part of it, [first, last) (host_step only).
  std::vector<std::pair<std::size_t, std::size_t>> groups_of_;
  std::size_t device_groups_ = 0;
  std::size_t owned_split_ = 0;
  Buffer device_master_;  // partial offload: [0, owned_split) on the device
  Buffer device_state_;
  Buffer device_grads_;

  std::unique_ptr<SwapStore> optimizer_swap_;
  std::unique_ptr<SwapStore> param_swap_;
  SwapStore* param_store_ = nullptr;  // optimizer_swap_ when the paths agree, else param_swap_
  std::vector<int> master_regions_;   // per sub-group
  std::vector<int> state_regions_;    // per sub-group
  std::vector<int> grad_regions_;     // per sub-group (policy.swap_grads())
};

}  // namespace zero
