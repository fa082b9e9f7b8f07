// StatePolicy: what a ZeRO stage shards and where each state lives (memory space, dtype), decided
// once from the options; the engine, the memory formula and checkpoints read it.
#pragma once

#include "zero/core/dtype.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/options.h"

namespace zero {

// What a stage keeps where and in which dtype: the one place the engine's allocation, reduction
// and step, the memory formula (zero/engine/memory_formula.h) and the checkpoint writer take their
// sharding and dtype decisions from.
struct StatePolicy {
  int stage = 0;
  // Parameters on the device (full, shard, gathered): fp16 with "fp16", bf16 with "bf16", else
  // fp32. 16 bits: an fp32 master copy of the owned parameters lives in the optimizer's shard.
  DType compute = DType::kFloat32;
  // Gradients accumulated over micro-steps (full gradients or the gradient shard):
  // data_types.grad_accum_dtype, else fp16 with "fp16", fp32 with "bf16" (DeepSpeed 0.19), fp32.
  DType accumulate = DType::kFloat32;
  // What the model's backward writes (+=) into: the full gradients themselves at stages 0-1
  // (accumulate), a per-micro-step buffer in the compute dtype at stages 2-3. The reduction
  // buckets hold this dtype (the communicators sum 16-bit values in fp32).
  DType model_grads = DType::kFloat32;
  bool master_weights = false;  // compute != fp32
  bool full_params = false;     // stages 0-2: every rank holds every parameter
  bool param_shard = false;     // stage 3: only the owned shard; units gathered per use
  bool full_grads = false;      // stages 0-1: accumulated whole, reduced once per boundary
  // Stages 2-3: reduced every micro-step into the owned shard; stage 1 with offload_optimizer:
  // the boundary's reduction lands there (host memory) instead of in the full gradients.
  bool grad_shard = false;
  bool partitioned = false;        // stages 1-3: the optimizer owns 1/W of each unit
  bool gather_after_step = false;  // stages 1-2: all-gather the updated parameters

  // Offload (zero_optimization.offload_optimizer / offload_param), ZeRO-Offload and
  // ZeRO-Infinity as DeepSpeed does them. offload_optimizer (stages 1-3): the fp32 master weights
  // (also with fp32 compute), the optimizer state and an fp32 partition of the reduced gradients
  // (grad_shard, also at stage 1) live in host memory, and the optimizer step runs on the host,
  // one sub-group of whole units (sub_group_size) at a time; `nvme` puts master, state and the
  // fp32 gradient partition in swap regions, read into host buffers around each sub-group's step.
  // offload_param (stage 3): the parameter shard rests in host memory (nvme: beyond the first
  // max_in_cpu elements, in swap regions) and is copied to the device for each gather; without
  // offload_optimizer the step stays on the device, over an fp32 master of the owned shard there.
  bool host_step = false;                    // the optimizer runs on the host (offload_optimizer)
  DType grad_shard_dtype = DType::kFloat32;  // the owned accumulated gradients (grad_shard)
  // swap_grads(): the dtype its swap regions hold. fp32, except with one micro-step per step at
  // stages 2-3 and 16-bit model_grads: then each element is reduced once per step, so the regions
  // hold the reduced 16-bit values and the step widens them × post into fp32 (the same values
  // bit for bit, half the bytes written and read).
  DType grad_swap_dtype = DType::kFloat32;
  // Where each persistent state lives. kNvme: swap regions (optimizer: master and state of each
  // sub-group; params: the units past max_in_cpu, the others in param_cache_space).
  MemorySpace params_space = MemorySpace::kDevice;       // full params or the param shard
  MemorySpace param_cache_space = MemorySpace::kDevice;  // params_space nvme: the cached units
  MemorySpace full_grads_space = MemorySpace::kDevice;
  MemorySpace grad_shard_space = MemorySpace::kDevice;
  MemorySpace master_space = MemorySpace::kDevice;
  MemorySpace optimizer_state_space = MemorySpace::kDevice;
  // Host memory for staging (gradient receive blocks, 16-bit parameter tiles, swap buffers):
  // pinned when offload_optimizer.pin_memory, else pageable.
  MemorySpace staging_space = MemorySpace::kHost;
  // offload_optimizer.ratio (stage 3, cpu): the fraction of sub-groups whose master, state and
  // gradient partition are offloaded; the first ⌊(1 − ratio)·G⌋ sub-groups stay on the device and
  // are stepped there (DeepSpeed's twin-flow partial offload). 1: everything offloaded.
  double offload_ratio = 1.0;
  bool swap_optimizer() const { return optimizer_state_space == MemorySpace::kNvme; }
  bool swap_params() const { return params_space == MemorySpace::kNvme; }
  // offload_optimizer nvme: the fp32 gradient partition is swapped too (ZeRO-Infinity).
  bool swap_grads() const { return grad_shard_space == MemorySpace::kNvme; }
  bool offload_params() const { return param_shard && params_space != MemorySpace::kDevice; }
  // The dtype of the owned gradients the optimizer reads (grad_shard, else the full gradients).
  DType owned_grads_dtype() const { return grad_shard ? grad_shard_dtype : accumulate; }
  bool fp32_grads_for_step() const { return owned_grads_dtype() == DType::kFloat32; }
};
// From the options: the stage's table below, the precision (fp16/bf16, data_types.grad_accum_dtype)
// and offload_optimizer / offload_param.
StatePolicy state_policy(const EngineOptions& options);
// The stage alone, without offload: stage 0 replicates everything; 1 partitions the optimizer
// (master and state); 2 also the gradients; 3 also the parameters. Throws unless 0 <= stage <= 3.
StatePolicy state_policy(int stage, DType compute, DType accumulate);

}  // namespace zero
