// HostOptimizer: the optimizer step of offload_optimizer (ZeRO-Offload, ZeRO-Infinity) on the
// host, one sub-group of whole units at a time, with nvme's swap-in and swap-out of each
// sub-group's master, moments and gradients (fp32, or stored 16-bit and widened) around it
// (pipelined with pipeline_read / pipeline_write), the compute parameters refreshed behind it on
// the copy stream, and partial offload's device sub-groups stepped on the compute stream meanwhile.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "state_storage.h"
#include "swap_io.h"
#include "zero/core/device_context.h"
#include "zero/core/optimizer.h"
#include "zero/core/stream.h"
#include "zero/core/swap_store.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"
#include "zero/engine/types.h"

namespace zero {

// One sub-group's master, optimizer state and (gradients swapped) fp32 gradients in host memory
// while it is swapped in (nvme), with the tickets of its pending writes and the event after the
// last copy that reads its master. The gradients are read, never written back (DeepSpeed). Laid
// out gradients first, then master, then state, so a gradient window (GradientWindow) becomes a
// slot with its gradients in place.
struct SwapSlot {
  AlignedHostBuffer memory;
  float* master = nullptr;
  float* state = nullptr;
  float* grads = nullptr;  // null unless the gradient partition is swapped
  SwapTicket master_write, state_write;
  Event copied;
  int group = -1;  // the sub-group it holds (read or being read)
  SwapTicket master_read, state_read, grads_read;
  int grads_group = -1;  // the sub-group whose gradients `grads` holds already (not read)
  // `grads` starts with the sub-group's stored 16-bit values (policy.grad_swap_dtype), widened
  // to fp32 in place before its step.
  bool grads_stored = false;
};

// A sub-group's swapped fp32 gradients still in host memory when the backward ends (a window of
// HostGradients): `memory.data` holds them first, as a swap slot lays them out.
struct GradientWindow {
  std::size_t group = 0;
  AlignedHostBuffer memory;
};

// What the step reads and writes. References outlive it (the engine's members).
struct HostOptimizerSetup {
  DeviceContext& context;
  // offload_optimizer.pipeline_read / pipeline_write.
  const EngineOptions& options;
  // Where each state lives (host_step, swap_optimizer, swap_grads, offload_params) and the
  // compute dtype the parameters are refreshed in.
  const StatePolicy& policy;
  // The sub-groups, the owned views and the swap regions.
  const StateStorage& storage;
  Optimizer& optimizer;
  // The optimizer's view of unit u's owned shard at these buffers (its tensors' segments).
  std::function<ShardChunk(UnitId u, float* params, const float* grads, float* state)> shard_chunk;
  // Swapped gradient partition: whether sub-group g's region holds this step's gradients (else
  // the step reads zeros, as the partition would hold).
  std::function<bool(std::size_t g)> gradients_held;
  // Gradients stored in 16-bit (policy.grad_swap_dtype): the factor sub-group g's are widened
  // with (HostGradients::stored_scale), taken with gradients_held.
  std::function<float(std::size_t g)> stored_gradient_scale;
  // Swapped gradient partition, at the step: the gradient windows that `adopt(group, size_bytes)`
  // accepts (HostGradients::take_windows), the rest written out and freed. May be empty.
  std::function<std::vector<GradientWindow>(
      const std::function<bool(std::size_t group, std::size_t size_bytes)>& adopt)>
      take_gradient_windows;
  // A blocking wait for the compute stream, naming `what` in its error.
  std::function<void(const std::string& what)> synchronize_compute;
};

// Host thread only. Every buffer it allocates is workspace, allocated in a plan too (so the
// plan's peaks are the run's); in a plan nothing is read, stepped or written.
class HostOptimizer {
 public:
  explicit HostOptimizer(HostOptimizerSetup setup);

