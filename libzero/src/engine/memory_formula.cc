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

StatePolicy state_policy(int stage, DType compute, DType accumulate) {
  ZERO_CHECK(stage >= 0 && stage <= 3, "ZeRO stage must be 0..3, got ", stage);
  StatePolicy policy;
  policy.stage = stage;
  policy.compute = compute;
  policy.accumulate = accumulate;
  policy.master_weights = compute != DType::kFloat32;
  policy.full_params = stage <= 2;
  policy.param_shard = stage == 3;
  policy.full_grads = stage <= 1;
  policy.grad_shard = stage >= 2;
  policy.partitioned = stage >= 1;
  policy.gather_after_step = stage == 1 || stage == 2;
  policy.model_grads = policy.full_grads ? accumulate : compute;
  return policy;
}

StatePolicy state_policy(const EngineOptions& options) {
  DType compute = DType::kFloat32;
  if (options.fp16.enabled) compute = DType::kFloat16;
  if (options.bf16.enabled) compute = DType::kBFloat16;
  // DeepSpeed 0.19: fp16 accumulates in fp16, bf16 in fp32 unless data_types says otherwise.
  const DType accumulate = options.grad_accum_dtype.value_or(
      compute == DType::kFloat16 ? DType::kFloat16 : DType::kFloat32);
  return state_policy(options.stage, compute, accumulate);
}

ModelStateBytes model_state_bytes(int stage, std::span<const std::size_t> unit_num_elements,
                                  int world_size, std::size_t alignment_elements,
                                  DType compute_dtype, int optimizer_states_per_element,
                                  DType accumulate_dtype) {
  const StatePolicy policy = state_policy(stage, compute_dtype, accumulate_dtype);
  const auto padded =
      static_cast<std::int64_t>(padded_total(unit_num_elements, world_size, alignment_elements));
  const std::int64_t shard = padded / world_size;
  const auto compute = static_cast<std::int64_t>(size_of(policy.compute));
  const auto accumulate = static_cast<std::int64_t>(size_of(policy.accumulate));
  const std::int64_t master = policy.master_weights ? 4 : 0;
  const std::int64_t states = 4 * optimizer_states_per_element;
  ModelStateBytes bytes;
  const std::int64_t owned = policy.partitioned ? shard : padded;
  bytes.master_params = master * owned;
  bytes.optimizer_state = states * owned;
  if (policy.full_params) bytes.params = compute * padded;
  if (policy.full_grads) bytes.grads = accumulate * padded;
  if (policy.grad_shard) bytes.grad_shard = accumulate * shard;
  if (policy.param_shard) bytes.param_shard = compute * shard;
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
  const StatePolicy policy = state_policy(options);
  size.element_bytes = size_of(policy.model_grads);
  if (policy.partitioned && options.reduce_scatter && world_size > 1)
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
  if (!state_policy(options).gather_after_step || world_size == 1) return 0;
  const std::size_t chunk = allgather_chunk_elements(options, world_size);
  for (std::size_t count : unit_num_elements) {
    const std::size_t padded = padded_num_elements(count, world_size, options.alignment_elements);
    if (padded / static_cast<std::size_t>(world_size) > chunk)
      return chunk * static_cast<std::size_t>(world_size);
  }
  return 0;
}

}  // namespace zero
