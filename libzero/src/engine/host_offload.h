// HostOffload: the host side of offload (ZeRO-Offload, ZeRO-Infinity), one object from the
// reduced gradients' arrival to the refreshed compute parameters, and the stage-3 parameter
// shards offload_param keeps on the host or in swap regions.
//
// Gradients (host_offload_gradients.cc): each reduced block is copied device->host on the copy
// stream into a receive buffer and unpacked there by a host task (scaled, or accumulated across
// micro-steps) into the host partition (StateStorage::host_grad_shard), or, with nvme
// (policy.swap_grads()), into one of two sub-group windows of the swapped partition (in
// policy.grad_swap_dtype: fp32, or with one micro-step and 16-bit gradients the reduced values
// with their post factor, widened where used); their squared norms for the step, and zeroing.
//
// Step (host_offload_step.cc): the optimizer step on the host, one sub-group of whole units at a
// time, with nvme's swap-in and swap-out of each sub-group's master, moments and gradients around
// it in swap slots (pipelined with pipeline_read / pipeline_write), the compute parameters
// refreshed behind it on the copy stream, and partial offload's device sub-groups stepped on the
// compute stream meanwhile.
//
// Parameters (host_offload_params.cc): the shard each stage-3 all-gather starts from (the
// resident one, or offload_param's copied in from the host or read from its swap region), after
// an overlapped step has refreshed it.
//
// The swap slots and the gradient windows are this object's: a window is sized as the slot it
// precedes, and the step takes the windows the backward ended with as its slots (gradients in
// place), so those sub-groups' gradients are neither written nor read back.
//
// The swapped partition (ZeRO-Infinity): one swap region per host sub-group (the storage's
// grad_region), as DeepSpeed's partition_grads writes a sub-group's reduced fp32 gradients to its
// gradient file and the optimizer reads them back with the master and state. Reduced blocks are
// accumulated into the current window; a block of another sub-group writes that window out (the
// write runs behind, the other window takes the block) and reads the sub-group in, or zeroes it
// when its region holds nothing of this step yet. Unlike DeepSpeed, micro-steps accumulate into
// the regions rather than into a device copy, so the device holds no gradient partition either.
// The windows are touched by the copy stream's host tasks during micro-steps and by the host
// thread once the copy stream has drained (squares, zero): never both at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "grad_reduce.h"
#include "param_gather.h"
#include "state_storage.h"
#include "swap_io.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
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

// offload_param nvme: the swapped parameter shard a step's pieces are converted into (`io`, sized
// for the largest swapped shard), written to its unit's region once every piece of the unit is
// converted. A unit split over sub-groups is assembled across them: its region is read in first
// unless its sub-groups come one after another in ascending order (`in_order`), so a flush before
// it is complete (another unit needs `io`) keeps the values of the pieces not converted yet.
struct ParamAssembly {
  AlignedHostBuffer io;
  int unit = -1;                       // the split unit `io` holds (-1: none)
  std::vector<std::size_t> converted;  // per unit: elements converted since the pass began
  std::vector<char> in_order;          // per unit: its sub-groups consecutive and ascending
};

// A sub-group's swapped fp32 gradients still in host memory when the backward ends (a window):
// `memory.data` holds them first, as a swap slot lays them out.
struct GradientWindow {
  std::size_t group = 0;
  AlignedHostBuffer memory;
};

// What the host side reads and writes. References outlive it (the engine's members).
struct HostOffloadSetup {
  DeviceContext& context;
  // Its stream: the copies of reduced blocks follow the reductions, and the next flush (which
  // overwrites the bucket) follows the copies.
  Communicator& communicator;
  // offload_optimizer.pipeline_read / pipeline_write.
  const EngineOptions& options;
  // Where each state lives (host_step, swap_optimizer, swap_grads, offload_params), the reduced
  // blocks' dtype and the compute dtype the parameters are refreshed in.
  const StatePolicy& policy;
  // The sub-groups, the owned views, the host partition and the swap regions.
  const StateStorage& storage;
  Optimizer& optimizer;
};

// Host thread only, except the unpacking tasks it submits to the copy stream and the overlapped
// step's worker. Every buffer it allocates is allocated in a plan too (so the plan's peaks are the
// run's); in a plan nothing is copied, unpacked, swapped, read, stepped or written.
// The reducer hands it the host's pieces (HostGradientReceiver), the gatherer takes its shards
// from it (ParamShardSource).
class HostOffload final : public HostGradientReceiver, public ParamShardSource {
 public:
  explicit HostOffload(HostOffloadSetup setup);
  ~HostOffload() override;  // waits for a step in flight, dropping its error
  HostOffload(const HostOffload&) = delete;
  HostOffload& operator=(const HostOffload&) = delete;

