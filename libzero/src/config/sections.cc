// fp16/bf16, aio, activation checkpointing, checkpoint, data types and the monitor sections.
#include <algorithm>
#include <cctype>
#include <string>

#include "auto_fill.h"

namespace zero::config::detail {

namespace {

// The object at `key` of `top`, or nullptr when absent or null; another type is an error.
const Json* find_section(ObjectReader& top, std::string_view key) {
  const Json* section = top.find(key);
  if (section == nullptr || section->is_null()) return nullptr;
  if (!section->is_object()) {
    top.error(key, "expected an object, got " + describe(*section));
    return nullptr;
  }
  return section;
}

void read_file_monitor(ObjectReader& top, Diagnostics& diagnostics, std::string_view key,
                       FileMonitorConfig& monitor) {
  const Json* section = find_section(top, key);
  if (section == nullptr) return;
  ObjectReader reader(*section, std::string(key), diagnostics, Strictness::kPydantic);
  reader.read("enabled", monitor.enabled);
  reader.read("output_path", monitor.output_path);
  reader.read("job_name", monitor.job_name);
  reader.finish();
}

void read_optional_string(ObjectReader& reader, std::string_view key,
                          std::optional<std::string>& out) {
  const Json* value = reader.find(key);
  if (value == nullptr || value->is_null()) return;
  std::string text;
  if (reader.read(key, text)) out = text;
}

// A dtype name as DeepSpeed's DtypeEnum accepts it ("fp16", "torch.float16", "half", ...).
void read_dtype(ObjectReader& reader, std::string_view key, std::optional<DType>& out) {
  const Json* value = reader.find(key);
  if (value == nullptr || value->is_null()) return;
  std::string text;
  if (!reader.read(key, text)) return;
  std::string name = text;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name.starts_with("torch.")) name = name.substr(6);
  if (name == "fp32" || name == "float32" || name == "float") {
    out = DType::kFloat32;
  } else if (name == "fp16" || name == "float16" || name == "half") {
    out = DType::kFloat16;
  } else if (name == "bf16" || name == "bfloat16") {
    out = DType::kBFloat16;
  } else {
    reader.error(key, "expected \"fp32\", \"fp16\" or \"bf16\", got \"" + text + "\"");
  }
}

// Top-level sections DeepSpeed knows that zero does not implement: a warning when present and
// not disabled ({"enabled": false}).
constexpr std::string_view kUnimplementedSections[] = {"sparse_attention",
                                                       "pipeline",
                                                       "flops_profiler",
                                                       "amp",
                                                       "torch_autocast",
                                                       "compression_training",
                                                       "autotuning",
                                                       "elasticity",
                                                       "comms_logger",
                                                       "curriculum_learning",
                                                       "data_efficiency",
                                                       "progressive_layer_drop",
                                                       "quantize_training",
                                                       "eigenvalue",
                                                       "hybrid_engine",
                                                       "nebula",
                                                       "datastates",
                                                       "compile",
                                                       "tensor_parallel",
                                                       "comet",
                                                       "trackio",
                                                       "timers",
                                                       "weight_quantization",
                                                       "expert_parallel"};

}  // namespace

void read_precision(ObjectReader& top, Diagnostics& diagnostics, Fp16Config& fp16,
                    Bf16Config& bf16) {
  if (const Json* section = find_section(top, "fp16")) {
    ObjectReader reader(*section, "fp16", diagnostics, Strictness::kPydantic);
    reader.read("enabled", fp16.enabled);
    reader.read("auto_cast", fp16.auto_cast);
    reader.read("loss_scale", fp16.loss_scale, 0.0);
    reader.read("initial_scale_power", fp16.initial_scale_power, 0, 127);
    reader.read("loss_scale_window", fp16.loss_scale_window, 1);
    reader.read("hysteresis", fp16.hysteresis, 1);
    reader.read("consecutive_hysteresis", fp16.consecutive_hysteresis);
    reader.read("min_loss_scale", fp16.min_loss_scale, 0);
    reader.read("fp16_master_weights_and_grads", fp16.fp16_master_weights_and_grads);
    reader.finish();
  }
  // DeepSpeed reads "bf16" and falls back to the old name "bfloat16" only when bf16 is absent.
  std::string_view key = "bf16";
  top.mark_known("bfloat16");
  if (!top.has("bf16") && top.has("bfloat16")) {
    key = "bfloat16";
    top.warn("bfloat16", "the old name of \"bf16\"; rename it");
  } else if (top.has("bf16") && top.has("bfloat16")) {
    top.warn("bfloat16", "ignored because \"bf16\" is given (as DeepSpeed does)");
  }
  if (const Json* section = find_section(top, key)) {
    ObjectReader reader(*section, std::string(key), diagnostics, Strictness::kPydantic);
    reader.read("enabled", bf16.enabled);
    reader.read("immediate_grad_update", bf16.immediate_grad_update);
    reader.read("check_grad_overflow", bf16.check_grad_overflow);
    reader.read("bf16_master_weights_and_grads", bf16.bf16_master_weights_and_grads);
    reader.read("bf16_optimizer_states", bf16.bf16_optimizer_states);
    reader.finish();
  }
}

