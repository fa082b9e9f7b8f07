// The trainer's memory plan at run time (internal to zero::train): the run planned before anything
// is allocated and refused when a phase does not fit the node, then each phase's measured process
// peak (VmHWM, reset between phases through /proc/self/clear_refs) logged beside its plan.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "config/console.h"
#include "kind/prepared.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/train/plan.h"
#include "zero/train/run_config.h"
#include "zero/train/run_types.h"

namespace zero::train::detail {

// The ranks sharing this node's memory: the launcher's local world size, else all `world`.
int ranks_on_this_node(int world);

// One rank's run: constructed before the engine allocates, it measures the baseline (VmRSS),
// plans the run (rank 0's plan on every rank, so every rank decides alike), checks the node's
// memory and the NVMe free space, and enters the load phase. Throws InputError naming the phase
// that does not fit (unless --ignore_memory_plan) or the nvme_path without room.
class RunMemory {
 public:
  // `device`: the run's own context; its kind decides whether device bytes are host memory. The
  // plan is `run`'s (plan_setup) with the model, block size and length prepare() found.
  RunMemory(const RunConfig& run, const Prepared& prepared, bool resumes,
            const DeviceContext& device, const Console& console);

  // Ends the current phase (its measured peak) and begins `phase` (VmHWM reset).
  void enter(Phase phase);
  Phase current() const { return current_; }

  // Ends the last phase; every rank: the largest measured peak over the ranks per phase, printed
  // beside the plan on rank 0's console and returned.
  std::vector<TrainResult::PhaseMemory> finish(Communicator& communicator, DeviceContext& context);

  // `phase` until the scope ends, then back to the phase before it.
  class Scope {
   public:
    Scope(RunMemory* memory, Phase phase) : memory_(memory) {
      if (memory_ == nullptr) return;
      previous_ = memory_->current();
      memory_->enter(phase);
    }
    ~Scope() {
      if (memory_ != nullptr) memory_->enter(previous_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    RunMemory* memory_;
    Phase previous_ = Phase::kLoad;
  };

 private:
  const Console& console_;
  std::optional<RankPlan> plan_;  // unset: the run is not planned (text classification)
  bool device_is_host_ = true;    // the CPU backend: device bytes are resident host bytes
  Phase current_ = Phase::kLoad;
  std::array<std::int64_t, kNumPhases> measured_{};  // -1: not entered
  bool measures_ = false;                            // VmHWM can be reset here
};

}  // namespace zero::train::detail
