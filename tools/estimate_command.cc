// `zero estimate`: will it fit? The memory plan of a training run on given hardware (the planner,
// zero/train/plan.h: the trainer's own allocation sequence, nothing allocated), whether it fits,
// the largest micro-batch that fits, the configurations that fit ranked fastest first, and, with
// --deepspeed_compat, DeepSpeed 0.19's model-state estimator tables beside it.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli.h"
#include "commands.h"
#include "flag_options.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/node_memory.h"
#include "zero/train/arguments.h"
#include "zero/train/command_arguments.h"
#include "zero/train/config_precedence.h"
#include "zero/train/hub_cache.h"
#include "zero/train/plan.h"
#include "zero/train/trainer.h"

namespace zero::cli {

namespace {

using nlohmann::json;

// "80" (GiB), "80GiB", "85.9GB" (10^9), "512MiB", "2TiB", "1.5TB".
std::int64_t parse_size(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError{"--" + flag + ": '" + text + "' is not a size (e.g. 80, 80GiB, 85.9GB)"};
  }
  const std::string unit = text.substr(used);
  double scale = 0.0;
  if (unit.empty() || unit == "GiB" || unit == "G") scale = 1073741824.0;
  if (unit == "GB") scale = 1e9;
  if (unit == "MiB" || unit == "M") scale = 1048576.0;
  if (unit == "MB") scale = 1e6;
  if (unit == "TiB" || unit == "T") scale = 1099511627776.0;
  if (unit == "TB") scale = 1e12;
  if (scale == 0.0 || !(value >= 0.0))
    throw UsageError{"--" + flag + ": '" + text +
                     "' is not a size (a number of GiB, or with GiB, GB, MiB, MB, TiB, TB)"};
  return static_cast<std::int64_t>(value * scale);
}

std::int64_t parse_count(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value >= 1.0) || value > 9.0e15)
    throw UsageError{"--" + flag + ": '" + text + "' is not a positive count (e.g. 7e9)"};
  return static_cast<std::int64_t>(std::llround(value));
}

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / 1073741824.0; }

std::string gib_text(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", gib(bytes));
  return text;
}

json peaks_json(const train::MemoryPeaks& peaks) {
  json spaces = json::object();
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    if (peaks.reserved_peak(space) == 0) continue;
    json categories = json::object();
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
      const auto category = static_cast<MemoryCategory>(c);
      if (peaks.peak(space, category) > 0)
        categories[std::string(name_of(category))] = peaks.peak(space, category);
    }
    spaces[std::string(name_of(space))] = {{"categories", categories},
                                           {"peak_in_use", peaks.total_peak(space)},
                                           {"peak_reserved", peaks.reserved_peak(space)}};
  }
  return spaces;
}

json rows_json(const std::vector<train::DeepSpeedEstimateRow>& rows) {
  json out = json::array();
  for (const auto& row : rows)
    out.push_back({{"per_cpu_bytes", row.cpu_bytes},
                   {"per_gpu_bytes", row.gpu_bytes},
                   {"options", row.options}});
  return out;
}

// The usage errors of estimate's own flags, in the order they are checked.
void check_flags(const train::TrainingArguments& a, const train::EstimateArguments& e) {
  const bool by_counts = !e.params.empty();
  if (by_counts && (!a.model_name_or_path.empty() || !a.config_overrides.empty()))
    throw UsageError{
        "give a model (--model_name_or_path, --config_overrides) or --params, not both"};
  if (!e.largest_layer_params.empty() && !by_counts)
    throw UsageError{"--largest_layer_params goes with --params"};
  if (by_counts && e.largest_layer_params.empty())
    throw UsageError{
        "--params needs --largest_layer_params (the engine gathers and sizes "
        "buffers by unit)"};
  if (e.num_gpus_per_node < 1) throw UsageError{"--num_gpus_per_node must be at least 1"};
  if (e.num_nodes < 1) throw UsageError{"--num_nodes must be at least 1"};
  if (!a.deepspeed.empty() &&
      (e.zero_stage >= 0 || e.offload_optimizer != "none" || e.offload_param != "none"))
    throw UsageError{"give --deepspeed or --zero_stage/--offload_*, not both"};
  for (const std::string* device : {&e.offload_optimizer, &e.offload_param})
    if (*device != "none" && *device != "cpu" && *device != "nvme")
      throw UsageError{"--offload_optimizer/--offload_param: '" + *device +
                       "' is not none, cpu or nvme"};
  if (e.zero_stage > 3) throw UsageError{"--zero_stage must be 0, 1, 2 or 3"};
}

