// ParamGatherer: stage 3's per-unit all-gathers on the communication stream, prefetch along the
// recorded gather order, persistence of small units.
#include "param_gather.h"

#include <memory>
#include <utility>

#include "zero/core/error.h"

namespace zero {

ParamGatherer::ParamGatherer(ParamGatherSetup setup)
    : setup_(std::move(setup)),
      rank_(setup_.communicator.rank()),
      world_(setup_.communicator.world_size()) {}

void ParamGatherer::set_units(std::vector<UnitShape> units) {
  ZERO_CHECK(units_.empty(), "the gatherer's units are set once");
  const auto threshold = static_cast<std::size_t>(setup_.options.param_persistence_threshold);
  for (UnitShape& shape : units) {
    Unit unit;
    unit.persistent = setup_.param_shard && shape.elements < threshold;
    unit.shape = std::move(shape);
    units_.push_back(std::move(unit));
  }
}

ParamGatherer::Unit& ParamGatherer::unit(UnitId u, const char* what) {
  ZERO_CHECK(u >= 0 && u < static_cast<UnitId>(units_.size()), what, ": no unit #", u);
  return units_[static_cast<std::size_t>(u)];
}

bool ParamGatherer::persistent(UnitId u) const {
  ZERO_CHECK(u >= 0 && u < static_cast<UnitId>(units_.size()), "persistent: no unit #", u);
  return units_[static_cast<std::size_t>(u)].persistent;
}

void ParamGatherer::follow_trace(UnitId u) {
  if (recording_) {
    trace_.push_back(u);
  } else if (trace_valid_) {
    if (trace_position_ < trace_.size() && trace_[trace_position_] == u)
      ++trace_position_;
    else
      trace_valid_ = false;  // the order changed: stop prefetching, record it again
  }
}

void* ParamGatherer::gather(UnitId u) {
  Unit& unit = this->unit(u, "gather");
  ZERO_CHECK(setup_.param_shard, "gather('", unit.shape.name, "'): units are gathered at stage 3");
  follow_trace(u);
  if (unit.state == State::kReleased || std::exchange(unit.stale, false)) issue_gather(u, false);
  unit.prefetched = false;
  if (trace_valid_ && setup_.options.overlap_comm) prefetch_after_gather();
  DeviceContext& context = setup_.context;
  if (context.model_runs_on_host()) {
    wait_gathered(u);
  } else if (unit.state == State::kInFlight) {
    context.compute_stream().wait(unit.gathered_event);  // the model's kernels follow the gather
    unit.state = State::kAvailable;
  }
  ++unit.users;
  return unit.gathered.data();
}

void ParamGatherer::hold(UnitId u) { ++unit(u, "gather").users; }

void ParamGatherer::release(UnitId u) {
  Unit& unit = this->unit(u, "release");
  ZERO_CHECK(unit.users > 0, "release('", unit.shape.name, "') without a matching gather");
  if (--unit.users > 0 || !setup_.param_shard || unit.persistent) return;
  DeviceContext& context = setup_.context;
  if (context.model_runs_on_host())
    unit.gathered.reset();  // the model's reads are done
  else                      // free once the model's queued kernels have read it
    context.release_after(context.compute_stream(),
                          std::make_shared<Buffer>(std::move(unit.gathered)));
  unit.state = State::kReleased;
  live_elements_ -= unit.shape.padded;
}

void ParamGatherer::issue_gather(UnitId u, bool prefetch) {
  Unit& unit = units_[static_cast<std::size_t>(u)];
  const UnitShape& shape = unit.shape;
  if (!unit.gathered.allocated()) {
    unit.gathered = setup_.context.allocator(MemorySpace::kDevice)
                        .allocate(shape.padded * size_of(setup_.compute), MemoryCategory::kParams);
    live_elements_ += shape.padded;
  }
  unit.state = State::kAvailable;
  if (prefetch) unit.prefetched = true;
  if (setup_.skip_collectives) return;
  const void* own = setup_.shards.param_shard(u, unit.gathered.data());
  // The label carries the unit into the communicator's call check: ranks gathering different
  // units (even of one size) fail there, every rank, naming each rank's unit, not in a hang.
  Communicator& communicator = setup_.communicator;
  communicator.all_gather(own, unit.gathered.data(), shape.shard, setup_.compute,
                          "gather " + shape.name);
  unit.gathered_event = communicator.stream().record();
  setup_.comm_done = unit.gathered_event;
  unit.state = State::kInFlight;
  if (!setup_.options.overlap_comm) wait_gathered(u);
}

// After each gather, issue the next units of the trace that are not gathered yet while the
// elements issued by this call are below stage3_prefetch_bucket_size, as DeepSpeed's
// PartitionedParameterCoordinator.fetch_sub_module does: the test comes before each unit, so a
// unit larger than the bucket is still prefetched (alone), and a bucket of 0 turns prefetching
// off. stage3_max_live_parameters is a hard cap here (DeepSpeed lets the last prefetch overshoot
// it): a prefetch that would take the gathered elements past it is not issued, so the peak of
// gathered parameters is known before the run.
void ParamGatherer::prefetch_after_gather() {
  const EngineOptions& options = setup_.options;
  std::size_t issued = 0;
  const auto prefetch_bucket = static_cast<std::size_t>(options.prefetch_bucket_size);
  const auto max_live = static_cast<std::size_t>(options.max_live_parameters);
  for (std::size_t i = trace_position_; i < trace_.size() && issued < prefetch_bucket; ++i) {
    const Unit& unit = units_[static_cast<std::size_t>(trace_[i])];
    if (unit.state != State::kReleased) continue;
    if (live_elements_ + unit.shape.padded > max_live) break;
    issue_gather(trace_[i], true);
    issued += unit.shape.padded;
  }
}

void ParamGatherer::wait_gathered(UnitId u) {
  Unit& unit = units_[static_cast<std::size_t>(u)];
  if (unit.state != State::kInFlight) return;
  try {
    unit.gathered_event.synchronize();
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank_, "/", world_, ", stage 3) gathering unit '", unit.shape.name,
               "' failed: ", error.what());
  }
  unit.state = State::kAvailable;
}

void ParamGatherer::drop_prefetched() {
  for (UnitId u = 0; u < static_cast<UnitId>(units_.size()); ++u) {
    Unit& unit = units_[static_cast<std::size_t>(u)];
    if (!unit.prefetched) continue;
    wait_gathered(u);
    unit.prefetched = false;
    if (unit.users == 0 && !unit.persistent) {
      unit.gathered.reset();
      unit.state = State::kReleased;
      live_elements_ -= unit.shape.padded;
    }
  }
}

void ParamGatherer::end_micro_step() {
  if (!setup_.param_shard) return;
  drop_prefetched();
  if (recording_) {
    recording_ = false;
    trace_valid_ = !trace_.empty();
  } else if (!trace_valid_) {
    trace_.clear();
    recording_ = true;
  }
  trace_position_ = 0;
}

void ParamGatherer::regather_persistent(bool at_next_use) {
  for (UnitId u = 0; u < static_cast<UnitId>(units_.size()); ++u) {
    Unit& unit = units_[static_cast<std::size_t>(u)];
    if (!unit.persistent || !unit.gathered.allocated()) continue;
    ZERO_CHECK(unit.users == 0, "unit '", unit.shape.name,
               "' is still gathered at the optimizer step");
    if (at_next_use) {
      wait_gathered(u);  // its last gather is done before the buffer is gathered into again
      unit.stale = true;
    } else {
      issue_gather(u, false);
    }
  }
}

}  // namespace zero