  // ---- gradients (host_offload_gradients.cc) ----
  // After the storage is allocated: the receive buffer (`receive_elements` reduced elements, the
  // largest block a flush hands to the host) and, swapped, each unit's sub-group.
  void allocate(std::size_t receive_elements);
  // After a collective on the communication stream: copies the reduced block (`count` elements
  // of policy.model_grads at `reduced`) to the host and unpacks each piece there, `post` ×
  // (added to, when `accumulate`) its destination: the piece's `destination` in the host
  // partition, or its unit's place in its sub-group's window when swapped.
  void unpack(const void* reduced, std::size_t count, std::vector<HostGradPiece> pieces,
              bool accumulate, float post) override;
  // Before each flush: the step in flight settled (settle_step), then the windows allocated
  // (swapped; allocate_windows with the options' gradient accumulation).
  void before_flush() override;
  // Host units' squared norms into `partial` (per unit; device units untouched), once the copy
  // stream has drained. Swapped: the windows keep the last two sub-groups the backward reached,
  // in memory (the current one is not written out, the other one's write is waited for), for
  // the step to take (take_windows); every other sub-group's region holds its gradients. In a
  // plan: no values (the squares stay zero).
  void squares(std::vector<SquaresResult>& partial);
  // Swapped, after squares(): hands over each window that holds a sub-group's gradients and that
  // `adopt(group, buffer size_bytes)` accepts (ascending groups; the gradients at the buffer's
  // aligned start), so the step uses them from memory instead of writing and reading them back;
  // writes the others out (those not written yet) and frees them. The step takes them so (as
  // its slots); outside a step (before squares(), after zero()) and in a plan (whose squares()
  // frees the windows, none holding gradients): does nothing.
  std::vector<GradientWindow> take_windows(
      const std::function<bool(std::size_t group, std::size_t size_bytes)>& adopt);
  // take_windows() adopting none: every region then holds the step's gradients.
  void spill_windows();
  // The next step's gradients start from zero, on the copy stream after the queued unpacking:
  // the host partition zeroed, or the windows dropped and the regions marked empty (windows
  // squares() kept are freed here: e.g. a step skipped for an overflow). During an overlapped
  // step a host partition (which the step reads) is zeroed when the step is settled; a swapped
  // one is only marked empty (the step took which regions hold gradients when it began).
  void zero();
  // Swapped: whether sub-group g's region holds this step's gradients (else the step reads zeros).
  bool held(std::size_t g) const { return !holds_.empty() && holds_[g] != 0; }
  // Swapped: the windows live from the first reduction of a step (the reducer's flush) to
  // squares(), where the step takes them as its slots or frees them. `micro_steps_per_step`
  // (gradient accumulation) places the first block so that the backward ends in the windows the
  // step can take.
  void allocate_windows(std::size_t micro_steps_per_step = 1);
  void release_windows();

  // ---- the step (host_offload_step.cc) ----
  // The optimizer step over every host sub-group (reads and writes their swap regions), the
  // device sub-groups' on the compute stream, and each updated sub-group's compute parameters:
  // to the device on the copy stream (16-bit: converted on the host first), or into the host
  // parameter shard or its swap region (offload_param).
  void step(const OptimizerStep& args);
  // The same step on a worker thread, returning once its buffers are allocated (here, on the
  // calling thread: a plan of step() holds for it) and the gradient windows taken: the sub-groups
  // in step()'s order (those the backward ended with first, then ascending: the order the next
  // forward needs its units). Each sub-group's update is its own, so the results are step()'s.
  // The worker issues no collective. Without device sub-groups only (owned_split() == 0). Its
  // errors, rethrown by settle_step() and param_shard(), name `global_step`.
  void step_async(const OptimizerStep& args, std::int64_t global_step);
  // Whether a step_async() has not been waited for (wait_for_step()).
  bool step_in_flight() const { return async_ != nullptr; }
  // Blocks until unit u's sub-group is stepped and its compute parameters are refreshed (the host
  // shard written, or the copy to the device queued), and returns the event after that copy
  // (empty when none); at once when no step is in flight. Rethrows the worker's error.
  Event wait_for_unit(UnitId u);
  // Blocks until the step in flight (if any) is done and its buffers are freed; rethrows its
  // error (once).
  void wait_for_step();
  // wait_for_step() for every use of the states but a unit's gather (which waits for its own
  // sub-group in param_shard()), its error named (throw_step_error); then the zeroing deferred
  // while it ran, and the communication stream ordered after its parameter copies (on CUDA an
  // evaluation or a save right after the step would all-gather shards still being copied).
  void settle_step();
  // Rethrows `error` of the host step of `global_step` naming the rank and the stage.
  [[noreturn]] void throw_step_error(const Error& error, std::int64_t global_step) const;
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