train::Hardware hardware_of(const train::EstimateArguments& e) {
  train::Hardware hardware;
  hardware.gpus_per_node = e.num_gpus_per_node;
  hardware.nodes = e.num_nodes;
  hardware.gpu_memory = parse_size("gpu_memory", e.gpu_memory);
  hardware.cpu_memory = parse_size("cpu_memory", e.cpu_memory);
  hardware.allowance.cuda_context = static_cast<std::int64_t>(e.cuda_context_mib * 1048576.0);
  hardware.allowance.cublas_workspace =
      static_cast<std::int64_t>(e.cublas_workspace_mib * 1048576.0);
  hardware.allowance.cudnn_workspace = static_cast<std::int64_t>(e.cudnn_workspace_mib * 1048576.0);
  hardware.allowance.nccl = static_cast<std::int64_t>(e.nccl_mib * 1048576.0);
  return hardware;
}

// Without --deepspeed: the config --zero_stage and --offload_* describe, "auto" filled from the
// flags as `zero train` fills it. With --deepspeed: "" (the file is read).
std::string deepspeed_json_of(const train::TrainingArguments& a,
                              const train::EstimateArguments& e) {
  if (!a.deepspeed.empty()) return "";
  json config = {{"train_micro_batch_size_per_gpu", "auto"},
                 {"gradient_accumulation_steps", "auto"},
                 {"gradient_clipping", "auto"},
                 {"bf16", {{"enabled", "auto"}}},
                 {"fp16", {{"enabled", "auto"}}},
                 {"zero_optimization", {{"stage", std::max(e.zero_stage, 0)}}}};
  if (e.offload_optimizer != "none")
    config["zero_optimization"]["offload_optimizer"] = {{"device", e.offload_optimizer}};
  if (e.offload_param != "none")
    config["zero_optimization"]["offload_param"] = {{"device", e.offload_param}};
  return config.dump();
}

// What `zero estimate` found: the plan of rank 0, its fit, the largest fitting micro-batch and the
// ranked configurations.
struct Estimate {
  bool by_counts = false;  // --params: bare parameter counts, no activations
  train::PlanSetup setup;
  std::int64_t total_params = 0;
  std::int64_t largest = 0;
  train::RankPlan plan;
  std::vector<train::Candidate> ranked;
  std::int64_t max_batch = 0;
  train::Fit fit;
  // The whole run's phases against a node of --cpu_memory, else this node: GPU ranks' resident
  // host bytes (the device's memory is the GPU's), and what makes it fit when it does not.
  NodeMemory node;
  train::NodeFit node_fit;
  train::FitProposal proposal;
};

// Throws train::InputError for a model or config the planner cannot read.
Estimate estimate_of(const train::TrainingArguments& a, const train::EstimateArguments& e,
                     const train::Hardware& hardware) {
  Estimate estimate;
  estimate.by_counts = !e.params.empty();
  const int world = hardware.world_size();
  const std::string deepspeed_json = deepspeed_json_of(a, e);
  if (estimate.by_counts) {
    estimate.total_params = parse_count("params", e.params);
    estimate.largest = parse_count("largest_layer_params", e.largest_layer_params);
    estimate.setup = train::plan_setup_from_counts(a, estimate.total_params, estimate.largest,
                                                   world, deepspeed_json);
  } else {
    estimate.setup = train::plan_setup(a, world, deepspeed_json);
    estimate.total_params = estimate.setup.model->num_parameters();
    estimate.largest = train::deepspeed_largest_layer_params(*estimate.setup.model);
  }
  estimate.plan = train::plan_rank(estimate.setup, world, 0);
  estimate.max_batch = train::largest_fitting_batch(
      estimate.setup, hardware,
      std::max<std::int64_t>(1, (std::int64_t{1} << 22) / estimate.setup.seq_len));
  estimate.ranked = train::rank_configurations(estimate.setup, hardware);
  estimate.fit = train::fit_of(estimate.plan, hardware);
  train::measure_baseline(estimate.plan,
                          "VmRSS of this planning process: the libraries, no data, no peers; "
                          "zero train measures its own before the engine allocates");
  if (hardware.cpu_memory > 0) {
    estimate.node.total_bytes = hardware.cpu_memory;
    estimate.node.total_source = "--cpu_memory";
  } else {
    estimate.node = read_node_memory();
  }
  estimate.node_fit = train::node_fit(estimate.plan, hardware.gpus_per_node, estimate.node, false);
  if (!estimate.node_fit.fits)
    estimate.proposal = train::propose_fit(estimate.setup, world, hardware.gpus_per_node,
                                           estimate.node, false, estimate.plan.baseline_bytes);
  return estimate;
}

