// `zero estimate`'s search (zero/train/plan.h): whether a plan fits the hardware, the largest
// micro-batch that fits, and the stage x offload x checkpointing configurations ranked.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "zero/train/plan.h"

namespace zero::train {

Fit fit_of(const RankPlan& plan, const Hardware& hardware) {
  Fit fit;
  fit.gpu_bytes = plan.peaks.reserved_peak(MemorySpace::kDevice) + hardware.allowance.total();
  fit.node_host_bytes =
      hardware.gpus_per_node * (plan.peaks.reserved_peak(MemorySpace::kHost) +
                                plan.peaks.reserved_peak(MemorySpace::kHostPinned)) +
      std::max(hardware.gpus_per_node * plan.load_host_bytes, plan.save_host_bytes);
  fit.node_nvme_bytes = hardware.gpus_per_node * plan.peaks.reserved_peak(MemorySpace::kNvme);
  fit.gpu_fits = fit.gpu_bytes <= hardware.gpu_memory;
  fit.host_fits = hardware.cpu_memory <= 0 || fit.node_host_bytes <= hardware.cpu_memory;
  fit.nvme_fits = hardware.nvme_memory <= 0 || fit.node_nvme_bytes <= hardware.nvme_memory;
  return fit;
}

std::int64_t largest_fitting_batch(PlanSetup setup, const Hardware& hardware, std::int64_t limit) {
  if (!setup.model) return -1;
  const int world = hardware.world_size();
  auto fits = [&](std::int64_t batch) {
    setup.batch_size = batch;
    return fit_of(plan_rank(setup, world, 0), hardware).fits();
  };
  if (!fits(1)) return 0;
  std::int64_t good = 1, bad = 0;
  while (bad == 0) {
    const std::int64_t next = good * 2;
    if (next > limit) return good;
    if (fits(next)) {
      good = next;
    } else {
      bad = next;
    }
  }
  while (bad - good > 1) {
    const std::int64_t middle = good + (bad - good) / 2;
    (fits(middle) ? good : bad) = middle;
  }
  return good;
}

namespace {

// The smallest offload_optimizer.ratio at which `variant` (stage 3, optimizer cpu) fits the GPU:
// the device's bytes do not grow with the ratio (fewer sub-groups stay on it), so 12 bisection
// steps find the split to 1/4096 of the sub-groups. 0 when even every sub-group on the host
// does not fit.
double smallest_fitting_ratio(PlanSetup variant, const Hardware& hardware, int world) {
  auto gpu_fits = [&](double ratio) {
    variant.engine.offload_optimizer.ratio = ratio;
    return fit_of(plan_rank(variant, world, 0), hardware).gpu_fits;
  };
  double low = 0.0, high = 1.0;  // gpu_fits(high); not gpu_fits(low) (every state on the device)
  if (!gpu_fits(high)) return 0.0;
  for (int step = 0; step < 12; ++step) {
    const double middle = (low + high) / 2;
    (gpu_fits(middle) ? high : low) = middle;
  }
  return high;
}

}  // namespace

int smallest_recompute_blocks(PlanSetup setup, int world,
                              const std::function<bool(int, const RankPlan&)>& fits) {
  if (!setup.model) return -1;
  setup.gradient_checkpointing = false;
  auto fits_with = [&](int blocks) {
    setup.recompute_blocks = blocks;
    return fits(blocks, plan_rank(setup, world, 0));
  };
  int bad = 0, good = static_cast<int>(setup.model->n_layer);
  if (fits_with(bad)) return 0;
  if (!fits_with(good)) return -1;
  while (good - bad > 1) {
    const int middle = bad + (good - bad) / 2;
    (fits_with(middle) ? good : bad) = middle;
  }
  return good;
}

std::string recompute_text(const PlanSetup& setup) {
  if (setup.gradient_checkpointing) return ", gradient checkpointing";
  if (setup.recompute_blocks == 0 || !setup.model) return "";
  return ", the first " + std::to_string(setup.recompute_blocks) + " of " +
         std::to_string(setup.model->n_layer) + " blocks recomputed";
}

std::vector<Candidate> rank_configurations(const PlanSetup& setup, const Hardware& hardware) {
  // The offload modes planned (the engine places the states; the plan records where).
  static constexpr std::string_view kPlannedOffloads[] = {"none", "cpu", "nvme"};
  auto device_of = [](std::string_view offload) {
    return offload == "cpu"    ? config::OffloadDevice::kCpu
           : offload == "nvme" ? config::OffloadDevice::kNvme
                               : config::OffloadDevice::kNone;
  };
  std::vector<Candidate> candidates;
  const int world = hardware.world_size();
  for (const std::string_view offload : kPlannedOffloads)
    for (int stage = 0; stage <= 3; ++stage)
      for (bool checkpointing : {false, true}) {
        if (checkpointing && !setup.model) continue;
        if (offload != "none" && stage == 0) continue;  // DeepSpeed offloads at stages 1-3
        PlanSetup variant = setup;
        variant.engine.stage = stage;
        variant.engine.offload_optimizer.device = device_of(offload);
        variant.engine.offload_param.device =
            stage == 3 ? device_of(offload) : config::OffloadDevice::kNone;
        // The grid offloads whole states: a given partial offload (offload_optimizer.ratio,
        // stage 3 with the optimizer alone on the host) is the given configuration's plan, and
        // is no valid option for the grid's other stages and devices.
        variant.engine.offload_optimizer.ratio = 1.0;
        // A plan touches no disk: NVMe candidates need a path only to be valid options.
        for (std::string* path :
             {&variant.engine.offload_optimizer.nvme_path, &variant.engine.offload_param.nvme_path})
          if (offload == "nvme" && path->empty()) *path = "(nvme_path)";
        variant.gradient_checkpointing = checkpointing;
        variant.recompute_blocks = 0;  // a row recomputes every block or none, as it says
        Candidate candidate;
        candidate.stage = stage;
        candidate.offload = std::string(offload);
        candidate.gradient_checkpointing = checkpointing;
        candidate.plan = plan_rank(variant, world, 0);
        candidate.fit = fit_of(candidate.plan, hardware);
        // The search is bounded to 4M tokens per rank (the plan's token vector).
        candidate.max_batch_size = largest_fitting_batch(
            variant, hardware, std::max<std::int64_t>(1, (std::int64_t{1} << 22) / setup.seq_len));
        candidates.push_back(std::move(candidate));
      }
  // The partial offloads: stage 3, the optimizer's first sub-groups on the device, the rest on the
  // host (at the smallest ratio the GPU holds), the parameters on the device or on NVMe. Only
  // where the GPU cannot hold every state (else stage 3 without offload is the faster row).
  for (const bool params_on_nvme : {false, true})
    for (const bool checkpointing : {false, true}) {
      if (checkpointing && !setup.model) continue;
      const bool device_holds_all = std::ranges::any_of(candidates, [&](const Candidate& c) {
        return c.stage == 3 && c.offload == "none" && c.gradient_checkpointing == checkpointing &&
               c.fit.gpu_fits;
      });
      if (device_holds_all) continue;
      PlanSetup variant = setup;
      variant.engine.stage = 3;
      variant.engine.offload_optimizer.device = config::OffloadDevice::kCpu;
      variant.engine.offload_param.device =
          params_on_nvme ? config::OffloadDevice::kNvme : config::OffloadDevice::kNone;
      if (params_on_nvme && variant.engine.offload_param.nvme_path.empty())
        variant.engine.offload_param.nvme_path = "(nvme_path)";
      variant.engine.sub_group_size = std::min<std::int64_t>(
          variant.engine.sub_group_size,
          setup.model ? deepspeed_largest_layer_params(*setup.model) : setup.largest_layer_params);
      variant.gradient_checkpointing = checkpointing;
      variant.recompute_blocks = 0;
      // Rounded up to the 3 decimals printed, and planned at that value: the engine keeps
      // ⌊(1 − ratio)·G⌋ sub-groups on the device, so a ratio rounded down could keep one more
      // than fits.
      const double ratio =
          std::ceil(smallest_fitting_ratio(variant, hardware, world) * 1000) / 1000;
      if (ratio <= 0.0 || ratio >= 1.0) continue;  // none fits, or only the plain offload
      variant.engine.offload_optimizer.ratio = ratio;
      Candidate candidate;
      candidate.stage = 3;
      char offload[32];
      std::snprintf(offload, sizeof(offload), "cpu:%.3f%s", ratio, params_on_nvme ? ",pn" : "");
      candidate.offload = offload;
      candidate.ratio = ratio;
      candidate.sub_group_size = variant.engine.sub_group_size;
      candidate.gradient_checkpointing = checkpointing;
      candidate.plan = plan_rank(variant, world, 0);
      // No sub-group left on the device: the whole offload, a row of the grid already.
      if (candidate.plan.peaks.peak(MemorySpace::kDevice, MemoryCategory::kOptimizerState) == 0)
        continue;
      candidate.fit = fit_of(candidate.plan, hardware);
      candidate.max_batch_size = largest_fitting_batch(
          variant, hardware, std::max<std::int64_t>(1, (std::int64_t{1} << 22) / setup.seq_len));
      candidates.push_back(std::move(candidate));
    }
  // Fastest first: no recomputation before recomputation (+1 forward per step), then the
  // communication volume (stages 0-2 move 2Ψ per step, stage 3 3Ψ), then the lower stage; the
  // configurations that fit before those that do not.
  std::stable_sort(
      candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        auto key = [](const Candidate& c) {
          // none, then host memory, then NVMe (slower than host memory); a partial
          // offload before the whole one (less crosses the bus)
          const bool nvme =
              c.offload.find("nvme") != std::string::npos || c.offload.ends_with(",pn");
          const int offload = c.offload == "none" ? 0 : nvme ? 2 : 1;
          return std::tuple(!c.fit.fits(), offload, c.gradient_checkpointing, c.stage == 3, c.stage,
                            c.ratio);
        };
        return key(a) < key(b);
      });
  return candidates;
}

}  // namespace zero::train