  // ---- parameters (host_offload_params.cc) ----
  // Stage 3: after an overlapped step's sub-group of unit u (an error named as settle_step's),
  // the resident shard, or with offload_param the shard copied into this rank's slot of
  // `gathered` on the copy stream (read from its swap region first), the communication stream
  // ordered after the copy.
  const void* param_shard(UnitId u, void* gathered) override;
  // Planning an overlapped step: the read buffer of the largest swapped parameter shard, held
  // beside the step's buffers as the next forward's gather may hold one (none needed when the
  // prefetch window's bound is held already, or no shard is swapped).
  Buffer plan_reads_beside_step();
  // offload_param where a unit's step runs on the device (steps_on_device(u): without
  // offload_optimizer, or partial offload's device sub-groups): unit u's shard from fp32 device
  // values `source`, converted into `device_staging` (make_param_device_staging()) on the compute
  // stream and copied to the host shard, or written to its swap region through `param_io` (a
  // make_param_io_buffer), waiting for the compute stream. Nothing in a plan.
  void store_param_shard(UnitId u, const float* source, const Buffer& device_staging,
                         AlignedHostBuffer& param_io);
  // After store_param_shard()s: the copy stream (the next gathers' copies) ordered after them, and
  // the compute stream waited for, so their staging buffer may go. Nothing in a plan.
  void after_param_shards_stored();
  // The device buffer store_param_shard() converts in: the largest shard of a unit that steps on
  // the device, in the compute dtype (workspace); empty without offload_param or such a unit.
  Buffer make_param_device_staging() const;
  // Whether unit u's optimizer step runs on the device: no offload_optimizer, or one of partial
  // offload's device sub-groups.
  bool steps_on_device(UnitId u) const;

 private:
  // ---- gradients ----
  // The window holding sub-group g's gradients (copy stream's host tasks), written out and read
  // in as described above. Its values in policy.grad_swap_dtype: fp32, or the 16-bit values as
  // reduced (posts_[g]).
  char* window(std::size_t g);
  // Each piece of sub-group g's squares over its fp32 gradients, from `window`, into its unit's
  // blocks (the step's global norm takes the per-unit sums in unit order, as without swapping).
  void window_squares(std::size_t g, const void* window);
  // A reduced piece into the windows of the sub-groups holding its elements.
  void unpack_into_windows(const HostGradPiece& piece, const void* source, bool accumulate,
                           float post);
  // After the backward (host thread, copy stream drained): waits for the windows' writes in
  // flight and takes the current window's squares; it stays unwritten (settled_, unwritten_).
  void settle_windows();
  // Drops the windows' contents and the regions' (copy stream's host task).
  void reset_swap();
  // Swapped in 16-bit (policy.grad_swap_dtype): the post factor sub-group g's stored values are
  // widened with (widen_gradients), once its region or window holds this step's gradients.
  float stored_scale(std::size_t g) const { return posts_.empty() ? 1.0f : posts_[g]; }

