// `zero estimate`: will it fit? The memory plan of a training run on given hardware (the planner,
// zero/train/plan.h: the trainer's own allocation sequence, nothing allocated), whether it fits,
// the largest micro-batch that fits, the configurations that fit ranked fastest first, and, with
// --deepspeed_compat, DeepSpeed 0.19's model-state estimator tables beside it.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "zero/core/error.h"
#include "zero/gpt2/family.h"
#include "zero/train/arguments.h"
#include "zero/train/cli.h"
#include "zero/train/command_arguments.h"
#include "zero/train/estimate.h"
#include "zero/train/flag_options.h"
#include "zero/train/plan.h"
#include "zero/train/trainer.h"

namespace zero::cli {

namespace {

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / 1073741824.0; }

std::string gib_text(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", gib(bytes));
  return text;
}

// The header, the rank's plan and fit, the host per node by category, and the largest micro-batch.
void print_plan(const train::Estimate& estimate) {
  const train::Hardware& hardware = estimate.hardware;
  const train::RankPlan& plan = estimate.plan;
  const train::PlanSetup& setup = estimate.setup;
  const train::Fit& fit = estimate.fit;
  const int gpus_per_node = hardware.gpus_per_node;
  std::printf(
      "zero estimate: %lld parameters (%s), %d node(s) x %d GPU(s) of %.2f GiB, host %s "
      "per node\n",
      static_cast<long long>(plan.parameters),
      estimate.by_counts ? "--params; activations not planned"
                         : (std::string(gpt2::name_of(setup.model->family)) + " " +
                            std::to_string(setup.model->n_layer) + " layers, width " +
                            std::to_string(setup.model->n_embd))
                               .c_str(),
      hardware.nodes, gpus_per_node, gib(hardware.gpu_memory),
      hardware.cpu_memory > 0 ? gib_text(hardware.cpu_memory).c_str() : "not checked");
  if (estimate.by_counts) {
    std::printf(
        "configuration: ZeRO stage %d, %d accumulation step(s); %lld parameters in units "
        "of at most %lld, no activations\n",
        setup.engine.stage, setup.engine.gradient_accumulation_steps,
        static_cast<long long>(estimate.total_params), static_cast<long long>(estimate.largest));
  } else {
    std::printf(
        "configuration: ZeRO stage %d, micro-batch %lld x %lld tokens, %d accumulation "
        "step(s)%s\n",
        setup.engine.stage, static_cast<long long>(setup.batch_size),
        static_cast<long long>(setup.seq_len), setup.engine.gradient_accumulation_steps,
        train::recompute_text(setup).c_str());
  }
  for (const std::string& warning : setup.warnings) std::printf("config: %s\n", warning.c_str());
  std::printf("\nGPU rank (each of %d): %s", hardware.world_size(),
              train::format_plan(plan, &hardware.allowance).c_str());
  std::printf("  GPU: %.3f GiB of %.2f GiB: %s\n", gib(fit.gpu_bytes), gib(hardware.gpu_memory),
              fit.gpu_fits ? "fits" : "DOES NOT FIT");
  if (!estimate.by_counts) {
    const int fewest = estimate.fewest_recompute_blocks;
    const auto layers = static_cast<int>(setup.model->n_layer);
    if (fewest < 0)
      std::printf("  recompute: even every block (%d) does not fit\n", layers);
    else if (fewest == 0)
      std::printf("  recompute: none needed to fit\n");
    else
      std::printf(
          "  recompute: the first %d of %d blocks at least, to fit (--recompute_blocks %d; "
          "about +%.1f%% FLOPs, every block +33%%)\n",
          fewest, layers, fewest, 100.0 / 3.0 * fewest / layers);
  }
  std::printf("\nhost (each node: %d rank(s) x the rank's host bytes), by category:\n",
              gpus_per_node);
  for (const MemorySpace space : {MemorySpace::kHostPinned, MemorySpace::kHost})
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = static_cast<MemoryCategory>(c);
      const std::int64_t bytes = plan.peaks.peak(space, category);
      if (bytes > 0)
        std::printf("  %-12s %-16s %16lld  %9.3f GiB per node\n",
                    std::string(name_of(space)).c_str(), std::string(name_of(category)).c_str(),
                    static_cast<long long>(bytes * gpus_per_node), gib(bytes * gpus_per_node));
    }
  std::printf("host (each node, %d rank(s)): %.3f GiB%s\n", gpus_per_node, gib(fit.node_host_bytes),
              hardware.cpu_memory <= 0 ? " (--cpu_memory not given: not checked)"
                                       : (" of " + gib_text(hardware.cpu_memory) + ": " +
                                          (fit.host_fits ? "fits" : "DOES NOT FIT"))
                                             .c_str());
  if (fit.node_nvme_bytes > 0)
    std::printf("nvme (each node, %d rank(s)): %.3f GiB%s\n", gpus_per_node,
                gib(fit.node_nvme_bytes),
                hardware.nvme_memory <= 0
                    ? " (--nvme_memory not given and no nvme_path here: not checked)"
                    : (" of " + gib_text(hardware.nvme_memory) + " (" + estimate.nvme_source +
                       "): " + (fit.nvme_fits ? "fits" : "DOES NOT FIT"))
                          .c_str());
  if (estimate.max_batch >= 0)
    std::printf("largest micro-batch that fits: %lld (of %lld tokens)\n",
                static_cast<long long>(estimate.max_batch), static_cast<long long>(setup.seq_len));
  std::printf("\nthe whole run, rank 0 (GPU ranks: the device's bytes are the GPU's):\n%s",
              train::format_phases(plan, false).c_str());
  std::printf("  node: %s\n", estimate.node_message().c_str());
  std::printf("fits: %s, against %s\n", estimate.fits() ? "yes" : "NO",
              estimate.fits_budget().c_str());
  if (!estimate.node_checked || estimate.node_fit.fits) return;
  if (!estimate.proposal.found)
    std::printf(
        "  no setting tried makes it fit (smaller sub_group_size, "
        "stage3_max_live_parameters, bucket sizes; offload to host memory, then NVMe)\n");
  if (estimate.proposal.settings.empty()) return;
  std::printf(estimate.proposal.found ? "  it fits with (planned again):\n" : "  the closest:\n");
  for (const std::string& setting : estimate.proposal.settings)
    std::printf("    %s\n", setting.c_str());
  std::printf("    -> %s\n", estimate.proposal.fit.message().c_str());
}

