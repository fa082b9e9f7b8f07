// Stage-3 parameter gathering: per-unit all-gathers on the communication stream, prefetch along
// the recorded gather order, persistence of small units.
#include "engine_impl.h"
#include "zero/core/error.h"

namespace zero {

void* Engine::Impl::gather(UnitId u) {
  EngineUnit& unit = units[u];
  if (!policy.param_shard) {
    // Stages 1-2: the post-step all-gather must have landed before compute reads parameters.
    hand_to_model(params_ready, "gathering unit '" + unit.name + "'");
    ++unit.users;
    return full_params_of(u);
  }
  if (recording) {
    trace.push_back(u);
  } else if (trace_valid) {
    if (trace_position < trace.size() && trace[trace_position] == u)
      ++trace_position;
    else
      trace_valid = false;  // the order changed: stop prefetching, record it again
  }
  if (unit.gather_state == GatherState::kReleased) issue_gather(u, false);
  unit.prefetched = false;
  if (trace_valid && engine.options_.overlap_comm) prefetch_after_gather();
  if (ctx.model_runs_on_host()) {
    wait_gathered(u);
  } else if (unit.gather_state == GatherState::kInFlight) {
    ctx.compute_stream().wait(unit.gathered_event);  // the model's kernels follow the gather
    unit.gather_state = GatherState::kAvailable;
  }
  ++unit.users;
  return unit.gathered.data();
}

void Engine::Impl::release(UnitId u) {
  ZERO_CHECK(u >= 0 && u < static_cast<UnitId>(units.size()), "release: no unit #", u);
  EngineUnit& unit = units[u];
  ZERO_CHECK(unit.users > 0, "release('", unit.name, "') without a matching gather");
  if (--unit.users > 0 || !policy.param_shard || unit.persistent) return;
  if (ctx.model_runs_on_host())
    unit.gathered.reset();  // the model's reads are done
  else                      // free once the model's queued kernels have read it
    ctx.release_after(ctx.compute_stream(), std::make_shared<Buffer>(std::move(unit.gathered)));
  unit.gather_state = GatherState::kReleased;
  live_elements -= unit.padded;
}

void Engine::Impl::issue_gather(UnitId u, bool prefetch) {
  EngineUnit& unit = units[u];
  if (!unit.gathered.allocated()) {
    unit.gathered = ctx.allocator(MemorySpace::kDevice)
                        .allocate(unit.padded * size_of(policy.compute), MemoryCategory::kParams);
    live_elements += unit.padded;
  }
  unit.gather_state = GatherState::kAvailable;
  if (prefetch) unit.prefetched = true;
  if (skip_collectives) return;
  // offload_param: the shard rests in host memory (or a swap region) and is copied to its slot
  // of the gathered buffer first, then gathered in place.
  void* own = owned_compute_params(u);
  if (policy.offload_params()) {
    copy_in_param_shard(u);
    own = static_cast<char*>(unit.gathered.data()) +
          static_cast<std::size_t>(rank) * unit.shard * size_of(policy.compute);
  }
  // The label carries the unit into the communicator's call check: ranks gathering different
  // units (even of one size) fail there, every rank, naming each rank's unit, not in a hang.
  comm.all_gather(own, unit.gathered.data(), unit.shard, policy.compute, "gather " + unit.name);
  unit.gathered_event = comm.stream().record();
  comm_done = unit.gathered_event;
  unit.gather_state = GatherState::kInFlight;
  if (!engine.options_.overlap_comm) wait_gathered(u);
}

// After each gather, issue the next units of the trace that are not gathered yet while the
// elements issued by this call are below stage3_prefetch_bucket_size, as DeepSpeed's
// PartitionedParameterCoordinator.fetch_sub_module does: the test comes before each unit, so a
// unit larger than the bucket is still prefetched (alone), and a bucket of 0 turns prefetching
// off. stage3_max_live_parameters is a hard cap here (DeepSpeed lets the last prefetch overshoot
// it): a prefetch that would take the gathered elements past it is not issued, so the peak of
// gathered parameters is known before the run.
void Engine::Impl::prefetch_after_gather() {
  const EngineOptions& options = engine.options_;
  std::size_t issued = 0;
  const auto prefetch_bucket = static_cast<std::size_t>(options.prefetch_bucket_size);
  const auto max_live = static_cast<std::size_t>(options.max_live_parameters);
  for (std::size_t i = trace_position; i < trace.size() && issued < prefetch_bucket; ++i) {
    const EngineUnit& unit = units[trace[i]];
    if (unit.gather_state != GatherState::kReleased) continue;
    if (live_elements + unit.padded > max_live) break;
    issue_gather(trace[i], true);
    issued += unit.padded;
  }
}

void Engine::Impl::wait_gathered(UnitId u) {
  EngineUnit& unit = units[u];
  if (unit.gather_state != GatherState::kInFlight) return;
  try {
    unit.gathered_event.synchronize();
  } catch (const Error& error) {
    ZERO_THROW("engine (rank ", rank, "/", world, ", stage 3) gathering unit '", unit.name,
               "' failed: ", error.what());
  }
  unit.gather_state = GatherState::kAvailable;
}

void Engine::Impl::drop_prefetched() {
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    EngineUnit& unit = units[u];
    if (!unit.prefetched) continue;
    wait_gathered(u);
    unit.prefetched = false;
    if (unit.users == 0 && !unit.persistent) {
      unit.gathered.reset();
      unit.gather_state = GatherState::kReleased;
      live_elements -= unit.padded;
    }
  }
}

void Engine::Impl::regather_persistent() {
  for (UnitId u = 0; u < static_cast<UnitId>(units.size()); ++u) {
    EngineUnit& unit = units[u];
    if (!unit.persistent || !unit.gathered.allocated()) continue;
    ZERO_CHECK(unit.users == 0, "unit '", unit.name, "' is still gathered at the optimizer step");
    issue_gather(u, false);
  }
}

}  // namespace zero
