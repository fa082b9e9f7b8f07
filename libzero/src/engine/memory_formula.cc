// The ZeRO model-state memory formula and the reduction bucket size.
#include "zero/engine/memory_formula.h"

#include <algorithm>

#include "zero/core/error.h"
#include "zero/core/partition.h"

namespace zero {
namespace {

std::size_t padded_total(std::span<const std::size_t> unit_num_elements, int world_size,
                         std::size_t alignment_elements) {
  std::size_t total = 0;
  for (std::size_t count : unit_num_elements)
    total += padded_num_elements(count, world_size, alignment_elements);
  return total;
}

}  // namespace

ModelStateBytes model_state_bytes(int stage, std::span<const std::size_t> unit_num_elements,
                                  int world_size, std::size_t alignment_elements,
                                  DType compute_dtype, int optimizer_states_per_element) {
  ZERO_CHECK(stage >= 0 && stage <= 3, "ZeRO stage must be 0..3, got ", stage);
  const auto padded =
      static_cast<std::int64_t>(padded_total(unit_num_elements, world_size, alignment_elements));
  const std::int64_t shard = padded / world_size;
  const auto compute = static_cast<std::int64_t>(size_of(compute_dtype));
  const std::int64_t master = compute == 4 ? 0 : 4;
  const std::int64_t states = 4 * optimizer_states_per_element;
  ModelStateBytes bytes;
  const std::int64_t owned = stage == 0 ? padded : shard;
  bytes.master_params = master * owned;
  bytes.optimizer_state = states * owned;
  if (stage <= 2) bytes.params = compute * padded;
  if (stage <= 1) bytes.grads = compute * padded;
  if (stage >= 2) bytes.grad_shard = 4 * shard;
  if (stage == 3) bytes.param_shard = compute * shard;
  return bytes;
}

BucketSize reduce_bucket_elements(const EngineOptions& options,
                                  std::span<const std::size_t> unit_num_elements, int world_size) {
  const std::size_t total = padded_total(unit_num_elements, world_size, options.alignment_elements);
  const std::size_t quantum = static_cast<std::size_t>(world_size) * options.alignment_elements;
  BucketSize size;
  const auto requested = static_cast<std::size_t>(options.reduce_bucket_size);  // validated >= 0
  std::size_t bucket = std::max(requested / quantum * quantum, quantum);
  size.bucket_elements = std::min(bucket, total);
  if (options.stage >= 1 && options.reduce_scatter && world_size > 1)
    size.receive_elements = size.bucket_elements / static_cast<std::size_t>(world_size);
  return size;
}

std::size_t allgather_chunk_elements(const EngineOptions& options, int world_size) {
  const std::size_t align = options.alignment_elements;
  const std::size_t per_rank = static_cast<std::size_t>(options.allgather_bucket_size) /
                               static_cast<std::size_t>(world_size);
  return std::max(per_rank / align * align, align);
}

std::size_t allgather_staging_elements(const EngineOptions& options,
                                       std::span<const std::size_t> unit_num_elements,
                                       int world_size) {
  if ((options.stage != 1 && options.stage != 2) || world_size == 1) return 0;
  const std::size_t chunk = allgather_chunk_elements(options, world_size);
  for (std::size_t count : unit_num_elements) {
    const std::size_t padded = padded_num_elements(count, world_size, options.alignment_elements);
    if (padded / static_cast<std::size_t>(world_size) > chunk)
      return chunk * static_cast<std::size_t>(world_size);
  }
  return 0;
}

}  // namespace zero
