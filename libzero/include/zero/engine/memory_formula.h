// The ZeRO memory formula: model-state bytes per rank for a stage, world size and dtypes, from the
// StatePolicy (zero/engine/state_policy.h). The engine's ledger equals it exactly; the planner and
// `zero estimate` reuse it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "zero/core/dtype.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero {

// The sub-groups the host optimizer steps one at a time (offload_optimizer): contiguous ranges of
// the concatenated owned shards, as DeepSpeed's flat sub-groups. Units in registration order join
// a group while its owned elements stay within sub_group_size; a unit larger than that is split
// over groups of its own, in pieces of sub_group_size rounded down to a multiple of
// kSubGroupQuantumElements (at least one quantum), the last piece left open to the units after it.
// So no sub-group holds more than max(sub_group_size, quantum) elements, and a unit that fits one
// is never split (the groups are runs of whole units, as before, when every unit fits).
// `owned_num_elements`: each unit's owned (shard) element count.
inline constexpr std::size_t kSubGroupQuantumElements = 256;
struct SubGroup {
  std::size_t first_unit = 0;  // the units it holds part or all of: [first_unit, last_unit)
  std::size_t last_unit = 0;
  std::size_t owned_offset = 0;  // elements, into the concatenated owned shards
  std::size_t num_elements = 0;
  // Elements of first_unit's owned shard before this group (non-zero: a piece of a split unit;
  // a multiple of kSubGroupQuantumElements).
  std::size_t first_unit_offset = 0;
};
std::vector<SubGroup> optimizer_sub_groups(std::span<const std::size_t> owned_num_elements,
                                           std::int64_t sub_group_size);
// A unit's part of a sub-group: its owned elements [unit_offset, unit_offset + num_elements), at
// group_offset in the group's range. Every path that moves a sub-group's states (the step, the
// gradient windows and their squares, the swap regions' reads and writes, checkpoint visits)
// walks these, so a unit split over groups is handled in one place.
struct SubGroupPiece {
  std::size_t unit = 0;
  std::size_t unit_offset = 0;
  std::size_t group_offset = 0;
  std::size_t num_elements = 0;
  // `unit_owned`: the unit's owned element count (whether this piece is all of it).
  bool whole(std::size_t unit_owned) const {
    return unit_offset == 0 && num_elements == unit_owned;
  }
};
// The pieces of `group`, in order; `owned_num_elements` as for optimizer_sub_groups.
std::vector<SubGroupPiece> sub_group_pieces(const SubGroup& group,
                                            std::span<const std::size_t> owned_num_elements);
// Partial offload: how many leading sub-groups stay on the device (DeepSpeed's
// int((1 - ratio) · G), fewer where that would split a unit between device and host); 0 without
// offload_optimizer or with ratio 1.
std::size_t device_sub_groups(const StatePolicy& policy, std::span<const SubGroup> groups);
// The owned elements those sub-groups hold (the device part of master, state and gradients).
std::size_t device_owned_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size);

// offload_param nvme: which units' shards rest in swap regions (true) rather than in host memory:
// units in registration order stay in host memory while the shard elements kept there total at
// most max_in_cpu.
std::vector<bool> swapped_param_units(const EngineOptions& options,
                                      std::span<const std::size_t> unit_num_elements,
                                      int world_size);

// Persistent model-state bytes one rank holds between steps, by ledger category. With Ψ the
// padded parameter count (Σ over units of padded_num_elements(n_u, W, alignment)), S = Ψ / W,
// c = size_of(compute dtype), a = size_of(accumulation dtype), k = optimizer states per element,
// m = 4 when c != 4 else 0:
//   stage 0: params cΨ, grads aΨ, master mΨ, optimizer 4kΨ
//   stage 1: params cΨ, grads aΨ, master mS, optimizer 4kS
//   stage 2: params cΨ, grad_shard aS, master mS, optimizer 4kS
//   stage 3: param_shard cS, grad_shard aS, master mS, optimizer 4kS
// (fp32 compute: the shard is the master, so m = 0.) With c = a = 2 and Adam (k = 2) these are
// the ZeRO paper's 2Ψ+2Ψ+12Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N; bf16 with fp32 accumulation adds 2Ψ
// (stages 0-1) or 2Ψ/N (stages 2-3) of gradient bytes. Transient buffers are not included: see
// reduce_bucket_elements() and, for stage 3, each gathered unit's cP_u bytes under params, each
// unit's cP_u gradient bytes under grads between grads() and the end of its reduction (stages
// 2-3), and, with 16-bit accumulation, the step's fp32 copy of the owned gradients (workspace).
struct ModelStateBytes {
  std::int64_t params = 0;
  std::int64_t param_shard = 0;
  std::int64_t grads = 0;
  std::int64_t grad_shard = 0;
  std::int64_t master_params = 0;
  std::int64_t optimizer_state = 0;
  std::int64_t total() const {
    return params + param_shard + grads + grad_shard + master_params + optimizer_state;
  }
};