constexpr const char* kRankingRule =
    "no offload before host offload before NVMe offload, no gradient checkpointing before "
    "checkpointing (+1 forward "
    "per step), then communication volume (stages 0-2: 2 Psi per step, stage 3: 3 Psi), then "
    "the lower stage";

void print_json(const Estimate& estimate, const train::Hardware& hardware,
                const train::EstimateArguments& e) {
  const train::RankPlan& plan = estimate.plan;
  const train::PlanSetup& setup = estimate.setup;
  const train::Fit& fit = estimate.fit;
  json out;
  out["model"] = {{"parameters", plan.parameters},
                  {"padded_parameters", plan.padded_parameters},
                  {"largest_layer_params", estimate.largest},
                  {"from", estimate.by_counts ? "params" : "gpt2_config"}};
  if (setup.model) out["model"]["config"] = json::parse(setup.model->to_json_text());
  out["hardware"] = {{"num_gpus_per_node", e.num_gpus_per_node},
                     {"num_nodes", e.num_nodes},
                     {"gpu_memory", hardware.gpu_memory},
                     {"cpu_memory", hardware.cpu_memory},
                     {"allowance",
                      {{"cuda_context", hardware.allowance.cuda_context},
                       {"cublas_workspace", hardware.allowance.cublas_workspace},
                       {"cudnn_workspace", hardware.allowance.cudnn_workspace},
                       {"nccl", hardware.allowance.nccl}}}};
  out["configuration"] = {{"stage", setup.engine.stage},
                          {"micro_batch", setup.batch_size},
                          {"seq_len", setup.seq_len},
                          {"gradient_accumulation_steps", setup.engine.gradient_accumulation_steps},
                          {"gradient_checkpointing", setup.gradient_checkpointing}};
  out["gpu_rank"] = {
      {"spaces", peaks_json(plan.peaks)}, {"total_bytes", fit.gpu_bytes}, {"fits", fit.gpu_fits}};
  out["host_per_node"] = {{"bytes", fit.node_host_bytes}, {"fits", fit.host_fits}};
  out["model_states_formula_bytes"] = plan.model_states.total();
  json phases = json::object();
  for (std::size_t p = 0; p < train::kNumPhases; ++p) {
    const auto phase = static_cast<train::Phase>(p);
    const train::RankPlan::PhasePeak& peak = plan.phase(phase);
    if (!peak.runs) continue;
    json spaces = json::object();
    for (std::size_t space = 0; space < kNumMemorySpaces; ++space)
      spaces[std::string(name_of(static_cast<MemorySpace>(space)))] = peak.reserved[space];
    phases[std::string(train::name_of(phase))] = {
        {"reserved", spaces},
        {"outside_ledger_host_bytes", peak.outside_host_bytes},
        {"resident_host_bytes", train::planned_resident_bytes(plan, phase, false)}};
  }
  out["phases"] = phases;
  out["baseline_bytes"] = plan.baseline_bytes;
  out["node"] = {{"bytes", estimate.node_fit.node_bytes},
                 {"fits", estimate.node_fit.fits},
                 {"message", estimate.node_fit.message()}};
  if (estimate.proposal.found) out["node"]["fits_with"] = estimate.proposal.settings;
  out["fits"] = fit.fits();
  out["largest_micro_batch"] = estimate.max_batch;
  out["ranking_rule"] = kRankingRule;
  json candidates = json::array();
  for (const train::Candidate& c : estimate.ranked)
    candidates.push_back({{"stage", c.stage},
                          {"offload", c.offload},
                          {"gradient_checkpointing", c.gradient_checkpointing},
                          {"gpu_bytes", c.fit.gpu_bytes},
                          {"host_bytes_per_node", c.fit.node_host_bytes},
                          {"fits", c.fit.fits()},
                          {"largest_micro_batch", c.max_batch_size}});
  out["configurations"] = candidates;
  if (e.deepspeed_compat) {
    const auto params = static_cast<double>(estimate.total_params);
    out["deepspeed_compat"] = {
        {"zero2", rows_json(train::deepspeed_zero2_rows(params, e.num_gpus_per_node, e.num_nodes,
                                                        e.additional_buffer_factor))},
        {"zero3", rows_json(train::deepspeed_zero3_rows(
                      params, static_cast<double>(estimate.largest), e.num_gpus_per_node,
                      e.num_nodes, e.additional_buffer_factor))}};
  }
  std::cout << out.dump(2) << "\n";
}

