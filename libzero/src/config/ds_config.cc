// resolve_config and load_config_file: one pass over the JSON collecting every error at once.
#include "zero/config/ds_config.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "auto_fill.h"
#include "zero/core/error.h"

namespace zero::config {

namespace {

using detail::Diagnostics;
using detail::Json;
using detail::ObjectReader;
using detail::Strictness;

// Top-level keys DeepSpeed reads that zero accepts without using, with DeepSpeed's defaults.
void ignore_top_level(ObjectReader& top) {
  top.mark_known("zero_allow_untested_optimizer");  // every zero optimizer is a tested one
  top.ignore_unless_default("zero_force_ds_cpu_optimizer", true);
  top.ignore_unless_default("memory_breakdown", false);
  top.ignore_unless_default("dump_state", false);
  top.ignore_unless_default("disable_allgather", false);
  top.ignore_unless_default("sparse_gradients", false);
  top.ignore_unless_default("dataloader_drop_last", false);
  top.ignore_unless_default("graph_harvesting", false);
  top.ignore_unless_default("use_data_before_expert_parallelism", false);
  top.ignore_unless_default("vocabulary_size", nullptr);
  top.ignore_unless_default("sequence_parallel_size", 1);
  top.ignore_unless_default("seq_parallel_comm_data_type", "fp32");
}

void validate(const DeepSpeedConfig& config, Diagnostics& diagnostics) {
  const int stage = config.zero_optimization.stage;
  if (config.fp16.enabled && config.bf16.enabled)
    diagnostics.errors.push_back("fp16.enabled: fp16 and bf16 cannot both be enabled");
  if (config.fp16.fp16_master_weights_and_grads && stage == 0)
    diagnostics.errors.push_back("fp16.fp16_master_weights_and_grads: needs ZeRO stage 1, 2 or 3");
  if (config.bf16.bf16_master_weights_and_grads && stage == 0)
    diagnostics.errors.push_back("bf16.bf16_master_weights_and_grads: needs ZeRO stage 1, 2 or 3");
  if (config.bf16.bf16_optimizer_states) {
    if (stage == 0)
      diagnostics.errors.push_back("bf16.bf16_optimizer_states: needs ZeRO stage 1, 2 or 3");
    if (!config.bf16.bf16_master_weights_and_grads)
      diagnostics.errors.push_back(
          "bf16.bf16_optimizer_states: needs bf16.bf16_master_weights_and_grads true");
  }
}

std::string error_report(std::string_view source_name, const std::vector<std::string>& errors) {
  std::string message = std::string(source_name) + ": " + std::to_string(errors.size()) +
                        (errors.size() == 1 ? " error" : " errors") + " in the DeepSpeed config:";
  for (const std::string& error : errors) message += "\n  - " + error;
  return message;
}

}  // namespace

ConfigResult resolve_config(std::string_view json_text, const TrainerValues& trainer,
                            std::string_view source_name) {
  Json root = detail::parse_json(json_text, source_name);
  if (!root.is_object())
    ZERO_THROW(source_name, ": expected a JSON object at the top level, got ", root.type_name(),
               " ", detail::describe(root));
  Diagnostics diagnostics;
  DeepSpeedConfig config;
  if (trainer.world_size && *trainer.world_size < 1)
    ZERO_THROW(source_name, ": world_size must be at least 1, got ", *trainer.world_size);
  if (trainer.hidden_size && (*trainer.hidden_size < 1 || *trainer.hidden_size > (1 << 30)))
    ZERO_THROW(source_name, ": hidden_size must be in [1, 2^30], got ", *trainer.hidden_size);
  config.world_size = trainer.world_size.value_or(1);
  detail::fill_auto(root, trainer, config.world_size, diagnostics);

  ObjectReader top(root, "", diagnostics, Strictness::kLenient);
  detail::resolve_batch(top, diagnostics, config);
  top.read("gradient_clipping", config.gradient_clipping, 0.0);
  if (const Json* steps = top.find("steps_per_print"); steps != nullptr && !steps->is_null()) {
    std::int64_t value = 0;
    if (top.read("steps_per_print", value, 1)) config.steps_per_print = value;
  }
  top.read("prescale_gradients", config.prescale_gradients);
  top.read("gradient_predivide_factor", config.gradient_predivide_factor, 1e-30);
  top.read("wall_clock_breakdown", config.wall_clock_breakdown);
  detail::read_precision(top, diagnostics, config.fp16, config.bf16);
  detail::read_optimizer(top, diagnostics, config.optimizer);
  detail::read_scheduler(top, diagnostics, config.optimizer, config.scheduler);
  detail::read_zero_optimization(top, diagnostics, config.zero_optimization);
  detail::read_aio(top, diagnostics, config.aio);
  detail::read_misc_sections(top, diagnostics, config);
  ignore_top_level(top);
  top.finish();
  validate(config, diagnostics);
  if (!diagnostics.errors.empty())
    throw ConfigError(error_report(source_name, diagnostics.errors), diagnostics.errors);
  return ConfigResult{std::move(config), std::move(diagnostics.warnings)};
}

ConfigResult load_config_file(const std::filesystem::path& path, const TrainerValues& trainer) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status))
    ZERO_THROW(path.string(), ": no such DeepSpeed config file");
  if (std::filesystem::is_directory(status))
    ZERO_THROW(path.string(), ": is a directory, not a DeepSpeed config file");
  std::ifstream file(path, std::ios::binary);
  if (!file) ZERO_THROW(path.string(), ": cannot be read (check its permissions)");
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) ZERO_THROW(path.string(), ": read failed");
  return resolve_config(contents.str(), trainer, path.string());
}

