// The trainer's memory plan at run time (phase_memory.h).
#include "plan/phase_memory.h"

#include <algorithm>
#include <string>

#include "config/input_checks.h"
#include "kind/task_kind.h"
#include "zero/comm/host_collectives.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/node_memory.h"
#include "zero/core/phase_report.h"

namespace zero::train::detail {

namespace {

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

// What the run plans: the model, block size and phases prepare() found (the run's length, a
// resume), on the run's own device.
PlannedRun planned_of(const Prepared& prepared, const TrainingArguments& arguments, bool resumes,
                      const DeviceContext& device) {
  PlannedRun planned;
  planned.model = prepared.model_config;
  planned.pretrained = prepared.pretrained;
  planned.seq_len = prepared.block_size;
  planned.device_is_host = device.device().kind == DeviceKind::kCpu;
  planned.phases = plan_phases(arguments, prepared.total_steps, prepared.steps_per_epoch);
  planned.phases.resume = resumes;
  return planned;
}

// The ranks of this run on this node: the launcher's local world size, else the whole world
// (launched without a launcher, every rank is here).
}  // namespace

int ranks_on_this_node(int world) {
  const LaunchInfo launch = detect_launch();
  return launch.launcher == Launcher::kNone ? world : std::max(launch.local_world_size, 1);
}

RunMemory::RunMemory(const RunConfig& run, const Prepared& prepared, bool resumes,
                     const DeviceContext& device, const Console& console)
    : console_(console) {
  const int world = run.world_size;
  measured_.fill(-1);
  if (!prepared.task->planned()) {
    console_.say("memory plan: --task %s is not planned; no phase is checked\n",
                 std::string(prepared.task->name()).c_str());
    return;
  }
  const PlanSetup setup = plan_setup(run, planned_of(prepared, run.arguments, resumes, device));
  RankPlan plan;
  try {
    plan = plan_rank(setup, world, 0);
  } catch (const Error& error) {  // the run itself will say what its engine refuses
    console_.say("memory plan: not planned (%s); no phase is checked\n", error.what());
    return;
  }
  device_is_host_ = setup.device_is_host;
  measure_baseline(plan, "VmRSS of this rank before the engine allocates");
  const int ranks = ranks_on_this_node(world);
  console_.say("memory plan (rank 0 of %d, %d on this node):\n%s", world, ranks,
               format_phases(plan, setup.device_is_host).c_str());
  // The NVMe swap folders' room first: a refusal there names a path, not a setting.
  as_input_error("memory plan",
                 [&] { check_nvme_free_space(nvme_needs(plan, setup.engine, ranks)); });
  std::optional<NodeMemory> node;
  try {
    node = read_node_memory();
  } catch (const Error& error) {
    console_.say("memory plan: not checked against the node (%s)\n", error.what());
  }
  if (node) {
    const NodeFit fit = node_fit(plan, ranks, *node, setup.device_is_host);
    console_.say("memory plan: %s\n", fit.message().c_str());
    if (!fit.fits) {
      const FitProposal proposal =
          propose_fit(setup, world, ranks, *node, setup.device_is_host, plan.baseline_bytes);
      std::string advice =
          "no setting tried (smaller sub_group_size, stage3_max_live_parameters, "
          "bucket sizes; offload to host memory or NVMe) makes it fit";
      if (!proposal.settings.empty()) {
        advice = proposal.found ? "it fits with" : advice + "; the closest,";
        for (const std::string& setting : proposal.settings) advice += " " + setting + ";";
        advice += " " + proposal.fit.message();
      }
      if (!run.arguments.ignore_memory_plan)
        input_error("the memory plan says this run cannot finish: ", fit.message(), "; ", advice,
                    " (--ignore_memory_plan runs it anyway)");
      console_.say("memory plan: %s; running anyway (--ignore_memory_plan)\n", advice.c_str());
    }
  }
  plan_ = std::move(plan);
  measures_ = reset_peak_resident();
  if (!measures_)
    console_.say("memory plan: /proc/self/clear_refs refused: phase peaks are not measured\n");
}

void RunMemory::enter(Phase phase) {
  if (measures_) {
    const std::int64_t peak = read_process_memory().peak_resident_bytes;
    std::int64_t& measured = measured_[static_cast<std::size_t>(current_)];
    measured = std::max(measured, peak);
    reset_peak_resident();
  }
  current_ = phase;
  report_phase(name_of(phase));  // ZERO_PHASE_DIR's line (zero/core/phase_report.h)
}

std::vector<TrainResult::PhaseMemory> RunMemory::finish(Communicator& communicator,
                                                        DeviceContext& context) {
  enter(current_);
  std::vector<TrainResult::PhaseMemory> phases;
  if (!plan_ || !measures_) return phases;
  // Every rank's measured peaks (MiB, -1 not entered), the largest per phase.
  std::array<float, kNumPhases> mine{};
  for (std::size_t p = 0; p < kNumPhases; ++p)
    mine[p] = measured_[p] < 0 ? -1.0f : static_cast<float>(mib(measured_[p]));
  std::vector<float> all(kNumPhases * static_cast<std::size_t>(communicator.world_size()));
  all_gather_host(communicator, context, mine, all, "memory phase peaks");
  for (std::size_t p = 0; p < kNumPhases; ++p) {
    float largest = -1.0f;
    for (std::size_t r = 0; r < all.size() / kNumPhases; ++r)
      largest = std::max(largest, all[r * kNumPhases + p]);
    if (largest < 0) continue;
    const auto phase = static_cast<Phase>(p);
    const std::int64_t planned = planned_resident_bytes(*plan_, phase, device_is_host_);
    const auto measured = static_cast<std::int64_t>(static_cast<double>(largest) * 1048576.0);
    phases.push_back({phase, measured, planned});
    console_.say(
        "memory phase %s: process peak %.1f MiB measured (VmHWM, largest rank), %.1f MiB "
        "planned (baseline %.1f MiB included): %.1f%% of plan\n",
        std::string(name_of(phase)).c_str(), mib(measured), mib(planned),
        mib(plan_->baseline_bytes),
        100.0 * static_cast<double>(measured) /
            static_cast<double>(std::max<std::int64_t>(planned, 1)));
  }
  return phases;
}

}  // namespace zero::train::detail
