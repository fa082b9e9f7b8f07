// The ZeRO memory formula: model-state bytes per rank for a stage, world size and dtypes. The
// engine's ledger equals it exactly; the planner and `zero estimate` reuse it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "zero/core/dtype.h"
#include "zero/engine/options.h"

namespace zero {

// Persistent model-state bytes one rank holds between steps, by ledger category. With Ψ the
// padded parameter count (Σ over units of padded_num_elements(n_u, W, alignment)), S = Ψ / W,
// c = size_of(compute dtype), k = optimizer states per element, m = 4 when c != 4 else 0:
//   stage 0: params cΨ, grads cΨ, master mΨ, optimizer 4kΨ
//   stage 1: params cΨ, grads cΨ, master mS, optimizer 4kS
//   stage 2: params cΨ, grad_shard 4S, master mS, optimizer 4kS
//   stage 3: param_shard cS, grad_shard 4S, master mS, optimizer 4kS
// (fp32 compute: the shard is the master, so m = 0.) Transient buffers are not included: see
// reduce_bucket_elements() and, for stage 3, each gathered unit's cP_u bytes under params and
// each unit's cP_u gradient bytes under grads between grads() and the end of its reduction.
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
                                  DType compute_dtype, int optimizer_states_per_element);

// The gradient reduction bucket (comm_buffers), in fp32 elements: the send bucket plus, when
// reduce-scattering, a receive block of one rank's part. The bucket holds reduce_bucket_size
// elements rounded down to a multiple of W × alignment (at least one such quantum) and never
// more than the padded model.
struct BucketSize {
  std::size_t bucket_elements = 0;   // send/all-reduce buffer
  std::size_t receive_elements = 0;  // reduce-scatter output block (0 for stage 0 or all-reduce)
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((bucket_elements + receive_elements) * sizeof(float));
  }
};
BucketSize reduce_bucket_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size);

// The stage 1-2 all-gather staging buffer (comm_buffers), in fp32 elements. Updated parameters
// are all-gathered in place, one collective per unit, when a rank's shard of the unit fits
// allgather_bucket_size / W elements (rounded down to the alignment, at least one alignment);
// larger units go in chunks of that size through a staging buffer of W chunks, which exists only
// when some unit needs it (and never at W = 1, where nothing is gathered).
std::size_t allgather_chunk_elements(const EngineOptions& options, int world_size);
std::size_t allgather_staging_elements(const EngineOptions& options,
                                       std::span<const std::size_t> unit_num_elements,
                                       int world_size);

}  // namespace zero