std::string_view name_of(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
    case OffloadDevice::kNone: break;
  }
  return "none";
}

std::string_view name_of(OptimizerType type) {
  switch (type) {
    case OptimizerType::kAdam: return "Adam";
    case OptimizerType::kAdamW: return "AdamW";
    case OptimizerType::kSgd: return "SGD";
    case OptimizerType::kLamb: return "Lamb";
    case OptimizerType::kNone: break;
  }
  return "none";
}

std::string_view name_of(SchedulerType type) {
  switch (type) {
    case SchedulerType::kWarmupLR: return "WarmupLR";
    case SchedulerType::kWarmupDecayLR: return "WarmupDecayLR";
    case SchedulerType::kWarmupCosineLR: return "WarmupCosineLR";
    case SchedulerType::kOneCycle: return "OneCycle";
    case SchedulerType::kLRRangeTest: return "LRRangeTest";
    case SchedulerType::kNone: break;
  }
  return "none";
}

OptimizerType optimizer_type_from_name(std::string_view name) {
  std::string key(name);
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (OptimizerType type :
       {OptimizerType::kAdam, OptimizerType::kAdamW, OptimizerType::kSgd, OptimizerType::kLamb}) {
    std::string known(name_of(type));
    std::transform(known.begin(), known.end(), known.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (key == known) return type;
  }
  ZERO_THROW("unknown optimizer.type '", name, "'; known: Adam, AdamW, SGD, Lamb");
}

SchedulerType scheduler_type_from_name(std::string_view name) {
  if (name.empty()) return SchedulerType::kNone;
  for (SchedulerType type :
       {SchedulerType::kWarmupLR, SchedulerType::kWarmupDecayLR, SchedulerType::kWarmupCosineLR,
        SchedulerType::kOneCycle, SchedulerType::kLRRangeTest})
    if (name == name_of(type)) return type;
  ZERO_THROW("unknown scheduler.type '", name,
             "'; known: WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest");
}

WarmupType warmup_type_from_name(std::string_view name) {
  if (name == "log") return WarmupType::kLog;
  if (name == "linear") return WarmupType::kLinear;
  ZERO_THROW("scheduler.params.warmup_type '", name, "' is not 'log' or 'linear'");
}

}  // namespace zero::config