  // The optimizer step over every host sub-group (reads and writes their swap regions), the
  // device sub-groups' on the compute stream, and each updated sub-group's compute parameters:
  // to the device on the copy stream (16-bit: converted on the host first), or into the host
  // parameter shard or its swap region (offload_param).
  void step(const OptimizerStep& args);
  // The same step on a worker thread, returning once its buffers are allocated (here, on the
  // calling thread: a plan of step() holds for it) and the gradient windows taken: the sub-groups
  // in step()'s order (those the backward ended with first, then ascending: the order the next
  // forward needs its units). Each sub-group's update is its own, so the results are step()'s.
  // The worker issues no collective. Without device sub-groups only (owned_split() == 0).
  void step_async(const OptimizerStep& args);
  // Whether a step_async() has not been waited for (wait_for_step()).
  bool step_in_flight() const { return async_ != nullptr; }
  // Blocks until unit u's sub-group is stepped and its compute parameters are refreshed (the host
  // shard written, or the copy to the device queued), and returns the event after that copy
  // (empty when none); at once when no step is in flight. Rethrows the worker's error.
  Event wait_for_unit(UnitId u);
  // Blocks until the step in flight (if any) is done and its buffers are freed; rethrows its
  // error (once).
  void wait_for_step();
  ~HostOptimizer();  // waits for a step in flight, dropping its error
  HostOptimizer(const HostOptimizer&) = delete;
  HostOptimizer& operator=(const HostOptimizer&) = delete;
  // Every sub-group's compute parameters from its fp32 master, as the step refreshes them (after
  // a checkpoint load or any rewrite of the master); waits for the copies.
  void params_from_master();
  // Whether the last step() refreshed the compute parameters (then a refresh has nothing to do);
  // reading it clears it.
  bool take_params_refreshed();

  // Initial values of unit u: `master` holds its owned fp32 values (host, valid now); the state
  // is zero. Through `slot` (make_swap_slot()), written to the swap regions when its sub-group is
  // complete; offload_param: its shard in the compute dtype, written through `param_io`.
  void initialize_unit(UnitId u, const float* master, SwapSlot& slot, AlignedHostBuffer& param_io);

  // nvme: a swap slot for sub-groups of up to `elements` owned elements (0: the largest sub-group),
  // workspace in policy.staging_space; empty unless the optimizer state is swapped.
  SwapSlot make_swap_slot(std::size_t elements = 0) const;
  // The bytes make_swap_slot(elements) asks the allocator for (alignment slack included).
  std::size_t swap_slot_bytes(std::size_t elements) const;
  // The step's swap slots: how many (pipeline_read / pipeline_write: 1 to 3), and the owned
  // elements slot i is sized for (the largest host sub-group g with g % slots == i; 0: unused).
  std::size_t step_slot_count() const;
  std::size_t step_slot_elements(std::size_t slot) const;

 private:
  // The step's transient buffers and order (host_optimizer.cc).
  struct StepWork;
  // Allocates the step's buffers (in a plan too): the gradient windows it adopts become the
  // slots of their sub-groups, which it steps first; then the other host sub-groups in order.
  StepWork begin_step();
  // The step of the `i`-th sub-group of work.order, with its reads, writes and parameter refresh;
  // returns the event after the copies that refresh its compute parameters.
  Event step_group(StepWork& work, std::size_t i, const OptimizerStep& args);
  // Waits for the writes and frees the buffers behind the copies that read them.
  void finish_step(StepWork& work);
  // After a sub-group's step threw: waits, ignoring their errors (consequences of the first),
  // for the copies and swap transfers that may still use the step's buffers, before they go.
  void drain_failed_step() noexcept;
  // A swap slot for sub-groups of up to `elements` owned elements laid out in `memory`
  // (swap_slot_bytes(elements) bytes).
  SwapSlot slot_in(AlignedHostBuffer memory, std::size_t elements) const;
  // Partial offload: the device sub-groups' step on the compute stream (not waited for), and
  // their compute parameters from the master.
  void device_groups_step(const OptimizerStep& args);
  void device_groups_params_from_master();
  // nvme: a slot is free once its writes are done and the copies reading its master have run;
  // read_group frees it, then starts the reads of sub-group g's master, state and gradients.
  void free_slot(SwapSlot& slot) const;
  // `held`: whether its gradient region holds the step's gradients (taken when the step began:
  // the next step's zeroing may run meanwhile).
  void read_group(SwapSlot& slot, std::size_t g, bool held) const;
  // Sub-group `group`'s compute parameters from its updated fp32 `master`: to the device on
  // `copy` (from `staged`, the values already in the compute dtype, when not null), else into the
  // host parameter shard or its swap region (offload_param).
  void send_group_params(const SubGroup& group, const float* master, const void* staged,
                         Stream& copy, bool device_params, AlignedHostBuffer& param_io);

  HostOptimizerSetup setup_;
  bool planning_ = false;
  std::size_t states_ = 0;  // the optimizer's states per element
  bool params_refreshed_ = false;
  // step_async(): the worker and what it has done (host_optimizer.cc).
  struct AsyncStep;
  std::unique_ptr<AsyncStep> async_;
};

}  // namespace zero
