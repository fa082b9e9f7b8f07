// Engine::Impl: the engine's private state (options, context, units, the training state and loss
// scaler, the micro-step counter, the last boundary's norm), its flat state storage
// (state_storage.h), the host side of offload (host_offload.h: the host gradient partition, the
// host optimizer step, the shards the gathers start from), its stage-3 gatherer (param_gather.h)
// and its gradient reducer (grad_reduce.h). Engine holds only its Impl; the parts take
// references to the parts they use, in this order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grad_reduce.h"
#include "host_offload.h"
#include "param_gather.h"
#include "state_storage.h"
#include "zero/core/error.h"
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
  // The host side of offload: the reduced blocks unpacked into the host gradient partition (or
  // nvme's sub-group windows and swap regions), the optimizer step on the host (and partial
  // offload's device sub-groups) with nvme's swap slots (which also serve checkpoints), and the
  // shards stage 3's gathers start from. An overlapped step in flight is settled by every use of
  // the states (offload.settle_step()) but a unit's gather, which waits for its own sub-group.
  HostOffload offload;
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
  // Throws unless `unit` is a registered unit, the message listing them by name: "`what`: no
  // unit #7; the engine has 2 units: fc1, fc2".
  void check_unit(UnitId unit, std::string_view what) const;
  // The optimizer step on the device (Optimizer::step_on), when not offloaded. With an fp32
  // master kept beside 16-bit compute parameters (not offload_param's), the optimizer writes the
  // owned compute parameters in its own pass (ShardChunk::params_16bit, rounded as
  // params_from_master rounds them) and this returns true; false where it wrote none.
  bool device_step(const OptimizerStep& args);

  void allocate();
  void initialize_values();

  // engine_params.cc
  // The reducer's end of a micro-step (flushing what is queued), then the gatherer's.
  void end_micro_step();
  void all_gather_params();
  // 16-bit training: the compute parameters from the fp32 master (owned part), on the compute
  // stream.
  void params_from_master();
  // Engine::refresh_params() without waiting for an overlapped step (step() calls it after
  // starting one): the compute parameters from the master where the step did not refresh them
  // (step_wrote_params: device_step did), then stages 1-2's all-gather or stage 3's persistent
  // units.
  void refresh_compute_params(bool step_wrote_params = false);

  // engine_offload.cc: the step's squared norms with offload and the host step's launch.
  // The global squared norm's per-unit parts with offload_optimizer: waits for the reductions and
  // their unpacking, then partial offload's device units on the compute stream and the host
  // partition's (offload).
  void host_squares(std::vector<SquaresResult>& partial);
  // The host optimizer step (reaching the regions after a checkpoint view first), its errors
  // naming the rank and step: at stage 3 without device sub-groups on a worker while the next
  // forward runs (HostOffload::step_async; overlaps_step()), else here.
  void host_step(const OptimizerStep& args);
  bool overlaps_step() const;

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