  // ---- the step ----
  // The step's transient buffers and order (host_offload_step.cc).
  struct StepWork;
  // Allocates the step's buffers (in a plan too): the gradient windows it adopts become the
  // slots of their sub-groups, which it steps first; then the other host sub-groups in order.
  StepWork begin_step();
  // The step of the `i`-th sub-group of work.order, with its reads, writes and parameter refresh;
  // returns the event after the copies that refresh its compute parameters.
  Event step_group(StepWork& work, std::size_t i, const OptimizerStep& args);
  // The global step the step in flight belongs to (step_async), which its errors name.
  std::int64_t global_step_in_flight() const;
  // Waits for the writes and frees the buffers behind the copies that read them.
  void finish_step(StepWork& work);
  // After a sub-group's step threw: waits, ignoring their errors (consequences of the first),
  // for the copies and swap transfers that may still use the step's buffers, before they go.
  void drain_failed_step() noexcept;
  // A swap slot for sub-groups of up to `elements` owned elements laid out in `memory`
  // (swap_slot_bytes(elements) bytes).
  SwapSlot slot_in(AlignedHostBuffer memory, std::size_t elements) const;
  // Partial offload: the device sub-groups' step on the compute stream (not waited for).
  void device_groups_step(const OptimizerStep& args);
  // Partial offload: the device sub-groups' compute parameters from their master, converted on
  // the compute stream into the device shard, or with offload_param stored out through
  // `device_staging` and `param_io` (store_param_shard(), then after_param_shards_stored()).
  void device_groups_params_from_master(const Buffer& device_staging, AlignedHostBuffer& param_io);
  // nvme: a slot is free once its writes are done and the copies reading its master have run;
  // read_group frees it, then starts the reads of sub-group g's master, state and gradients.
  void free_slot(SwapSlot& slot) const;
  // `held`: whether its gradient region holds the step's gradients (taken when the step began:
  // the next step's zeroing may run meanwhile).
  void read_group(SwapSlot& slot, std::size_t g, bool held) const;
  // Sub-group g's compute parameters from its updated fp32 `master` (the group's elements), piece
  // by piece: to the device on `copy` (from `staged`, the values already in the compute dtype,
  // when not null), else into the host parameter shard or its swap region (offload_param; a
  // piece of a unit split over sub-groups rewrites its part of the region).
  void send_group_params(std::size_t g, const float* master, const void* staged, Stream& copy,
                         bool device_params, ParamAssembly& params);
  // A pass's ParamAssembly over the host sub-groups in `order` (its buffer only with
  // offload_param nvme).
  ParamAssembly make_param_assembly(const std::vector<std::size_t>& order) const;
  // Writes the split unit `params` holds (if any) to its region and waits.
  void flush_params(ParamAssembly& params) const;
  // Sub-group g's optimizer chunks, one per piece (StateStorage::pieces): in `slot` (nvme: the
  // slot lays master, state and gradients out piece by piece), or with a null slot in the
  // resident buffers (each unit's states k × owned_count, so a piece's stride is its unit's).
  std::vector<ShardChunk> group_chunks(std::size_t g, const SwapSlot* slot) const;

  // ---- parameters ----
  // offload_param: unit u's shard copied to `slot` (its place in the gathered buffer) on the
  // copy stream, read from its swap region first; the communication stream waits for the copy.
  void copy_in_param_shard(UnitId u, void* slot);
  // Unit u's parameter shard as its swap region's read buffer holds it (0: not swapped).
  std::size_t swapped_shard_bytes(UnitId u) const;
  // Planning (offload_param nvme, prefetching on): the host buffers of the parameter shard reads
  // a prefetch window keeps in flight, held from the first such read on (a planning context's
  // streams run each copy at once, so the plan holds their bound here).
  void plan_param_reads();

  HostOffloadSetup setup_;
  bool planning_ = false;
  std::size_t states_ = 0;  // the optimizer's states per element

  // Gradients.
  Buffer receive_;  // the reduced block copied to the host (policy.staging_space)
  // Swapped partition.
  std::vector<char> holds_;   // per sub-group: its region holds this step's gradients
  std::vector<float> posts_;  // per sub-group: the post factor of its stored values
  // Stored 16-bit: one piece's fp32 values (window_squares), allocated with the windows.
  Buffer widened_;
  std::size_t largest_piece_ = 0;  // the largest host sub-group piece's elements
  AlignedHostBuffer windows_[2];
  int window_group_[2] = {-1, -1};
  SwapTicket window_write_[2];
  int current_ = 0;
  // After squares(), until take_windows() or zero(): no task uses the windows, and window
  // `unwritten_` (-1: none) holds gradients its region lacks.
  bool settled_ = false;
  int unwritten_ = -1;
  // Per unit, per block of host::kSquaresBlockElements of its owned gradients: their squares when
  // their sub-group was last written out (the flush before the step writes every window out, so
  // these are the step's); unit u's blocks at [unit_blocks_[u], unit_blocks_[u + 1]). Added in
  // block order they are host::squares_of the unit's gradients, however its pieces were taken.
  std::vector<double> block_squares_;
  std::vector<std::size_t> unit_blocks_;

  // zero() during an overlapped step, with the gradient partition in host memory (which the
  // step reads): zeroed when the step is settled.
  bool zero_after_step_ = false;

  // The step.
  bool params_refreshed_ = false;
  // step_async(): the worker and what it has done (host_offload_step.cc).
  struct AsyncStep;
  std::unique_ptr<AsyncStep> async_;

  // Parameters: planning only (plan_param_reads).
  Buffer planned_param_reads_;
};

}  // namespace zero
