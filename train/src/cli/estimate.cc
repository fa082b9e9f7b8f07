// `zero estimate` as a library call: the flags checked, the hardware read, rank 0 planned, its fit,
// the largest fitting micro-batch and the ranked configurations; and the JSON of `--json`.
#include "zero/train/estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "zero/core/launch.h"
#include "zero/gpt2/family.h"
#include "zero/train/cli.h"
#include "zero/train/hub_cache.h"
#include "zero/train/input_error.h"
#include "zero/train/run_config.h"

namespace zero::train {

namespace {

using cli::UsageError;
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
  // (A value past int64's range would convert to a negative size: "not checked".)
  if (value * scale >= 9.2e18)
    throw UsageError{"--" + flag + ": '" + text + "' is too large (a bare number is GiB)"};
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

json peaks_json(const MemoryPeaks& peaks) {
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

json rows_json(const std::vector<DeepSpeedEstimateRow>& rows) {
  json out = json::array();
  for (const auto& row : rows)
    out.push_back({{"per_cpu_bytes", row.cpu_bytes},
                   {"per_gpu_bytes", row.gpu_bytes},
                   {"options", row.options}});
  return out;
}

// The usage errors of estimate's own flags, in the order they are checked.
void check_flags(const TrainingArguments& a, const EstimateArguments& e) {
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

Hardware hardware_of(const EstimateArguments& e) {
  Hardware hardware;
  hardware.gpus_per_node = e.num_gpus_per_node;
  hardware.nodes = e.num_nodes;
  hardware.gpu_memory = parse_size("gpu_memory", e.gpu_memory);
  hardware.cpu_memory = parse_size("cpu_memory", e.cpu_memory);
  if (e.nvme_memory != "auto") hardware.nvme_memory = parse_size("nvme_memory", e.nvme_memory);
  hardware.allowance.cuda_context = static_cast<std::int64_t>(e.cuda_context_mib * 1048576.0);
  hardware.allowance.cublas_workspace =
      static_cast<std::int64_t>(e.cublas_workspace_mib * 1048576.0);
  hardware.allowance.cudnn_workspace = static_cast<std::int64_t>(e.cudnn_workspace_mib * 1048576.0);
  hardware.allowance.nccl = static_cast<std::int64_t>(e.nccl_mib * 1048576.0);
  return hardware;
}

// Without --deepspeed: the config --zero_stage and --offload_* describe, "auto" filled from the
// flags as `zero train` fills it. With --deepspeed: "" (the file is read).
std::string deepspeed_json_of(const TrainingArguments& a, const EstimateArguments& e) {
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

// Throws InputError for a model or config the planner cannot read.
Estimate estimate_of(const RunConfig& run, const EstimateArguments& e, const Hardware& hardware) {
  const TrainingArguments& a = run.arguments;
  Estimate estimate;
  estimate.hardware = hardware;
  estimate.by_counts = !e.params.empty();
  const int world = hardware.world_size();
  if (estimate.by_counts) {
    estimate.total_params = parse_count("params", e.params);
    estimate.largest = parse_count("largest_layer_params", e.largest_layer_params);
    estimate.setup =
        plan_setup(run, planned_from_counts(a, estimate.total_params, estimate.largest));
  } else {
    estimate.setup = plan_setup(run);
    estimate.total_params = estimate.setup.model->num_parameters();
    estimate.largest = deepspeed_largest_layer_params(*estimate.setup.model);
  }
  // The ranks this estimate describes: GPUs (--num_gpus_per_node of --gpu_memory), planned with
  // the CUDA kernels' activation layout wherever the estimate runs (a login node without a GPU
  // plans the cluster's ranks, not its own CPU's), or CPU ranks with --use_cpu. `zero train
  // --dry_run` plans the device the trainer would pick instead (choose_device).
  estimate.setup.device_is_host = a.use_cpu;
  if (!estimate.by_counts) {
    estimate.fewest_recompute_blocks = smallest_recompute_blocks(
        estimate.setup, world,
        // The device's bytes decide (as zero train's auto): a host or disk shortfall is not
        // recompute's to fix, and the verdicts below name it.
        [&hardware, &a](int, const RankPlan& plan) {
          const Fit fit = fit_of(plan, hardware);
          return a.use_cpu ? fit.fits() : fit.gpu_fits;
        });
    if (a.recompute_blocks == "auto")
      estimate.setup.recompute_blocks = estimate.fewest_recompute_blocks >= 0
                                            ? estimate.fewest_recompute_blocks
                                            : static_cast<int>(estimate.setup.model->n_layer);
  }
  estimate.plan = plan_rank(estimate.setup, world, 0);
  estimate.max_batch = largest_fitting_batch(
      estimate.setup, hardware,
      std::max<std::int64_t>(1, (std::int64_t{1} << 22) / estimate.setup.seq_len));
  estimate.ranked = rank_configurations(estimate.setup, hardware);
  estimate.fit = fit_of(estimate.plan, hardware);
  measure_baseline(estimate.plan,
                   "VmRSS of this planning process: the libraries, no data, no peers; "
                   "zero train measures its own before the engine allocates");
  estimate.node_checked = hardware.cpu_memory > 0;
  estimate.node.total_source = "--cpu_memory";
  estimate.node.total_bytes =
      estimate.node_checked ? hardware.cpu_memory : std::numeric_limits<std::int64_t>::max();
  estimate.node_fit = node_fit(estimate.plan, hardware.gpus_per_node, estimate.node, false);
  if (!estimate.node_fit.fits)
    estimate.proposal = propose_fit(estimate.setup, world, hardware.gpus_per_node, estimate.node,
                                    false, estimate.plan.baseline_bytes);
  return estimate;
}

}  // namespace

const char* const kRankingRule =
    "no offload before host offload (a partial one, cpu:RATIO, first) before NVMe offload "
    "(cpu:RATIO,pn: the parameters on NVMe), no gradient checkpointing before "
    "checkpointing (+1 forward "
    "per step), then communication volume (stages 0-2: 2 Psi per step, stage 3: 3 Psi), then "
    "the lower stage";

Estimate estimate_run(TrainingArguments& a, const EstimateArguments& e,
                      std::vector<std::string>& notes) {
  check_flags(a, e);
  Hardware hardware = hardware_of(e);
  for (const std::string& line : resolve_hub_names(a, process_environment()))
    notes.push_back("from the Hugging Face cache: " + line);
  // The run's configuration, resolved as `zero train` resolves it (zero/train/run_config.h).
  const RunConfig run = make_run_config(a, hardware.world_size(), deepspeed_json_of(a, e),
                                        /*model_from_flags=*/e.params.empty());
  for (const std::string& line : run.from_file)
    notes.push_back("from the DeepSpeed config: " + line);
  a = run.arguments;
  // --nvme_memory auto: the disk under the config's NVMe folder, where this machine has it.
  std::string nvme_source = hardware.nvme_memory > 0 ? "--nvme_memory" : "";
  const EngineOptions& options = run.engine.options;
  using config::OffloadDevice;
  const std::string& nvme_path = options.offload_param.device == OffloadDevice::kNvme
                                     ? options.offload_param.nvme_path
                                 : options.offload_optimizer.device == OffloadDevice::kNvme
                                     ? options.offload_optimizer.nvme_path
                                     : std::string();
  if (e.nvme_memory == "auto" && !nvme_path.empty())
    if (const std::optional<std::int64_t> free = free_bytes_under(nvme_path)) {
      hardware.nvme_memory = *free;
      nvme_source = "free under " + nvme_path;
    }
  Estimate estimate = estimate_of(run, e, hardware);
  estimate.nvme_source = nvme_source;
  return estimate;
}

std::string Estimate::fits_budget() const {
  char text[160];
  std::snprintf(text, sizeof(text), "%.2f GiB per GPU (--gpu_memory); ",
                static_cast<double>(hardware.gpu_memory) / (1ll << 30));
  std::string nvme_text;
  if (hardware.nvme_memory > 0) {
    char nvme[64];
    std::snprintf(nvme, sizeof(nvme), "; %.2f GiB of NVMe per node (",
                  static_cast<double>(hardware.nvme_memory) / (1ll << 30));
    nvme_text = nvme + nvme_source + ")";
  }
  if (!node_checked)
    return text + std::string("node memory not checked (--cpu_memory not given)") + nvme_text;
  char node_text[96];
  std::snprintf(node_text, sizeof(node_text), "%.2f GiB per node (--cpu_memory)",
                static_cast<double>(hardware.cpu_memory) / (1ll << 30));
  return text + std::string(node_text) + nvme_text;
}

std::string Estimate::node_message() const {
  if (node_checked) return node_fit.message();
  char needed[64];
  std::snprintf(needed, sizeof(needed), "%.3f GiB",
                static_cast<double>(node_fit.needed_bytes) / (1ll << 30));
  return "not checked: --cpu_memory (the planned node's memory) not given; the largest phase, " +
         std::string(name_of(node_fit.phase)) + ", needs " + needed + " (" +
         std::to_string(node_fit.ranks_per_node) + " rank(s))";
}

std::string estimate_json(const Estimate& estimate, const EstimateArguments& e) {
  const RankPlan& plan = estimate.plan;
  const PlanSetup& setup = estimate.setup;
  const Fit& fit = estimate.fit;
  const Hardware& hardware = estimate.hardware;
  json out;
  out["model"] = {{"parameters", plan.parameters},
                  {"padded_parameters", plan.padded_parameters},
                  {"largest_layer_params", estimate.largest},
                  {"from", "params"}};
  if (setup.model) {  // "gpt2_config", "llama_config", ...: config.json's model_type
    const std::string model_type(gpt2::family_spec(setup.model->family).model_type);
    out["model"]["from"] = model_type + "_config";
    out["model"]["family"] = model_type;
  }
  if (setup.model) out["model"]["config"] = json::parse(setup.model->to_json_text());
  out["hardware"] = {{"num_gpus_per_node", e.num_gpus_per_node},
                     {"num_nodes", e.num_nodes},
                     {"gpu_memory", hardware.gpu_memory},
                     {"cpu_memory", hardware.cpu_memory},
                     {"nvme_memory", hardware.nvme_memory},
                     {"allowance",
                      {{"cuda_context", hardware.allowance.cuda_context},
                       {"cublas_workspace", hardware.allowance.cublas_workspace},
                       {"cudnn_workspace", hardware.allowance.cudnn_workspace},
                       {"nccl", hardware.allowance.nccl}}}};
  out["configuration"] = {
      {"stage", setup.engine.stage},
      {"micro_batch", setup.batch_size},
      {"seq_len", setup.seq_len},
      {"gradient_accumulation_steps", setup.engine.gradient_accumulation_steps},
      {"gradient_checkpointing", setup.gradient_checkpointing},
      {"recompute_blocks", setup.gradient_checkpointing && setup.model ? setup.model->n_layer
                                                                       : setup.recompute_blocks}};
  out["fewest_recompute_blocks"] = estimate.fewest_recompute_blocks;
  out["gpu_rank"] = {
      {"spaces", peaks_json(plan.peaks)}, {"total_bytes", fit.gpu_bytes}, {"fits", fit.gpu_fits}};
  out["host_per_node"] = {{"bytes", fit.node_host_bytes}, {"fits", fit.host_fits}};
  out["nvme_per_node"] = {{"bytes", fit.node_nvme_bytes},
                          {"fits", fit.nvme_fits},
                          {"checked", hardware.nvme_memory > 0},
                          {"budget_from", estimate.nvme_source}};
  out["model_states_formula_bytes"] = plan.model_states.total();
  json phases = json::object();
  for (std::size_t p = 0; p < kNumPhases; ++p) {
    const auto phase = static_cast<Phase>(p);
    const RankPlan::PhasePeak& peak = plan.phase(phase);
    if (!peak.runs) continue;
    json spaces = json::object();
    for (std::size_t space = 0; space < kNumMemorySpaces; ++space)
      spaces[std::string(name_of(static_cast<MemorySpace>(space)))] = peak.reserved[space];
    phases[std::string(name_of(phase))] = {
        {"reserved", spaces},
        {"outside_ledger_host_bytes", peak.outside_host_bytes},
        {"resident_host_bytes", planned_resident_bytes(plan, phase, false)}};
  }
  out["phases"] = phases;
  out["baseline_bytes"] = plan.baseline_bytes;
  out["node"] = {{"checked", estimate.node_checked},
                 {"bytes", estimate.node_checked ? json(estimate.node_fit.node_bytes) : json()},
                 {"needed_bytes", estimate.node_fit.needed_bytes},
                 {"fits", estimate.node_checked ? json(estimate.node_fit.fits) : json()},
                 {"message", estimate.node_message()}};
  if (estimate.proposal.found) out["node"]["fits_with"] = estimate.proposal.settings;
  out["fits"] = estimate.fits();
  out["fits_budget"] = estimate.fits_budget();
  out["largest_micro_batch"] = estimate.max_batch;
  out["ranking_rule"] = kRankingRule;
  json candidates = json::array();
  for (const Candidate& c : estimate.ranked)
    candidates.push_back({{"stage", c.stage},
                          {"offload", c.offload},
                          {"offload_optimizer_ratio", c.ratio},
                          {"sub_group_size", c.sub_group_size},
                          {"gradient_checkpointing", c.gradient_checkpointing},
                          {"gpu_bytes", c.fit.gpu_bytes},
                          {"host_bytes_per_node", c.fit.node_host_bytes},
                          {"nvme_bytes_per_node", c.fit.node_nvme_bytes},
                          {"fits", c.fit.fits()},
                          {"largest_micro_batch", c.max_batch_size}});
  out["configurations"] = candidates;
  if (e.deepspeed_compat) {
    const auto params = static_cast<double>(estimate.total_params);
    out["deepspeed_compat"] = {
        {"zero2", rows_json(deepspeed_zero2_rows(params, e.num_gpus_per_node, e.num_nodes,
                                                 e.additional_buffer_factor))},
        {"zero3", rows_json(deepspeed_zero3_rows(params, static_cast<double>(estimate.largest),
                                                 e.num_gpus_per_node, e.num_nodes,
                                                 e.additional_buffer_factor))}};
  }
  return out.dump(2);
}

std::string rank_plan_json(const RankPlan& plan) {
  const ModelStateBytes& states = plan.model_states;
  const json out = {{"rank", plan.rank},
                    {"world_size", plan.world_size},
                    {"parameters", plan.parameters},
                    {"padded_parameters", plan.padded_parameters},
                    {"collectives", plan.collectives},
                    {"load_host_bytes", plan.load_host_bytes},
                    {"save_host_bytes", plan.save_host_bytes},
                    {"spaces", peaks_json(plan.peaks)},
                    {"model_states",
                     {{"params", states.params},
                      {"param_shard", states.param_shard},
                      {"grads", states.grads},
                      {"grad_shard", states.grad_shard},
                      {"master_params", states.master_params},
                      {"optimizer_state", states.optimizer_state},
                      {"total", states.total()}}}};
  return out.dump(2);
}

}  // namespace zero::train
