// The interfaces through which the engine drives an optimizer and a learning-rate schedule
// (implemented in optim/, zero::optim), so libzero never depends on optim.
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

// One tensor's piece of a shard chunk: elements [offset, offset + size) of the chunk belong to
// tensor `tensor` (an index shared by every rank, so per-tensor sums can be all-reduced).
struct TensorSegment {
  std::size_t offset_elements = 0;
  std::size_t num_elements = 0;
  int tensor = 0;
};

// A contiguous piece of this rank's fp32 shard: master parameters, reduced gradients and the
// optimizer's state (`states_per_element` × num_elements floats, state k at k·num_elements).
struct ShardChunk {
  float* params = nullptr;
  const float* grads = nullptr;
  float* state = nullptr;
  std::size_t num_elements = 0;
  std::vector<TensorSegment> segments;  // ordered, covering the chunk's non-padding elements
  // Optional: num_elements 16-bit values (`half_dtype`, kBFloat16 or kFloat16) that receive the
  // updated params, rounded as zero::convert, in the same pass as the update (e.g. an offloaded
  // step's copy for the device): every element the optimizer updates (Adam, SGD: all of them;
  // Lamb: the segments, padding untouched). Null: none.
  void* half_params = nullptr;
  DType half_dtype = DType::kBFloat16;
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

// An optimizer over flat fp32 shards. step() is called once per taken step on every rank with
// the rank's chunks (all units' shards); it updates params and state in place (and a chunk's
// half_params when set).
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
  virtual void step(std::span<ShardChunk> chunks, const OptimizerStep& step) = 0;
};

// A learning-rate schedule with DeepSpeed's stepping: step() is called after every taken
// optimizer step (never after a skipped one); lr() is the rate the next optimizer step uses.
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string_view name() const = 0;
  virtual void step() = 0;
  // Before the first step(), DeepSpeed's value for an unstarted schedule (the optimizer's lr
  // for the warmup family, cycle_min_lr for OneCycle, the range-test minimum for LRRangeTest).
  virtual double lr() const = 0;
  // The beta1 the next step uses when the schedule cycles momentum; `base` otherwise.
  virtual double beta1(double base) const { return base; }
  virtual std::int64_t last_batch_iteration() const = 0;
  virtual void set_last_batch_iteration(std::int64_t iteration) = 0;
};

}  // namespace zero
