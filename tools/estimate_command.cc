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
#include "zero/core/error.h"
#include "zero/train/arguments.h"
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

}  // namespace

int run_estimate(std::span<char* const> args) {
  train::TrainingArguments a;  // Hugging Face's defaults, as `zero train`
  a.dry_run = true;
  std::string params_text, largest_text, gpu_memory = "80GiB", cpu_memory = "0";
  std::string offload_optimizer = "none", offload_param = "none";
  int stage = -1, gpus_per_node = 1, nodes = 1;
  double buffer_factor = 1.5;
  train::GpuAllowance allowance;
  double context_mib = static_cast<double>(allowance.cuda_context >> 20);
  double cublas_mib = static_cast<double>(allowance.cublas_workspace >> 20);
  double cudnn_mib = static_cast<double>(allowance.cudnn_workspace >> 20);
  double nccl_mib = static_cast<double>(allowance.nccl >> 20);
  po::options_description options("Options");
  // clang-format off
  options.add_options()
      ("help,h", "print this help")
      ("model_name_or_path", po::value(&a.model_name_or_path),
       "a folder with a Hugging Face GPT-2 config.json (weights are not read)")
      ("config_overrides", po::value(&a.config_overrides),
       "GPT-2 124M's shape changed: \"n_embd=4096,n_layer=32,n_head=32,n_positions=2048\"")
      ("tokenizer_name", po::value(&a.tokenizer_name), "from scratch: the vocabulary of this tokenizer")
      ("params", po::value(&params_text),
       "instead of a model: total parameters (e.g. 7e9); activations are then not planned")
      ("largest_layer_params", po::value(&largest_text),
       "with --params: the largest layer's parameters (the engine's largest unit)")
      ("num_gpus_per_node", po::value(&gpus_per_node)->default_value(1), "")
      ("num_nodes", po::value(&nodes)->default_value(1), "")
      ("gpu_memory", po::value(&gpu_memory)->default_value(gpu_memory),
       "per GPU: GiB, or with a unit (GiB, GB, MiB, MB, TiB, TB)")
      ("cpu_memory", po::value(&cpu_memory)->default_value(cpu_memory),
       "per node, as --gpu_memory; 0: not checked")
      ("per_device_train_batch_size", po::value(&a.per_device_train_batch_size)->default_value(a.per_device_train_batch_size), "")
      ("block_size", po::value(&a.block_size), "tokens per sample (default min(1024, n_positions))")
      ("gradient_accumulation_steps", po::value(&a.gradient_accumulation_steps)->default_value(a.gradient_accumulation_steps), "")
      ("gradient_checkpointing", "recompute each block's activations in backward")
      ("deepspeed", po::value(&a.deepspeed), "a DeepSpeed JSON config (else the options below)")
      ("zero_stage", po::value(&stage), "without --deepspeed: the ZeRO stage (default 0)")
      ("offload_optimizer", po::value(&offload_optimizer)->default_value(offload_optimizer),
       "without --deepspeed: none, cpu or nvme")
      ("offload_param", po::value(&offload_param)->default_value(offload_param),
       "without --deepspeed: none, cpu or nvme (stage 3)")
      ("bf16", "bf16 compute (fills bf16 \"auto\")")
      ("fp16", "fp16 compute (fills fp16 \"auto\")")
      ("cuda_context_mib", po::value(&context_mib)->default_value(context_mib),
       "GPU allowance: the CUDA context (docs/planner.md)")
      ("cublas_workspace_mib", po::value(&cublas_mib)->default_value(cublas_mib),
       "GPU allowance: cuBLAS workspace")
      ("cudnn_workspace_mib", po::value(&cudnn_mib)->default_value(cudnn_mib),
       "GPU allowance: cuDNN workspace")
      ("nccl_mib", po::value(&nccl_mib)->default_value(nccl_mib), "GPU allowance: NCCL buffers")
      ("deepspeed_compat",
       "also print DeepSpeed 0.19's estimate_zero2/3_model_states_mem_needs_all_cold tables")
      ("additional_buffer_factor", po::value(&buffer_factor)->default_value(buffer_factor),
       "--deepspeed_compat: DeepSpeed's factor on CPU memory")
      ("json", "print one JSON object instead of tables");
  // clang-format on
  const auto variables = parse(args, options);
  if (variables.count("help")) {
    std::cout << usage("estimate",
                       "Plans a training run's memory per rank with the trainer's own allocation "
                       "sequence (nothing is\nallocated): per GPU and per node by category, the "
                       "peak, whether it fits, the largest micro-batch\nthat fits, and the "
                       "configurations (stage x offload x checkpointing) that fit, fastest first.",
                       options);
    return 0;
  }
  a.bf16 = variables.count("bf16") > 0;
  a.fp16 = variables.count("fp16") > 0;
  a.gradient_checkpointing = variables.count("gradient_checkpointing") > 0;
  const bool as_json = variables.count("json") > 0;
  const bool by_counts = !params_text.empty();
  if (by_counts && (!a.model_name_or_path.empty() || !a.config_overrides.empty()))
    throw UsageError{
        "give a model (--model_name_or_path, --config_overrides) or --params, not both"};
  if (!largest_text.empty() && !by_counts)
    throw UsageError{"--largest_layer_params goes with --params"};
  if (by_counts && largest_text.empty())
    throw UsageError{
        "--params needs --largest_layer_params (the engine gathers and sizes "
        "buffers by unit)"};
  if (gpus_per_node < 1) throw UsageError{"--num_gpus_per_node must be at least 1"};
  if (nodes < 1) throw UsageError{"--num_nodes must be at least 1"};
  if (!a.deepspeed.empty() &&
      (stage >= 0 || offload_optimizer != "none" || offload_param != "none"))
    throw UsageError{"give --deepspeed or --zero_stage/--offload_*, not both"};
  for (const std::string* device : {&offload_optimizer, &offload_param})
    if (*device != "none" && *device != "cpu" && *device != "nvme")
      throw UsageError{"--offload_optimizer/--offload_param: '" + *device +
                       "' is not none, cpu or nvme"};
  if (stage > 3) throw UsageError{"--zero_stage must be 0, 1, 2 or 3"};
  train::Hardware hardware;
  hardware.gpus_per_node = gpus_per_node;
  hardware.nodes = nodes;
  hardware.gpu_memory = parse_size("gpu_memory", gpu_memory);
  hardware.cpu_memory = parse_size("cpu_memory", cpu_memory);
  hardware.allowance.cuda_context = static_cast<std::int64_t>(context_mib * 1048576.0);
  hardware.allowance.cublas_workspace = static_cast<std::int64_t>(cublas_mib * 1048576.0);
  hardware.allowance.cudnn_workspace = static_cast<std::int64_t>(cudnn_mib * 1048576.0);
  hardware.allowance.nccl = static_cast<std::int64_t>(nccl_mib * 1048576.0);
  const int world = hardware.world_size();

  std::string deepspeed_json;
  if (a.deepspeed.empty()) {
    json config = {{"train_micro_batch_size_per_gpu", "auto"},
                   {"gradient_accumulation_steps", "auto"},
                   {"gradient_clipping", "auto"},
                   {"bf16", {{"enabled", "auto"}}},
                   {"fp16", {{"enabled", "auto"}}},
                   {"zero_optimization", {{"stage", std::max(stage, 0)}}}};
    if (offload_optimizer != "none")
      config["zero_optimization"]["offload_optimizer"] = {{"device", offload_optimizer}};
    if (offload_param != "none")
      config["zero_optimization"]["offload_param"] = {{"device", offload_param}};
    deepspeed_json = config.dump();
  }

  train::PlanSetup setup;
  std::int64_t total_params = 0, largest = 0;
  try {
    if (by_counts) {
      total_params = parse_count("params", params_text);
      largest = parse_count("largest_layer_params", largest_text);
      setup = train::plan_setup_from_counts(a, total_params, largest, world, deepspeed_json);
    } else {
      setup = train::plan_setup(a, world, deepspeed_json);
      total_params = setup.model->num_parameters();
      largest = train::deepspeed_largest_layer_params(*setup.model);
    }
  } catch (const train::InputError& error) {
    std::cerr << "zero estimate: error: " << error.what() << "\n";
    return 2;
  }
  train::RankPlan plan;
  std::vector<train::Candidate> ranked;
  std::int64_t max_batch = 0;
  try {
    plan = train::plan_rank(setup, world, 0);
    max_batch = train::largest_fitting_batch(
        setup, hardware, std::max<std::int64_t>(1, (std::int64_t{1} << 22) / setup.seq_len));
    ranked = train::rank_configurations(setup, hardware);
  } catch (const train::InputError& error) {
    std::cerr << "zero estimate: error: " << error.what() << "\n";
    return 2;
  }
  const train::Fit fit = train::fit_of(plan, hardware);
  const bool compat = variables.count("deepspeed_compat") > 0;
  const std::string rule =
      "no offload before host offload before NVMe offload, no gradient checkpointing before "
      "checkpointing (+1 forward "
      "per step), then communication volume (stages 0-2: 2 Psi per step, stage 3: 3 Psi), then "
      "the lower stage";

  if (as_json) {
    json out;
    out["model"] = {{"parameters", plan.parameters},
                    {"padded_parameters", plan.padded_parameters},
                    {"largest_layer_params", largest},
                    {"from", by_counts ? "params" : "gpt2_config"}};
    if (setup.model) out["model"]["config"] = json::parse(setup.model->to_json_text());
    out["hardware"] = {{"num_gpus_per_node", gpus_per_node},
                       {"num_nodes", nodes},
                       {"gpu_memory", hardware.gpu_memory},
                       {"cpu_memory", hardware.cpu_memory},
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
        {"gradient_checkpointing", setup.gradient_checkpointing}};
    out["gpu_rank"] = {
        {"spaces", peaks_json(plan.peaks)}, {"total_bytes", fit.gpu_bytes}, {"fits", fit.gpu_fits}};
    out["host_per_node"] = {{"bytes", fit.node_host_bytes}, {"fits", fit.host_fits}};
    out["model_states_formula_bytes"] = plan.model_states.total();
    out["fits"] = fit.fits();
    out["largest_micro_batch"] = max_batch;
    out["ranking_rule"] = rule;
    json candidates = json::array();
    for (const train::Candidate& c : ranked)
      candidates.push_back({{"stage", c.stage},
                            {"offload", c.offload},
                            {"gradient_checkpointing", c.gradient_checkpointing},
                            {"gpu_bytes", c.fit.gpu_bytes},
                            {"host_bytes_per_node", c.fit.node_host_bytes},
                            {"fits", c.fit.fits()},
                            {"largest_micro_batch", c.max_batch_size}});
    out["configurations"] = candidates;
    if (compat) {
      out["deepspeed_compat"] = {
          {"zero2", rows_json(train::deepspeed_zero2_rows(static_cast<double>(total_params),
                                                          gpus_per_node, nodes, buffer_factor))},
          {"zero3", rows_json(train::deepspeed_zero3_rows(static_cast<double>(total_params),
                                                          static_cast<double>(largest),
                                                          gpus_per_node, nodes, buffer_factor))}};
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  std::printf(
      "zero estimate: %lld parameters (%s), %d node(s) x %d GPU(s) of %.2f GiB, host %s "
      "per node\n",
      static_cast<long long>(plan.parameters),
      by_counts ? "--params; activations not planned"
                : ("GPT-2 " + std::to_string(setup.model->n_layer) + " layers, width " +
                   std::to_string(setup.model->n_embd))
                      .c_str(),
      nodes, gpus_per_node, gib(hardware.gpu_memory),
      hardware.cpu_memory > 0 ? gib_text(hardware.cpu_memory).c_str() : "not checked");
  if (by_counts) {
    std::printf(
        "configuration: ZeRO stage %d, %d accumulation step(s); %lld parameters in units "
        "of at most %lld, no activations\n",
        setup.engine.stage, setup.engine.gradient_accumulation_steps,
        static_cast<long long>(total_params), static_cast<long long>(largest));
  } else {
    std::printf(
        "configuration: ZeRO stage %d, micro-batch %lld x %lld tokens, %d accumulation "
        "step(s)%s\n",
        setup.engine.stage, static_cast<long long>(setup.batch_size),
        static_cast<long long>(setup.seq_len), setup.engine.gradient_accumulation_steps,
        setup.gradient_checkpointing ? ", gradient checkpointing" : "");
  }
  for (const std::string& warning : setup.warnings) std::printf("config: %s\n", warning.c_str());
  std::printf("\nGPU rank (each of %d): %s", world,
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
  if (max_batch >= 0)
    std::printf("largest micro-batch that fits: %lld (of %lld tokens)\n",
                static_cast<long long>(max_batch), static_cast<long long>(setup.seq_len));
  std::printf("\nconfigurations, fastest first (%s):\n", rule.c_str());
  std::printf("  %-5s %-8s %-13s %12s %16s %6s %s\n", "stage", "offload", "checkpointing",
              "GPU GiB", "host GiB / node", "fits", "largest micro-batch");
  for (const train::Candidate& c : ranked)
    std::printf(
        "  %-5d %-8s %-13s %12.3f %16.3f %6s %s\n", c.stage, c.offload.c_str(),
        c.gradient_checkpointing ? "yes" : "no", gib(c.fit.gpu_bytes), gib(c.fit.node_host_bytes),
        c.fit.fits() ? "yes" : "no",
        c.max_batch_size < 0 ? "n/a (no activations)" : std::to_string(c.max_batch_size).c_str());
  if (compat) {
    std::printf(
        "\nDeepSpeed 0.19's estimators (model states only, P = %lld, largest layer %lld):\n",
        static_cast<long long>(total_params), static_cast<long long>(largest));
    std::printf("%s", train::deepspeed_zero2_text(static_cast<double>(total_params), gpus_per_node,
                                                  nodes, buffer_factor)
                          .c_str());
    std::printf("%s", train::deepspeed_zero3_text(static_cast<double>(total_params),
                                                  static_cast<double>(largest), gpus_per_node,
                                                  nodes, buffer_factor)
                          .c_str());
  }
  return 0;
}

}  // namespace zero::cli
