// ParamGatherer: stage 3's gathered units (all-gather on use, prefetch along the recorded gather
// order, persistence of small units) and every stage's count of the model's gathers per unit.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/stream.h"
#include "zero/engine/options.h"
#include "zero/engine/types.h"

namespace zero {

// Where this rank's shard of a unit comes from for its stage-3 all-gather (HostOffload in the
// engine: the resident shard, or offload_param's copy of the host or swapped one).
class ParamShardSource {
 public:
  virtual ~ParamShardSource() = default;
  // This rank's shard of unit u, ready on the communication stream, for the all-gather into
  // `gathered` (P_u elements of the compute dtype): the resident shard, or (offload_param) the
  // shard copied into this rank's slot of `gathered` first. Called only when collectives run.
  virtual const void* param_shard(UnitId u, void* gathered) = 0;
};

// What the gatherer reads and where it sends its work. References outlive the gatherer (the
// engine's members); `options` is read at each call, as the engine's own options are.
struct ParamGatherSetup {
  DeviceContext& context;
  Communicator& communicator;
  const EngineOptions& options;  // overlap_comm, stage3_* sizes and persistence threshold
  // Completes after the last work queued on the communication stream: each gather records it.
  Event& comm_done;
  DType compute = DType::kFloat32;  // the dtype of the shards and of the gathered units
  // Stage 3 (units gathered per use); otherwise only the users are counted.
  bool param_shard = false;
  // Planning with a communicator that moves data: buffers are allocated, nothing is gathered.
  bool skip_collectives = false;
  // This rank's shards.
  ParamShardSource& shards;
};

// Tracks, per unit, the gathered buffer, whether its all-gather is in flight, how many gathers
// the model holds and whether it was prefetched, and the gather order of the first micro-step
// (the trace) that later micro-steps replay to prefetch. Compute thread only; all ranks gather
// the same units in the same order (each all-gather is labelled with its unit).
class ParamGatherer {
 public:
  explicit ParamGatherer(ParamGatherSetup setup);

  // The units, in registration order (at allocation, once): `elements` real and `padded`
  // elements, `shard` = padded / world. Units below stage3_param_persistence_threshold elements
  // stay gathered (stage 3).
  struct UnitShape {
    std::string name;
    std::size_t elements = 0;
    std::size_t padded = 0;
    std::size_t shard = 0;
  };
  void set_units(std::vector<UnitShape> units);

  // Stage 3: unit u's full parameters (P_u elements of `compute`), gathered now or by an earlier
  // prefetch, ready on the compute stream (and for the host when the model runs there); may
  // issue prefetches along the trace. Counts a user.
  void* gather(UnitId u);
  // Stages 0-2: counts a user of a unit the engine keeps whole.
  void hold(UnitId u);
  // Ends one user of unit u; stage 3 frees the gathered buffer once its last user is gone (after
  // the model's queued kernels, on the compute stream) unless the unit is persistent.
  void release(UnitId u);
  // Stage 3, end of a micro-step: frees prefetched units nobody used, ends the trace's recording
  // (or re-records a trace the order departed from) and rewinds the replay.
  void end_micro_step();
  // Stage 3, after the optimizer step refreshed the shards: re-gathers the persistent units. No
  // unit may be held. `at_next_use` (the step still runs, overlapped with the next forward): each
  // is re-gathered by its next gather() instead, in the model's order on every rank.
  void regather_persistent(bool at_next_use = false);

  // Elements gathered or in flight (what stage3_max_live_parameters caps).
  std::size_t live_elements() const { return live_elements_; }
  bool persistent(UnitId u) const;

 private:
  enum class State { kReleased, kInFlight, kAvailable };
  struct Unit {
    UnitShape shape;
    bool persistent = false;
    Buffer gathered;
    State state = State::kReleased;
    Event gathered_event;  // completes when `gathered` holds the full parameters
    int users = 0;
    bool prefetched = false;  // issued ahead of use and not consumed yet
    bool stale = false;       // persistent, its shards updated since it was gathered
  };

  void follow_trace(UnitId u);
  void issue_gather(UnitId u, bool prefetch);
  void prefetch_after_gather();
  void wait_gathered(UnitId u);
  void drop_prefetched();
  Unit& unit(UnitId u, const char* what);

  ParamGatherSetup setup_;
  int rank_ = 0;
  int world_ = 1;
  std::vector<Unit> units_;
  // The gather order of the first micro-step, replayed for prefetching.
  std::vector<UnitId> trace_;
  bool trace_valid_ = false;
  bool recording_ = true;
  std::size_t trace_position_ = 0;
  std::size_t live_elements_ = 0;  // gathered or in flight
};

}  // namespace zero