ModelStateBytes model_state_bytes(int stage, std::span<const std::size_t> unit_num_elements,
                                  int world_size, std::size_t alignment_elements,
                                  DType compute_dtype, int optimizer_states_per_element,
                                  DType accumulate_dtype = DType::kFloat32);

// The same bytes by the memory space each state lives in (StatePolicy's spaces), for every
// offload mode: offload_optimizer moves master (4S, fp32 compute included), optimizer state (4kS)
// and an fp32 gradient partition (4S; stage 1 keeps its full gradients on the device besides) to
// host_pinned or host memory, or master and state to nvme; offload_param moves the parameter
// shard (cS) to host memory or, past max_in_cpu elements, to nvme. So stage 2 + offload_optimizer
// cpu leaves cΨ on the device (DeepSpeed's estimate_zero2_model_states_mem_needs: 2Ψ in 16 bits),
// stage 3 + offload_optimizer cpu cΨ/W, and with offload_param nothing. With a partial offload
// (ratio < 1) the first device_owned_elements() owned elements keep their master, state and fp32
// gradients on the device.
struct ModelStateBytesBySpace {
  std::array<ModelStateBytes, kNumMemorySpaces> spaces{};
  ModelStateBytes& in(MemorySpace space) { return spaces[static_cast<std::size_t>(space)]; }
  const ModelStateBytes& in(MemorySpace space) const {
    return spaces[static_cast<std::size_t>(space)];
  }
  ModelStateBytes total() const;  // summed over spaces
};
ModelStateBytesBySpace model_state_bytes(const StatePolicy& policy,
                                         std::span<const std::size_t> unit_num_elements,
                                         int world_size, std::size_t alignment_elements,
                                         int optimizer_states_per_element,
                                         const std::vector<bool>& swapped_param_units = {},
                                         std::size_t device_owned_elements = 0);
// From the options (state_policy(options), swapped_param_units()).
ModelStateBytesBySpace model_state_bytes(const EngineOptions& options,
                                         std::span<const std::size_t> unit_num_elements,
                                         int world_size, int optimizer_states_per_element);

// The gradient reduction bucket (comm_buffers), in elements of the policy's model_grads dtype
// (element_bytes each): the send bucket plus, when
// reduce-scattering, a receive block of one rank's part. The bucket holds reduce_bucket_size
// elements rounded down to a multiple of W × alignment (at least one such quantum) and never
// more than the padded model.
struct BucketSize {
  std::size_t bucket_elements = 0;   // send/all-reduce buffer
  std::size_t receive_elements = 0;  // reduce-scatter output block (0 for stage 0 or all-reduce)
  std::size_t element_bytes = 4;
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((bucket_elements + receive_elements) * element_bytes);
  }
};
BucketSize reduce_bucket_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size);

// The stage 1-2 all-gather staging buffer (comm_buffers), in elements of the compute dtype. Updated
// parameters are all-gathered in place, one collective per unit, when a rank's shard of the unit
// fits allgather_bucket_size / W elements (rounded down to the alignment, at least one alignment);
// larger units go in chunks of that size through a staging buffer of W chunks, which exists only
// when some unit needs it (and never at W = 1, where nothing is gathered).
std::size_t allgather_chunk_elements(const EngineOptions& options, int world_size);
std::size_t allgather_staging_elements(const EngineOptions& options,
                                       std::span<const std::size_t> unit_num_elements,
                                       int world_size);

}  // namespace zero