void read_aio(ObjectReader& top, Diagnostics& diagnostics, AioConfig& aio) {
  const Json* section = find_section(top, "aio");
  if (section == nullptr) return;
  ObjectReader reader(*section, "aio", diagnostics, Strictness::kLenient);
  reader.read("block_size", aio.block_size, 1);
  reader.read("queue_depth", aio.queue_depth, 1);
  // thread_count is the old name; intra_op_parallelism wins when both are given.
  if (reader.has("thread_count")) {
    if (reader.has("intra_op_parallelism")) {
      reader.warn("thread_count",
                  "the old name of intra_op_parallelism; ignored because "
                  "intra_op_parallelism is given");
      reader.mark_known("thread_count");
    } else if (reader.read("thread_count", aio.intra_op_parallelism, 1)) {
      reader.warn("thread_count", "the old name of intra_op_parallelism; rename it");
    }
  }
  reader.mark_known("thread_count");
  reader.read("intra_op_parallelism", aio.intra_op_parallelism, 1);
  reader.read("single_submit", aio.single_submit);
  reader.read("overlap_events", aio.overlap_events);
  reader.read("use_gds", aio.use_gds);
  reader.ignore_unless_default("io_backend", "async_io");
  reader.finish();
}

void read_misc_sections(ObjectReader& top, Diagnostics& diagnostics, DeepSpeedConfig& config) {
  if (const Json* section = find_section(top, "activation_checkpointing")) {
    ActivationCheckpointingConfig& checkpointing = config.activation_checkpointing;
    ObjectReader reader(*section, "activation_checkpointing", diagnostics, Strictness::kLenient);
    reader.read("partition_activations", checkpointing.partition_activations);
    reader.read("contiguous_memory_optimization", checkpointing.contiguous_memory_optimization);
    reader.read("cpu_checkpointing", checkpointing.cpu_checkpointing);
    if (const Json* count = reader.find("number_checkpoints");
        count != nullptr && !count->is_null()) {
      std::int64_t value = 0;
      if (reader.read("number_checkpoints", value, 0)) checkpointing.number_checkpoints = value;
    }
    reader.read("synchronize_checkpoint_boundary", checkpointing.synchronize_checkpoint_boundary);
    reader.read("profile", checkpointing.profile);
    reader.finish();
  }
  if (const Json* section = find_section(top, "checkpoint")) {
    CheckpointConfig& checkpoint = config.checkpoint;
    ObjectReader reader(*section, "checkpoint", diagnostics, Strictness::kLenient);
    std::string mode = checkpoint.tag_validation;
    if (reader.read("tag_validation", mode)) {
      std::transform(mode.begin(), mode.end(), mode.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      if (mode == "WARN" || mode == "IGNORE" || mode == "FAIL")
        checkpoint.tag_validation = mode;
      else
        reader.error("tag_validation",
                     "expected \"Warn\", \"Ignore\" or \"Fail\", got \"" + mode + "\"");
    }
    reader.read("load_universal", checkpoint.load_universal);
    reader.read("use_node_local_storage", checkpoint.use_node_local_storage);
    if (const Json* parallel = reader.find("parallel_write");
        parallel != nullptr && !parallel->is_null()) {
      if (!parallel->is_object()) {
        reader.error("parallel_write", "expected an object, got " + describe(*parallel));
      } else {
        ObjectReader inner(*parallel, "checkpoint.parallel_write", diagnostics,
                           Strictness::kLenient);
        inner.read("pipeline_stage", checkpoint.parallel_write_pipeline_stage);
        inner.finish();
      }
    }
    reader.ignore_unless_default("writer", nullptr);
    reader.finish();
  }
  if (const Json* section = find_section(top, "data_types")) {
    ObjectReader reader(*section, "data_types", diagnostics, Strictness::kLenient);
    read_dtype(reader, "grad_accum_dtype", config.grad_accum_dtype);
    reader.ignore_unless_default("param_dtype", nullptr);
    reader.ignore_unless_default("buffer_dtype", nullptr);
    reader.finish();
  }
  read_dtype(top, "communication_data_type", config.communication_data_type);
  read_file_monitor(top, diagnostics, "tensorboard", config.tensorboard);
  read_file_monitor(top, diagnostics, "csv_monitor", config.csv_monitor);
  if (const Json* section = find_section(top, "wandb")) {
    ObjectReader reader(*section, "wandb", diagnostics, Strictness::kPydantic);
    reader.read("enabled", config.wandb.enabled);
    read_optional_string(reader, "group", config.wandb.group);
    read_optional_string(reader, "team", config.wandb.team);
    reader.read("project", config.wandb.project);
    reader.finish();
  }
  for (std::string_view key : kUnimplementedSections) {
    const Json* section = top.find(key);
    if (section == nullptr || section->is_null()) continue;
    const bool disabled = section->is_object() && section->contains("enabled") &&
                          (*section)["enabled"].is_boolean() && !(*section)["enabled"].get<bool>();
    if (!disabled) top.warn(key, "not implemented by zero; the section is ignored");
  }
}

}  // namespace zero::config::detail