// The ranked configurations and, with --deepspeed_compat, DeepSpeed's tables.
void print_configurations(const train::Estimate& estimate, const train::EstimateArguments& e) {
  std::printf("\nconfigurations, fastest first (%s):\n", train::kRankingRule);
  std::printf("  %-5s %-12s %-13s %12s %16s %16s %6s %s\n", "stage", "offload", "checkpointing",
              "GPU GiB", "host GiB / node", "NVMe GiB / node", "fits", "largest micro-batch");
  for (const train::Candidate& c : estimate.ranked)
    std::printf(
        "  %-5d %-12s %-13s %12.3f %16.3f %16.3f %6s %s\n", c.stage, c.offload.c_str(),
        c.gradient_checkpointing ? "yes" : "no", gib(c.fit.gpu_bytes), gib(c.fit.node_host_bytes),
        gib(c.fit.node_nvme_bytes), c.fit.fits() ? "yes" : "no",
        c.max_batch_size < 0 ? "n/a (no activations)" : std::to_string(c.max_batch_size).c_str());
  if (!e.deepspeed_compat) return;
  const auto params = static_cast<double>(estimate.total_params);
  const auto largest = static_cast<double>(estimate.largest);
  std::printf("\nDeepSpeed 0.19's estimators (model states only, P = %lld, largest layer %lld):\n",
              static_cast<long long>(estimate.total_params),
              static_cast<long long>(estimate.largest));
  std::printf("%s", train::deepspeed_zero2_text(params, e.num_gpus_per_node, e.num_nodes,
                                                e.additional_buffer_factor)
                        .c_str());
  std::printf("%s", train::deepspeed_zero3_text(params, largest, e.num_gpus_per_node, e.num_nodes,
                                                e.additional_buffer_factor)
                        .c_str());
}

}  // namespace

int run_estimate(std::span<char* const> args) {
  CommandFlags flags(train::Command::kEstimate);
  flags.parse(args);
  if (flags.help()) {
    std::cout << usage("estimate",
                       "Plans a training run's memory per rank with the trainer's own allocation "
                       "sequence (nothing is\nallocated): per GPU and per node by category, the "
                       "peak, whether it fits, the largest micro-batch\nthat fits, and the "
                       "configurations (stage x offload x checkpointing) that fit, fastest first.",
                       flags.options());
    return 0;
  }
  stop_if_parse_only();
  train::TrainingArguments& a =
      flags.values().training;  // Hugging Face's defaults, as `zero train`
  a.dry_run = true;
  a.given_flags = flags.given_names();
  const train::EstimateArguments& e = flags.values().estimate;
  std::vector<std::string> notes;
  train::Estimate estimate;
  try {
    estimate = train::estimate_run(a, e, notes);
  } catch (const train::InputError& error) {
    for (const std::string& note : notes) std::cerr << "zero estimate: " << note << "\n";
    std::cerr << "zero estimate: error: " << error.what() << "\n";
    return 2;
  }
  for (const std::string& note : notes) std::cerr << "zero estimate: " << note << "\n";
  if (e.json) {
    std::cout << train::estimate_json(estimate, e) << "\n";
  } else {
    print_plan(estimate);
    print_configurations(estimate, e);
  }
  return 0;
}

}  // namespace zero::cli
