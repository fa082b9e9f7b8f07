// The plan of a whole run (zero/train/plan.h): its phases, their resident peaks against the node's
// memory, settings that make a run fit found by re-planning, and the NVMe free-space check.
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/node_memory.h"
#include "zero/train/plan.h"

namespace zero::train {

namespace fs = std::filesystem;

namespace {

std::string size_text(std::int64_t bytes) {
  char text[48];
  if (bytes >= (std::int64_t{1} << 30)) {
    std::snprintf(text, sizeof(text), "%.3f GiB", static_cast<double>(bytes) / 1073741824.0);
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  }
  return text;
}

std::string number_text(std::int64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(value));
  return text;
}

// How far the states are offloaded: 0 none, 1 optimizer to host memory, 2 and parameters too,
// 3 optimizer to NVMe (parameters in host memory), 4 both to NVMe.
int offload_level(const EngineOptions& options) {
  using config::OffloadDevice;
  if (options.offload_param.device == OffloadDevice::kNvme) return 4;
  if (options.offload_optimizer.device == OffloadDevice::kNvme) return 3;
  if (options.offload_param.device == OffloadDevice::kCpu) return 2;
  return options.offload_optimizer.device == OffloadDevice::kCpu ? 1 : 0;
}

// `options` offloaded to `level` (at least its own), the changed keys appended to `settings`.
void set_offload(EngineOptions& options, int level, std::vector<std::string>& settings) {
  using config::OffloadDevice;
  if (level <= offload_level(options)) return;
  std::string path = options.offload_optimizer.nvme_path;
  if (path.empty()) path = options.offload_param.nvme_path;
  if (path.empty()) path = "(a folder on a local NVMe drive)";
  if (level >= 2 && options.stage != 3) {
    options.stage = 3;
    settings.push_back("zero_optimization.stage 3");
  }
  const OffloadDevice optimizer = level >= 3 ? OffloadDevice::kNvme : OffloadDevice::kCpu;
  const OffloadDevice params = level == 4   ? OffloadDevice::kNvme
                               : level >= 2 ? OffloadDevice::kCpu
                                            : OffloadDevice::kNone;
  auto name = [](OffloadDevice device) { return device == OffloadDevice::kNvme ? "nvme" : "cpu"; };
  if (options.offload_optimizer.device != optimizer) {
    options.offload_optimizer.device = optimizer;
    settings.push_back(std::string("zero_optimization.offload_optimizer.device ") +
                       name(optimizer));
    if (optimizer == OffloadDevice::kNvme && options.offload_optimizer.nvme_path.empty()) {
      options.offload_optimizer.nvme_path = path;
      settings.push_back("zero_optimization.offload_optimizer.nvme_path " + path);
    }
  }
  if (params != OffloadDevice::kNone && options.offload_param.device != params) {
    options.offload_param.device = params;
    settings.push_back(std::string("zero_optimization.offload_param.device ") + name(params));
    if (params == OffloadDevice::kNvme && options.offload_param.nvme_path.empty()) {
      options.offload_param.nvme_path = path;
      settings.push_back("zero_optimization.offload_param.nvme_path " + path);
    }
  }
}

// The working buffers at `level` (0: as configured; 1-3: ten times smaller each), each only made
// smaller than configured.
void set_buffers(EngineOptions& options, int level, std::vector<std::string>& settings) {
  if (level == 0) return;
  std::int64_t scale = 1;
  for (int i = 0; i < level; ++i) scale *= 10;
  auto shrink = [&](std::int64_t& value, std::int64_t largest, const char* key) {
    const std::int64_t target = std::max<std::int64_t>(largest / scale, 1);
    if (value <= target) return;
    value = target;
    settings.push_back(std::string("zero_optimization.") + key + " " + number_text(target));
  };
  if (options.offload_optimizer.device != config::OffloadDevice::kNone)
    shrink(options.sub_group_size, 1'000'000'000, "sub_group_size");
  if (options.stage == 3) {
    shrink(options.max_live_parameters, 1'000'000'000, "stage3_max_live_parameters");
    shrink(options.prefetch_bucket_size, 500'000'000, "stage3_prefetch_bucket_size");
  }
  shrink(options.reduce_bucket_size, 500'000'000, "reduce_bucket_size");
  if (options.stage == 1 || options.stage == 2)
    shrink(options.allgather_bucket_size, 500'000'000, "allgather_bucket_size");
}

}  // namespace

std::string_view name_of(Phase phase) {
  switch (phase) {
    case Phase::kLoad: return "load";
    case Phase::kTrain: return "train";
    case Phase::kEvaluation: return "evaluation";
    case Phase::kCheckpoint: return "checkpoint";
    case Phase::kFinalSave: return "final save";
  }
  return "?";
}

PhaseSchedule plan_phases(const TrainingArguments& arguments, std::int64_t total_steps,
                          std::int64_t steps_per_epoch) {
  PhaseSchedule schedule;
  schedule.train = arguments.do_train;
  schedule.evaluate = arguments.do_eval;
  const bool steps_known =
      total_steps > 0 &&
      (arguments.save_strategy != IntervalStrategy::kEpoch || steps_per_epoch > 0);
  const std::int64_t every = arguments.save_strategy == IntervalStrategy::kSteps
                                 ? arguments.save_steps
                             : arguments.save_strategy == IntervalStrategy::kEpoch
                                 ? std::max<std::int64_t>(steps_per_epoch, 1)
                                 : 0;
  if (arguments.do_train && every > 0 && !steps_known) {
    // The length of the run needs the data: planned as a run long enough to save, whose last
    // step saves too.
    schedule.checkpoint = schedule.step_after_checkpoint = schedule.checkpoint_at_last_step = true;
  } else if (arguments.do_train && every > 0 && every <= total_steps) {
    schedule.checkpoint = true;
    schedule.step_after_checkpoint = every < total_steps;
    schedule.checkpoint_at_last_step = total_steps % every == 0;
  }
  schedule.resume = arguments.do_train && !arguments.resume_from_checkpoint.empty();
  return schedule;
}

bool trainer_device_is_host(const TrainingArguments& arguments) {
  return choose_device(arguments.use_cpu).device.kind == DeviceKind::kCpu;
}

std::int64_t planned_resident_bytes(const RankPlan& plan, Phase phase, bool device_is_host) {
  return planned_resident_bytes(plan, plan.phase(phase), device_is_host);
}

std::int64_t planned_resident_bytes(const RankPlan& plan, const RankPlan::PhasePeak& peak,
                                    bool device_is_host) {
  std::int64_t bytes = peak.in(MemorySpace::kHost) + peak.in(MemorySpace::kHostPinned) +
                       peak.outside_host_bytes + plan.baseline_bytes;
  bytes += device_is_host ? peak.in(MemorySpace::kDevice) : kGpuHostLibrariesBytes;
  return bytes;
}

Phase largest_phase(const RankPlan& plan, bool device_is_host) {
  Phase largest = Phase::kLoad;
  for (std::size_t p = 0; p < kNumPhases; ++p) {
    const auto phase = static_cast<Phase>(p);
    if (plan.phase(phase).runs && planned_resident_bytes(plan, phase, device_is_host) >
                                      planned_resident_bytes(plan, largest, device_is_host))
      largest = phase;
  }
  return largest;
}

void measure_baseline(RankPlan& plan, const std::string& where) {
  plan.baseline_bytes = std::max<std::int64_t>(read_process_memory().resident_bytes, 0);
  plan.baseline_source = where;
}

std::string format_phases(const RankPlan& plan, bool device_is_host) {
  std::ostringstream out;
  out << "  phases: resident peak per rank = host + host_pinned"
      << (device_is_host ? " + device (host memory on this backend)" : "")
      << " + outside the ledger + baseline" << (device_is_host ? "" : " + GPU libraries") << "\n";
  char line[320];
  for (std::size_t p = 0; p < kNumPhases; ++p) {
    const auto phase = static_cast<Phase>(p);
    const RankPlan::PhasePeak& peak = plan.phase(phase);
    if (!peak.runs) continue;
    std::snprintf(line, sizeof(line),
                  "    %-11s %12s  (host %s, host_pinned %s, device %s, outside the ledger %s; "
                  "nvme %s)\n",
                  std::string(name_of(phase)).c_str(),
                  size_text(planned_resident_bytes(plan, phase, device_is_host)).c_str(),
                  size_text(peak.in(MemorySpace::kHost)).c_str(),
                  size_text(peak.in(MemorySpace::kHostPinned)).c_str(),
                  size_text(peak.in(MemorySpace::kDevice)).c_str(),
                  size_text(peak.outside_host_bytes).c_str(),
                  size_text(peak.in(MemorySpace::kNvme)).c_str());
    out << line;
  }
  out << "  baseline outside the ledger (libraries, MPI, thread stacks, tokenizer, data): "
      << size_text(plan.baseline_bytes) << " ("
      << (plan.baseline_source.empty() ? std::string("not measured") : plan.baseline_source)
      << ")\n";
  if (!device_is_host)
    out << "  GPU libraries (host memory CUDA's libraries page in as their kernels first run): "
        << size_text(kGpuHostLibrariesBytes) << " (measured on an H100, benchmarks/RESULTS.md)\n";
  return out.str();
}

std::string NodeFit::message() const {
  std::string ranks;
  if (ranks_per_node > 1)
    ranks = " (" + std::to_string(ranks_per_node) + " ranks x " + size_text(rank_bytes) + ")";
  if (!fits)
    return "does not fit: " + std::string(name_of(phase)) + " needs " + size_text(needed_bytes) +
           ranks + ", the node has " + node;
  return "fits: the largest phase, " + std::string(name_of(phase)) + ", needs " +
         size_text(needed_bytes) + ranks + " of the node's " + node;
}

NodeFit node_fit(const RankPlan& plan, int ranks_per_node, const NodeMemory& node,
                 bool device_is_host) {
  NodeFit fit;
  fit.ranks_per_node = std::max(ranks_per_node, 1);
  fit.node_bytes = node.limit_bytes();
  fit.node = node.describe();
  fit.phase = largest_phase(plan, device_is_host);
  fit.rank_bytes = planned_resident_bytes(plan, fit.phase, device_is_host);
  for (const auto& [phase, peak] : plan.visits) {  // the first visit that does not fit
    const std::int64_t bytes = planned_resident_bytes(plan, peak, device_is_host);
    if (bytes * fit.ranks_per_node > fit.node_bytes) {
      fit.phase = phase;
      fit.rank_bytes = bytes;
      fit.fits = false;
      break;
    }
  }
  fit.needed_bytes = fit.rank_bytes * fit.ranks_per_node;
  return fit;
}

FitProposal propose_fit(const PlanSetup& setup, int world_size, int ranks_per_node,
                        const NodeMemory& node, bool device_is_host, std::int64_t baseline_bytes) {
  FitProposal proposal;
  std::int64_t closest_bytes = 0;
  const int from = offload_level(setup.engine);
  for (int offload = from; offload <= 4; ++offload) {
    for (int buffers = 0; buffers <= 3; ++buffers) {
      if (offload == from && buffers == 0) continue;  // the configuration itself
      PlanSetup variant = setup;
      std::vector<std::string> settings;
      set_offload(variant.engine, offload, settings);
      set_buffers(variant.engine, buffers, settings);
      if (settings.empty()) continue;
      RankPlan plan;
      try {
        plan = plan_rank(variant, world_size, 0);
      } catch (const Error&) {
        continue;  // a combination the engine refuses is no proposal
      }
      plan.baseline_bytes = baseline_bytes;
      const NodeFit fit = node_fit(plan, ranks_per_node, node, device_is_host);
      if (!fit.fits) {  // the closest so far, to say what still does not fit
        const std::int64_t largest =
            planned_resident_bytes(plan, largest_phase(plan, device_is_host), device_is_host);
        if (proposal.settings.empty() || largest < closest_bytes) {
          closest_bytes = largest;
          proposal.settings = std::move(settings);
          proposal.fit = fit;
        }
        continue;
      }
      proposal.found = true;
      proposal.settings = std::move(settings);
      proposal.fit = fit;
      return proposal;
    }
  }
  return proposal;
}

std::vector<NvmeNeed> nvme_needs(const RankPlan& plan, const EngineOptions& options,
                                 int ranks_per_node) {
  const std::int64_t ranks = std::max(ranks_per_node, 1);
  const std::int64_t params = plan.peaks.peak(MemorySpace::kNvme, MemoryCategory::kParamShard);
  const std::int64_t rest = plan.peaks.reserved_peak(MemorySpace::kNvme) - params;
  std::vector<NvmeNeed> needs;
  auto add = [&](const std::string& path, std::int64_t bytes) {
    if (bytes <= 0 || path.empty()) return;
    for (NvmeNeed& need : needs)
      if (fs::path(need.path).lexically_normal() == fs::path(path).lexically_normal()) {
        need.bytes += bytes * ranks;
        return;
      }
    needs.push_back({path, bytes * ranks});
  };
  add(options.offload_param.nvme_path, params);
  add(options.offload_optimizer.nvme_path, rest);
  return needs;
}

std::optional<std::int64_t> free_bytes_under(const std::string& path) {
  struct statvfs info {};
  if (::statvfs(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return std::nullopt;
    ZERO_THROW("nvme_path ", path, ": cannot read its free space (statvfs: ", std::strerror(errno),
               ")");
  }
  return static_cast<std::int64_t>(info.f_bavail) * static_cast<std::int64_t>(info.f_frsize);
}

void check_nvme_free_space(const std::vector<NvmeNeed>& needs) {
  for (const NvmeNeed& need : needs) {
    const std::optional<std::int64_t> free = free_bytes_under(need.path);
    if (!free) continue;  // the swap store names a missing folder
    const std::int64_t free_bytes = *free;
    ZERO_CHECK(need.bytes <= free_bytes, "nvme_path ", need.path, ": the plan swaps ", need.bytes,
               " bytes (", size_text(need.bytes), ") there, the filesystem has ", free_bytes,
               " bytes (", size_text(free_bytes), ") free");
  }
}

std::string check_against_this_node(const PlanSetup& setup, RankPlan& plan, int world_size,
                                    int ranks_per_node) {
  if (ranks_per_node <= 0) {
    const LaunchInfo launch = detect_launch();
    ranks_per_node = launch.launcher == Launcher::kNone ? world_size : launch.local_world_size;
  }
  measure_baseline(plan,
                   "VmRSS of this planning process: the libraries, no data, no peers; "
                   "zero train measures its own before the engine allocates");
  std::string out = format_phases(plan, setup.device_is_host);
  NodeMemory node;
  try {
    node = read_node_memory();
  } catch (const Error& error) {
    return out + "  this node: not checked (" + error.what() + ")\n";
  }
  const NodeFit fit = node_fit(plan, ranks_per_node, node, setup.device_is_host);
  out += "  this node, " + std::to_string(ranks_per_node) + " rank(s): " + fit.message() + "\n";
  if (!fit.fits) {
    const FitProposal proposal = propose_fit(setup, world_size, ranks_per_node, node,
                                             setup.device_is_host, plan.baseline_bytes);
    if (proposal.found) {
      out += "  it fits with (planned again):";
      for (const std::string& setting : proposal.settings) out += "\n    " + setting;
      out += "\n    -> " + proposal.fit.message() + "\n";
    } else {
      out +=
          "  no setting tried makes it fit (smaller sub_group_size, stage3_max_live_parameters, "
          "bucket sizes; offload to host memory, then NVMe)\n";
      if (!proposal.settings.empty()) {
        out += "  the closest:";
        for (const std::string& setting : proposal.settings) out += "\n    " + setting;
        out += "\n    -> " + proposal.fit.message() + "\n";
      }
    }
  }
  for (const NvmeNeed& need : nvme_needs(plan, setup.engine, ranks_per_node)) {
    std::string free_text = "not found here";
    std::optional<std::int64_t> free;
    try {
      free = free_bytes_under(need.path);
    } catch (const Error& error) {
      free_text = error.what();
    }
    if (free)
      free_text = size_text(*free) + " free: " + (need.bytes <= *free ? "fits" : "DOES NOT FIT");
    out +=
        "  nvme_path " + need.path + ": " + size_text(need.bytes) + " swapped, " + free_text + "\n";
  }
  return out;
}

}  // namespace zero::train
