// Engine::Impl: the engine's private state (options, context, units, the training state and loss
// scaler, the micro-step counter, the last boundary's norm), its flat state storage
// (state_storage.h), its host optimizer step (host_optimizer.h), its stage-3 gatherer
// (param_gather.h) and its gradient reducer (grad_reduce.h). Engine holds only its Impl.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grad_reduce.h"
#include "host_optimizer.h"
#include "param_gather.h"
#include "state_storage.h"
#include "zero/engine/engine.h"
#include "zero/engine/memory_formula.h"

namespace zero {

struct EngineUnit {
  std::string name;
  FlatLayout layout;
  InitFunction init;
  RangeInitFunction range_init;  // when set, each rank generates what it holds (no broadcast)
  std::vector<float> initial_values;
  // Its offsets into the flat state buffers are the storage's (StateStorage::unit).

  // Stages 2-3: the transient gradient buffer handed out by grads() this micro-step.
  std::shared_ptr<Buffer> grad_buffer;
};

// offload_optimizer nvme: the fp32 gradient partition in swap regions, one per host sub-group, as
// DeepSpeed's ZeRO-Infinity swaps gradients with the optimizer state; the host holds two
// sub-group windows, not the partition. Reduced blocks are accumulated into the current window;
// a block of another sub-group writes that window out (the write runs behind, the other window
// takes the block) and reads the sub-group in, or zeroes it when its region holds nothing of this
// step yet. Touched by the copy stream's host tasks during micro-steps and by the host thread
// once the copy stream has drained (flush, step, zero_grad): never both at once.
struct GradientSwap {
  // Its regions, one per host sub-group, are the storage's (StateStorage::grad_region).
  std::vector<char> holds;            // per sub-group: its region holds this step's gradients
  std::vector<std::size_t> group_of;  // per unit: its sub-group
  AlignedHostBuffer windows[2];
  int window_group[2] = {-1, -1};
  SwapTicket window_write[2];
  int current = 0;
  // Per unit: the squared norm of its gradients when its sub-group was last written out (the
  // flush before the step writes every window out, so these are the step's).
  std::vector<SquaresResult> squares;
};

class Engine::Impl {
 public:
  // `options` are validated; `context` null: the Impl owns a CPU context (make_cpu_context()).
  Impl(EngineOptions options, DeviceContext* context, Communicator& communicator,
       std::unique_ptr<Optimizer> optimizer, std::unique_ptr<LrSchedule> schedule);

  EngineOptions options;
  std::unique_ptr<DeviceContext> owned_context;  // declared first among the context's users:
                                                 // destroyed after every buffer it allocated
  DeviceContext& ctx;
  Communicator& comm;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  // Where each state lives and in which dtype (stage and precision): every allocation, reduction
  // and step below follows it.
  StatePolicy policy;
  std::vector<EngineUnit> units;
  bool initialized = false;
  bool planning = false;
  // Planning with a communicator that moves data: collectives on the (memoryless) planned buffers
  // are skipped. With a PlanningCommunicator they are issued (and recorded) as in a real run.
  bool skip_collectives = false;
  int rank = 0;
  int world = 1;

  // The training progress (engine_step.cc): boundaries, skips and optimizer steps with the loss
  // scaler's and schedule's state (checkpointed), the micro-steps completed (counted by
  // end_micro_step), and the last boundary's global gradient norm and overflow flag.
  LossScaler loss_scaler;
  TrainingState training;
  std::int64_t micro_steps = 0;
  double grad_norm = 0.0;
  bool overflow = false;
  // Pieces of read_shard_values / write_shard_values (Engine::set_shard_piece_elements).
  std::size_t shard_piece_elements = std::size_t{4} << 20;  // 16 MiB of fp32

