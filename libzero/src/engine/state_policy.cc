// state_policy(): the stage's sharding table, the precision's dtypes and offload's memory spaces.
#include "zero/engine/state_policy.h"

#include "zero/core/error.h"

namespace zero {

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
  policy.grad_shard_dtype = accumulate;
  return policy;
}

StatePolicy state_policy(const EngineOptions& options) {
  DType compute = DType::kFloat32;
  if (options.fp16.enabled) compute = DType::kFloat16;
  if (options.bf16.enabled) compute = DType::kBFloat16;
  // DeepSpeed 0.19: fp16 accumulates in fp16, bf16 in fp32 unless data_types says otherwise.
  const DType accumulate = options.grad_accum_dtype.value_or(
      compute == DType::kFloat16 ? DType::kFloat16 : DType::kFloat32);
  StatePolicy policy = state_policy(options.stage, compute, accumulate);
  using config::OffloadDevice;
  const auto& optimizer = options.offload_optimizer;
  const auto& param = options.offload_param;
  if (optimizer.device != OffloadDevice::kNone && options.stage >= 1) {
    // DeepSpeed's ZeRO-Offload: an fp32 master and an fp32 gradient partition on the host, the
    // step there (validate() refuses offload at stage 0).
    const MemorySpace host = optimizer.pin_memory ? MemorySpace::kHostPinned : MemorySpace::kHost;
    policy.host_step = true;
    policy.master_weights = true;
    policy.grad_shard = true;
    policy.grad_shard_dtype = DType::kFloat32;
    policy.grad_shard_space = host;
    policy.staging_space = host;
    const bool nvme = optimizer.device == OffloadDevice::kNvme;
    policy.master_space = nvme ? MemorySpace::kNvme : host;
    policy.optimizer_state_space = nvme ? MemorySpace::kNvme : host;
    // DeepSpeed's ZeRO-Infinity swaps the fp32 gradient partition with the optimizer state
    // (partitioned_optimizer_swapper.py: swap_out_gradients, then swapped in with the sub-group).
    if (nvme) policy.grad_shard_space = MemorySpace::kNvme;
    if (nvme && !policy.full_grads && options.gradient_accumulation_steps == 1 &&
        size_of(policy.model_grads) == 2)
      policy.grad_swap_dtype = policy.model_grads;
    policy.offload_ratio = optimizer.ratio;
  }
  if (param.device != OffloadDevice::kNone && policy.param_shard) {
    const MemorySpace host = param.pin_memory ? MemorySpace::kHostPinned : MemorySpace::kHost;
    policy.params_space = param.device == OffloadDevice::kNvme ? MemorySpace::kNvme : host;
    policy.param_cache_space = host;
    // Without offload_optimizer the step stays on the device, over an fp32 master of the owned
    // shard there (DeepSpeed's fp32 partition), and the updated shard is copied out.
    policy.master_weights = true;
  }
  return policy;
}

}  // namespace zero