// The header, the rank's plan and fit, the host per node by category, and the largest micro-batch.
void print_plan(const Estimate& estimate, const train::Hardware& hardware) {
  const train::RankPlan& plan = estimate.plan;
  const train::PlanSetup& setup = estimate.setup;
  const train::Fit& fit = estimate.fit;
  const int gpus_per_node = hardware.gpus_per_node;
  std::printf(
      "zero estimate: %lld parameters (%s), %d node(s) x %d GPU(s) of %.2f GiB, host %s "
      "per node\n",
      static_cast<long long>(plan.parameters),
      estimate.by_counts ? "--params; activations not planned"
                         : ("GPT-2 " + std::to_string(setup.model->n_layer) + " layers, width " +
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
        setup.gradient_checkpointing ? ", gradient checkpointing" : "");
  }
  for (const std::string& warning : setup.warnings) std::printf("config: %s\n", warning.c_str());
  std::printf("\nGPU rank (each of %d): %s", hardware.world_size(),
              train::format_plan(plan, &hardware.allowance).c_str());
  std::printf("  GPU: %.3f GiB of %.2f GiB: %s\n", gib(fit.gpu_bytes), gib(hardware.gpu_memory),
              fit.gpu_fits ? "fits" : "DOES NOT FIT");
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
  if (estimate.max_batch >= 0)
    std::printf("largest micro-batch that fits: %lld (of %lld tokens)\n",
                static_cast<long long>(estimate.max_batch), static_cast<long long>(setup.seq_len));
  std::printf("\nthe whole run, rank 0 (GPU ranks: the device's bytes are the GPU's):\n%s",
              train::format_phases(plan, false).c_str());
  std::printf("  node: %s\n", estimate.node_fit.message().c_str());
  if (estimate.node_fit.fits) return;
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
void print_configurations(const Estimate& estimate, const train::EstimateArguments& e) {
  std::printf("\nconfigurations, fastest first (%s):\n", kRankingRule);
  std::printf("  %-5s %-8s %-13s %12s %16s %6s %s\n", "stage", "offload", "checkpointing",
              "GPU GiB", "host GiB / node", "fits", "largest micro-batch");
  for (const train::Candidate& c : estimate.ranked)
    std::printf(
        "  %-5d %-8s %-13s %12.3f %16.3f %6s %s\n", c.stage, c.offload.c_str(),
        c.gradient_checkpointing ? "yes" : "no", gib(c.fit.gpu_bytes), gib(c.fit.node_host_bytes),
        c.fit.fits() ? "yes" : "no",
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
  train::TrainingArguments& a =
      flags.values().training;  // Hugging Face's defaults, as `zero train`
  a.dry_run = true;
  a.given_flags = flags.given_names();
  const train::EstimateArguments& e = flags.values().estimate;
  check_flags(a, e);
  const train::Hardware hardware = hardware_of(e);
  Estimate estimate;
  try {
    for (const std::string& line : train::resolve_hub_names(a, process_environment()))
      std::cerr << "zero estimate: from the Hugging Face cache: " << line << "\n";
    // The config precedence rule (zero/train/config_precedence.h), as `zero train` applies it.
    for (const std::string& line :
         train::apply_config_precedence(a, std::int64_t{e.num_gpus_per_node} * e.num_nodes))
      std::cerr << "zero estimate: from the DeepSpeed config: " << line << "\n";
    estimate = estimate_of(a, e, hardware);
  } catch (const train::InputError& error) {
    std::cerr << "zero estimate: error: " << error.what() << "\n";
    return 2;
  }
  if (e.json) {
    print_json(estimate, hardware, e);
  } else {
    print_plan(estimate, hardware);
    print_configurations(estimate, e);
  }
  return 0;
}

}  // namespace zero::cli
