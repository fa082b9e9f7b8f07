// Engine::Impl: the engine's private state (units, flat state buffers, buckets, gather tracker).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "zero/engine/engine.h"
#include "zero/engine/memory_formula.h"

namespace zero {

enum class GatherState { kReleased, kInFlight, kAvailable };

struct EngineUnit {
  std::string name;
  FlatLayout layout;
  InitFunction init;
  std::vector<float> initial_values;
  std::size_t padded = 0;        // P_u: padded elements
  std::size_t shard = 0;         // S_u = P_u / W
  std::size_t owned_offset = 0;  // into the owned-space buffers (optimizer state, shards)
  std::size_t owned_count = 0;   // P_u at stage 0, S_u otherwise
  std::size_t full_offset = 0;   // into the full params / grads buffers (stages 0-2)
  int first_tensor = 0;          // global index of its first tensor
  bool persistent = false;       // stage 3: stays gathered (below the persistence threshold)

  // Stage 3 gather tracking (compute thread only).
  Buffer gathered;
  GatherState gather_state = GatherState::kReleased;
  Event gathered_event;  // completes when `gathered` holds the full parameters
  int users = 0;
  bool prefetched = false;  // issued ahead of use and not consumed yet

  // Stages 2-3: the transient gradient buffer handed out by grads() this micro-step.
  std::shared_ptr<Buffer> grad_buffer;
  bool reduced = false;  // reduce_grads() called in this micro-step
};

// A piece of one unit's gradients in a bucket. Rank-blocked buckets (stages 1-3): shard-local
// range [begin, end) of every rank's block. Flat buckets (stage 0): full-unit range.
struct BucketItem {
  UnitId unit = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
  std::shared_ptr<Buffer> source;  // keeps a transient gradient buffer alive (stages 2-3)
};

class Engine::Impl {
 public:
  Impl(Engine& engine, DeviceContext& context, Communicator& communicator,
       std::unique_ptr<Optimizer> optimizer, std::unique_ptr<LrSchedule> schedule);

  Engine& engine;
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
  int num_tensors = 0;

  // One allocation per kind of state (llm.c), units are views at their offsets. Dtypes: params
  // and param_shard policy.compute, full_grads and grad_shard policy.accumulate, master and
  // optimizer state fp32.
  Buffer full_params;               // stages 0-2: Σ P_u, params
  Buffer full_grads;                // stages 0-1: Σ P_u, grads
  Buffer param_shard;               // stage 3: Σ S_u, param_shard
  Buffer grad_shard;                // stages 2-3: Σ S_u, grad_shard
  Buffer master_params;             // 16-bit compute: Σ owned, master_params
  Buffer optimizer_state;           // k × Σ owned, optimizer_state
  Buffer bucket;                    // comm_buffers
  Buffer receive;                   // comm_buffers
  Buffer gather_staging;            // comm_buffers: stage 1-2 chunked all-gather
  std::size_t bucket_capacity = 0;  // elements

  std::vector<BucketItem> pending;   // queued, not yet flushed
  std::size_t pending_elements = 0;  // per rank block (blocked) or in total (flat)
  int reduced_units = 0;             // units reduced in the current micro-step
  Event params_ready;                // stages 1-2: the post-step all-gather
  // Completes after the last work the engine queued on the communication stream: the destructor
  // waits for it without touching the communicator (which may be gone by then).
  Event comm_done;

  // Stage 3 gather order: the trace of the first micro-step, replayed for prefetching.
  std::vector<UnitId> trace;
  bool trace_valid = false;
  bool recording = true;
  std::size_t trace_position = 0;
  std::size_t live_elements = 0;  // gathered or in flight

  // Owned (optimizer-visible) views of unit u: the fp32 parameters the optimizer updates (the
  // master copy in 16-bit training), the compute-dtype parameters the model reads, and the
  // accumulated gradients (policy.accumulate).
  float* owned_params(UnitId u) const;
  void* owned_compute_params(UnitId u) const;
  void* owned_grads(UnitId u) const;
  void* full_grads_of(UnitId u) const;   // stages 0-1
  void* full_params_of(UnitId u) const;  // stages 0-2
  bool at_boundary_micro_step() const;

  void allocate();
  void initialize_values();

  // engine_gather.cc
  void* gather(UnitId u);  // the unit's parameters in policy.compute
  void release(UnitId u);
  void issue_gather(UnitId u, bool prefetch);
  void prefetch_after_gather();
  void wait_gathered(UnitId u);
  void drop_prefetched();
  void regather_persistent();

  // engine_reduce.cc
  void enqueue_reduction(UnitId u);
  void flush_bucket();
  void end_micro_step();
  void all_gather_params();
  // 16-bit training: the compute parameters from the fp32 master (owned part), on the compute
  // stream.
  void params_from_master();

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
  // Records comm_done after work just queued on the communication stream.
  void note_comm_work();
};

}  // namespace zero
