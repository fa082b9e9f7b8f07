// GradReducer: the units' gradients packed into buckets of reduce_bucket_size elements and reduced
// on the communication stream (all-reduce at stage 0, reduce-scatter of rank-blocked buckets at
// stages 1-3) while the model's backward goes on, with DeepSpeed's pre- and post-scaling.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "state_storage.h"
#include "zero/comm/communicator.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/stream.h"
#include "zero/engine/memory_formula.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"
#include "zero/engine/types.h"

namespace zero {

// A reduced piece bound for the host gradient partition (offload_optimizer): `count` elements at
// `bucket_offset` of the reduced block, for unit `unit`'s owned gradients from element `offset`
// (at `destination` in host memory, or null when the partition is swapped).
struct HostGradPiece {
  float* destination;
  std::size_t count;
  std::size_t bucket_offset;
  UnitId unit;
  std::size_t offset;
};

// Where the reducer hands the host's reduced pieces (offload_optimizer; HostOffload in the
// engine). Compute thread.
class HostGradientReceiver {
 public:
  virtual ~HostGradientReceiver() = default;
  // Each flush with queued pieces calls it first, before anything is packed (HostOffload: an
  // overlapped step is waited for, its slots going before the gradient windows come, which are
  // allocated here).
  virtual void before_flush() = 0;
  // After the collective: the host pieces of the reduced block (`count` elements of
  // policy.model_grads at `reduced`), `post` × (added to, when `accumulate`) their destinations.
  virtual void unpack(const void* reduced, std::size_t count, std::vector<HostGradPiece> pieces,
                      bool accumulate, float post) = 0;
};

// What the reducer reads and where its reduced gradients go. References outlive the reducer (the
// engine's members); `options` is read at each flush, as the engine's own options are.
struct GradReduceSetup {
  DeviceContext& context;
  Communicator& communicator;
  // overlap_comm, reduce_scatter, prescale_gradients, gradient_predivide_factor,
  // gradient_accumulation_steps; the stage its errors name.
  const EngineOptions& options;
  // What is sharded (partitioned, full_grads, grad_shard, host_step) and the gradient dtypes.
  const StatePolicy& policy;
  // Completes after the last work queued on the communication stream: each flush records it.
  Event& comm_done;
  // Planning with a communicator that moves data: buckets fill and empty, nothing is reduced.
  bool skip_collectives = false;
  // The units' gradients: stages 0-1 full_grads (the flat bucket's source and the destination of
  // flat reductions), owned_grads (null for a swapped partition) and which units' owned
  // gradients are in the host partition (!on_device, offload_optimizer).
  const StateStorage& storage;
  // The host's pieces (offload_optimizer); before_flush() is called at every flush.
  HostGradientReceiver& host;
};

// Queues each unit's gradients as the model hands them over (reduce), flushes a bucket when it is
// full and at the end of a micro-step, and tracks which units were reduced in this micro-step.
// Compute thread only; every rank reduces the same units in the same order.
class GradReducer {
 public:
  explicit GradReducer(GradReduceSetup setup);

  // The units, in registration order (at allocation, once): `elements` real elements and
  // `shard` = padded / world.
  struct UnitShape {
    std::string name;
    std::size_t elements = 0;
    std::size_t shard = 0;
  };
  void set_units(std::vector<UnitShape> units);
  // The bucket and the reduce-scatter output block on the device (comm_buffers).
  void allocate(const BucketSize& size);

  // Unit u's gradients are final for this micro-step: `source` is its transient gradient buffer
  // (stages 2-3; null for the full gradients of stages 0-1, reduced only at the boundary micro-
  // step). Returns true once every unit was reduced in this micro-step.
  bool reduce(UnitId u, std::shared_ptr<Buffer> source, bool at_boundary);
  // Packs the queued pieces and reduces them on the communication stream.
  void flush();
  // Flushes what is queued (stages 2-3, or at the boundary) and starts the next micro-step.
  void end_micro_step(bool at_boundary);

  bool reduced(UnitId u) const;
  int reduced_units() const { return reduced_units_; }
  // The bucket, free between flushes once the compute stream waited for the communication stream.
  const Buffer& bucket() const { return bucket_; }

 private:
  // A piece of one unit's gradients in a bucket. Rank-blocked buckets (stages 1-3): shard-local
  // range [begin, end) of every rank's block. Flat buckets (stage 0): full-unit range.
  struct Item {
    UnitId unit = 0;
    std::size_t begin = 0;
    std::size_t end = 0;
    std::shared_ptr<Buffer> source;  // keeps a transient gradient buffer alive (stages 2-3)
  };
  struct Unit {
    UnitShape shape;
    bool reduced = false;  // reduce() called in this micro-step
  };

  void enqueue(UnitId u, std::shared_ptr<Buffer> source, bool at_boundary);
  std::string label(const std::vector<Item>& items) const;
  // flush()'s pieces at world 1 without a pre-scale, straight from their sources (grad_reduce.cc).
  void unpack_alone(std::vector<Item>& items, float post);

  GradReduceSetup setup_;
  int rank_ = 0;
  int world_ = 1;
  std::vector<Unit> units_;
  Buffer bucket_;
  Buffer receive_;
  std::size_t capacity_ = 0;          // elements
  std::vector<Item> pending_;         // queued, not yet flushed
  std::size_t pending_elements_ = 0;  // per rank block (blocked) or in total (flat)
  int reduced_units_ = 0;             // units reduced in the current micro-step
};

}  // namespace zero