  // The units' flat state: one buffer per kind of state in the space the policy gives it, the
  // swap regions of what lives on NVMe, the units' offsets, sub-groups and views.
  StateStorage storage;
  // comm_buffers: stage 1-2 chunked all-gather of the updated parameters.
  Buffer gather_staging;
  // offload_optimizer: the reduced gradient block copied to the host (policy.staging_space).
  Buffer host_receive;
  // offload_optimizer: the optimizer step on the host (and partial offload's device sub-groups),
  // with nvme's swap slots; its swap slots also serve checkpoints and the gradient windows.
  HostOptimizer host_optimizer;
  // The optimizer's view of unit u's owned shard: its buffers and its tensors' segments.
  ShardChunk shard_chunk(UnitId u, float* params, const float* grads, float* state) const;
  GradientSwap grad_swap;  // policy.swap_grads() (engine_grad_swap.cc)
  // Sizes grad_swap for the units and sub-groups (after the storage is allocated).
  void init_gradient_swap();
  // The window holding sub-group g's gradients (copy stream's host tasks), written out and read
  // in as described at GradientSwap; null in a plan.
  float* gradient_window(std::size_t g);
  // Writes both windows out, waits for the writes, and leaves them empty (host thread, copy
  // stream drained): the regions then hold the step's gradients and grad_swap.squares their norms.
  void flush_gradient_windows();
  // The next step's gradients start from zero: drops the windows and the regions' contents.
  void reset_gradient_swap();
  // The windows live from the first reduction of a step to the flush before it (host thread):
  // allocated by the reducer's flush (its before_flush hook) when missing, released once the flush
  // has written them out, so the step's swap slots and the windows are never held together.
  void allocate_gradient_windows();
  void release_gradient_windows();
  // offload_optimizer nvme: shard_states() reads every sub-group's master and state into this
  // host copy (the resident layout: master, then k states, at the units' owned offsets); the next
  // step() or refresh_params() writes it back to the regions and frees it.
  Buffer checkpoint_view;
  // Waits for the communication, compute and copy streams before shard states are read or
  // written (visit_shard_states, fill_shard_states); errors say so.
  void drain_for_shard_states();
  float* view_master() const { return checkpoint_view.data_as<float>(); }
  void read_checkpoint_view();
  void write_back_checkpoint_view();

  Event params_ready;  // stages 1-2: the post-step all-gather
  // Completes after the last work the engine queued on the communication stream: the destructor
  // waits for it without touching the communicator (which may be gone by then).
  Event comm_done;

  bool at_boundary_micro_step() const;
  // The optimizer step on the device (DeviceContext::optimizer_step), when not offloaded.
  void device_step(const OptimizerStep& args);

  void allocate();
  void initialize_values();

  // This rank's shard of unit u for the stage-3 all-gather into `gathered` (the gatherer's
  // shard_source): the resident shard, or with offload_param its copy in this rank's slot.
  const void* gather_source(UnitId u, void* gathered);

  // engine_params.cc
  // The reducer's end of a micro-step (flushing what is queued), then the gatherer's.
  void end_micro_step();
  void all_gather_params();
  // 16-bit training: the compute parameters from the fp32 master (owned part), on the compute
  // stream.
  void params_from_master();

  // engine_offload.cc: the host gradient partition and offload_param's shards.
  // After a collective on the communication stream: copies the reduced block (`count` elements
  // of policy.model_grads at `reduced`) to host_receive on the copy stream and unpacks it there
  // into the host gradient partition, `post` × (added to, when `accumulate`) the destination.
  // The destination is unit `unit`'s owned gradients from element `offset`: `destination` in
  // host memory, or its sub-group's window when the gradient partition is swapped (null then).
  // The reducer's unpack_on_host hook.
  using HostPiece = HostGradPiece;
  void unpack_on_host(const void* reduced, std::size_t count, std::vector<HostPiece> pieces,
                      bool accumulate, float post);
  // The global squared norm's per-unit parts over the host gradient partition.
  void host_squares(std::vector<SquaresResult>& partial);
  // Stage 3 offload_param: copies the unit's shard to `slot` (its place in the gathered buffer)
  // on the copy stream (reading it from its swap region first) and orders the communication
  // stream after it.
  void copy_in_param_shard(UnitId u, void* slot);
  void zero_host_grads();
  // offload_param without offload_optimizer: unit u's shard from fp32 device values `source`,
  // converted into `device_staging` (a device buffer of the largest shard in the compute dtype)
  // on the compute stream and copied to the host shard (or written to its swap region through
  // `param_io`, waiting for the compute stream).
  void store_param_shard(UnitId u, const float* source, const Buffer& device_staging,
                         AlignedHostBuffer& param_io);
  Buffer make_param_device_staging();  // empty unless offload_param without offload_optimizer

  // Runs a blocking communicator wait, adding `what` (e.g. the unit) to any error.
  void synchronize(const std::string& what);
  // The same for the compute stream.
  void synchronize_compute(const std::string& what);
  // Makes buffers ready for the model once `ready` completes: the compute stream waits for it;
  // when the model runs on the host (CPU backend) the host then waits for the compute stream.
  void hand_to_model(const Event& ready, const std::string& what);
  // Work submitted next to the communication stream runs after what the compute stream has now,
  // and the reverse.
  void comm_after_compute();
  void compute_after_comm();
  // all_reduce of host values through this context's device memory (NCCL takes device buffers
  // only): copied into the reduce bucket and back on the compute stream, ordered against the
  // communication stream by events; waits for the result. No allocation, so plans are unchanged;
  // planning records the collective and leaves `values` as they are.
  void all_reduce_host_values(std::span<float> values, ReduceOp op, const std::string& label);

  // Stage 3's gathered units, prefetch and persistence; every stage's gather/release pairing.
  ParamGatherer gatherer;
  // The gradient buckets and their reduction; every stage's count of reduced units per micro-step.
  GradReducer reducer;
};

}  // namespace zero
