// zero::Optimizer: the interface through which the engine runs an optimizer step over a rank's
// flat fp32 shard (implemented in optim/, zero::optim), with the shard chunks and per-step values
// it is handed: on the host, or on a device context's stream (the optimizer's own kernels for the
// context's backend, as GPT-2's kernels run on the context they are given).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/dtype.h"

namespace zero {

class DeviceContext;  // zero/core/device_context.h
class Stream;         // zero/core/stream.h

// One tensor's piece of a shard chunk: elements [offset, offset + size) of the chunk belong to
// tensor `tensor` (an index shared by every rank, so per-tensor sums can be all-reduced).
struct TensorSegment {
  std::size_t offset_elements = 0;
  std::size_t num_elements = 0;
  int tensor = 0;
};

// A contiguous piece of this rank's fp32 shard: master parameters, reduced gradients and the
// optimizer's state (`states_per_element` slices of num_elements floats, state k at
// k·state_stride_elements: a piece of a larger run of states, such as an offloaded sub-group's
// part of a unit, strides by the run's elements; 0 means num_elements).
struct ShardChunk {
  float* params = nullptr;
  const float* grads = nullptr;
  float* state = nullptr;
  std::size_t num_elements = 0;
  std::vector<TensorSegment> segments;  // ordered, covering the chunk's non-padding elements
  // Optional fusions. 16-bit gradients read in place of `grads` (which is then null), widened to
  // fp32 before OptimizerStep::grad_scale is applied: resolved by Optimizer::step_on (the CUDA
  // kernels read them in their pass; on the CPU backend they are widened first, Optimizer::step
  // reads only `grads`).
  const void* grads_16bit = nullptr;
  DType grads_16bit_dtype = DType::kBFloat16;
  // A 16-bit copy of the updated parameters (bf16 or fp16, rounded as zero::convert), e.g. the
  // compute copy, written by the optimizer in the same pass as the update (optim/'s kernels and
  // the CUDA ones): all num_elements (for Lamb, the padding it does not update too). Null: none.
  void* params_16bit = nullptr;
  DType params_16bit_dtype = DType::kBFloat16;
  std::size_t state_stride_elements = 0;  // see above; 0: num_elements
  // State k's values for this chunk's elements.
  float* state_slice(std::size_t k) const {
    return state + k * (state_stride_elements != 0 ? state_stride_elements : num_elements);
  }
};

// Everything one optimizer step needs besides the shard.
struct OptimizerStep {
  std::int64_t step = 1;  // 1 for the first step taken (bias correction)
  double lr = 0.0;
  double beta1 = 0.0;       // current beta1 (OneCycle may cycle it); ignored by SGD
  double grad_scale = 1.0;  // multiply every gradient by this first (unscale and clip)
  int num_tensors = 0;      // tensors across all units (the TensorSegment index space)
  // Sums `count` floats element-wise over all ranks that hold shards, in place. Identity when
  // the shard is not partitioned (stage 0). Every rank calls it the same number of times.
  std::function<void(float* values, std::size_t count)> all_reduce_sum;
};

// An optimizer over flat fp32 shards. It steps once per taken step on every rank with the rank's
// chunks (all units' shards), through step() on the host or step_on() on a device context, and
// updates params and state in place (and a chunk's params_16bit when set). It keeps no mutable
// state of its own: step() may run on two threads at once over disjoint chunks (partial offload:
// step_on() steps the device sub-groups on the compute stream, the host steps its own).
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string_view name() const = 0;
  // fp32 state values kept per parameter element (Adam: 2, SGD with momentum: 1, SGD: 0).
  virtual int states_per_element() const = 0;
  // Names of the state slices, in order ("exp_avg", "exp_avg_sq"), for checkpoints.
  virtual std::vector<std::string> state_names() const = 0;
  virtual double lr() const = 0;     // the configured (base) learning rate
  virtual double beta1() const = 0;  // the configured beta1 (0 where it has none)
  // One step now, on the calling thread, over chunks in host memory (fp32 `grads` only): the CPU
  // kernels, the host side of offload_optimizer and the oracle of every device's step.
  virtual void step(std::span<ShardChunk> chunks, const OptimizerStep& step) = 0;
  // One step enqueued on `stream` of `context`, over chunks in the context's device memory (either
  // gradient field). This default runs step() on the stream of a CPU context (16-bit gradients
  // widened first), does nothing on a planning context (a plan computes nothing) and refuses any
  // other backend, naming the optimizer; an optimizer with device kernels overrides it (optim/'s
  // run theirs on CUDA). Throws zero::Error for a chunk with both or neither gradient field
  // (unless empty) or a 16-bit field of dtype fp32.
  virtual void step_on(DeviceContext& context, Stream& stream, std::span<ShardChunk> chunks,
                       const OptimizerStep& step);
};

}  // namespace zero
