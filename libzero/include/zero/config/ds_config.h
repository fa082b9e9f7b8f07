// The DeepSpeed JSON config as typed structs with DeepSpeed 0.19's defaults, and its resolution.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/core/dtype.h"
#include "zero/core/error.h"

namespace zero::config {

enum class OffloadDevice { kNone, kCpu, kNvme };

// zero_optimization.offload_param (DeepSpeedZeroOffloadParamConfig). Used by stage 3 only.
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;  // required when device is kNvme
  std::int64_t buffer_count = 5;
  std::int64_t buffer_size = 100'000'000;   // elements per buffer
  std::int64_t max_in_cpu = 1'000'000'000;  // elements kept in host memory with nvme
  bool pin_memory = false;
};

// zero_optimization.offload_optimizer (DeepSpeedZeroOffloadOptimizerConfig). Stages 1-3.
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;  // required when device is kNvme
  std::int64_t buffer_count = 4;
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;  // fraction of optimizer state offloaded; < 1 only with stage 3
};

// zero_optimization (DeepSpeedZeroConfig). Sizes are element counts. The stage3_* knobs are
// stored under their short names; both spellings are accepted in the JSON.
struct ZeroOptimizationConfig {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  std::int64_t reduce_bucket_size = 500'000'000;
  bool allgather_partitions = true;
  std::int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;  // resolved: when absent, true for stage 3 and false otherwise
  bool load_from_fp32_weights = true;
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;
  std::int64_t sub_group_size = 1'000'000'000;
  std::int64_t prefetch_bucket_size = 50'000'000;
  std::int64_t param_persistence_threshold = 100'000;
  std::int64_t model_persistence_threshold = std::numeric_limits<std::int64_t>::max();
  std::int64_t max_live_parameters = 1'000'000'000;
  std::int64_t max_reuse_distance = 1'000'000'000;
  bool gather_16bit_weights_on_model_save = false;
  bool ignore_unused_parameters = true;
  bool round_robin_gradients = false;
};

// fp16 (DeepSpeedFP16Config). loss_scale 0 means dynamic loss scaling.
struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0.0;
  std::int64_t initial_scale_power = 16;
  std::int64_t loss_scale_window = 1000;
  std::int64_t hysteresis = 2;
  bool consecutive_hysteresis = false;
  std::int64_t min_loss_scale = 1;
  bool fp16_master_weights_and_grads = false;
};

// bf16, or its old name bfloat16 (DeepSpeedBF16Config).
struct Bf16Config {
  bool enabled = false;
  bool immediate_grad_update = false;
  bool check_grad_overflow = false;
  bool bf16_master_weights_and_grads = false;
  bool bf16_optimizer_states = false;
};

enum class OptimizerType { kNone, kAdam, kAdamW, kSgd, kLamb };

// optimizer: type and params. Fields a type does not use keep their defaults. DeepSpeed's Adam
// and AdamW both decouple weight decay unless "adam_w_mode": false is given for Adam; the
// resolved adam_w_mode says which update runs (type kAdamW always decouples). This is also what
// the engine runs (EngineOptions::optimizer, optim::make_optimizer).
struct OptimizerConfig {
  // kNone: the JSON has no "optimizer" section (the trainer supplies one). EngineOptions
  // defaults its optimizer to kAdamW instead; optimizer_type_from_name() reads a name.
  OptimizerType type = OptimizerType::kNone;
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};  // (beta1, beta2); OneCycle may cycle beta1
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;   // Adam, AdamW, Lamb
  bool adam_w_mode = true;       // Adam, AdamW
  bool torch_adam = false;       // Adam, AdamW
  double momentum = 0.0;         // SGD
  double dampening = 0.0;        // SGD
  bool nesterov = false;         // SGD
  double max_coeff = 10.0;       // Lamb
  double min_coeff = 0.01;       // Lamb
  bool eps_inside_sqrt = false;  // Lamb
};

enum class SchedulerType {
  kNone,
  kWarmupLR,
  kWarmupDecayLR,
  kWarmupCosineLR,
  kOneCycle,
  kLRRangeTest
};
enum class WarmupType { kLog, kLinear };

// scheduler: type and params (deepspeed/runtime/lr_schedules.py), optional values resolved. This
// is also what the engine runs (EngineOptions::scheduler, optim::make_lr_schedule).
struct SchedulerConfig {
  SchedulerType type = SchedulerType::kNone;  // kNone: no schedule, the optimizer's lr throughout
  // WarmupLR, WarmupDecayLR, WarmupCosineLR
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  std::int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::kLog;
  std::int64_t total_num_steps = 0;  // WarmupDecayLR, WarmupCosineLR: required
  double warmup_min_ratio = 0.0;     // WarmupCosineLR
  double cos_min_ratio = 0.0001;     // WarmupCosineLR
  // OneCycle (cycle_min_lr and cycle_max_lr required; second step/stair default to the first)
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  std::int64_t cycle_first_step_size = 2000;
  // -1: the same as the first, as DeepSpeed's None; a resolved config holds the value itself.
  std::int64_t cycle_second_step_size = -1;
  std::int64_t cycle_first_stair_count = 0;
  std::int64_t cycle_second_stair_count = -1;  // -1: the same as the first
  std::int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  // LRRangeTest
  double lr_range_test_min_lr = 0.001;
  std::int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

// aio: NVMe I/O. thread_count is the old name of intra_op_parallelism.
struct AioConfig {
  std::int64_t block_size = 1'048'576;
  std::int64_t queue_depth = 8;
  std::int64_t intra_op_parallelism = 1;
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;
};

struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool contiguous_memory_optimization = false;
  bool cpu_checkpointing = false;
  std::optional<std::int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

struct CheckpointConfig {
  std::string tag_validation = "WARN";  // WARN, IGNORE or FAIL (upper-cased as DeepSpeed does)
  bool load_universal = false;
  bool use_node_local_storage = false;
  bool parallel_write_pipeline_stage = false;
};

// tensorboard and csv_monitor.
struct FileMonitorConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};

struct WandbConfig {
  bool enabled = false;
  std::optional<std::string> group;
  std::optional<std::string> team;
  std::string project = "deepspeed";
};

// The whole resolved config: every "auto" filled, aliases mapped, the batch triple derived.
struct DeepSpeedConfig {
  std::int64_t train_batch_size = 0;
  std::int64_t train_micro_batch_size_per_gpu = 0;
  std::int64_t gradient_accumulation_steps = 0;
  std::int64_t world_size = 1;     // the data-parallel world the batch triple was resolved for
  double gradient_clipping = 0.0;  // 0 disables clipping
  std::optional<std::int64_t> steps_per_print;  // DeepSpeed >= 0.12: no default (no printing)
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<DType> communication_data_type;  // absent: chosen from the training dtype
  std::optional<DType> grad_accum_dtype;         // data_types.grad_accum_dtype
  bool wall_clock_breakdown = false;
  Fp16Config fp16;
  Bf16Config bf16;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ZeroOptimizationConfig zero_optimization;
  AioConfig aio;
  ActivationCheckpointingConfig activation_checkpointing;
  CheckpointConfig checkpoint;
  FileMonitorConfig tensorboard;
  FileMonitorConfig csv_monitor;
  WandbConfig wandb;
};

// What trainer flags supply to fill "auto" (Hugging Face's table). A value that has_value() was
// given explicitly: it fills "auto" and must agree with a concrete config value; an empty one
// fills nothing and contradicts nothing. A trainer that wants Hugging Face's defaults for unset
// flags (gradient_accumulation_steps 1, max_grad_norm 1.0, ...) fills them in itself.
struct TrainerValues {
  std::optional<std::int64_t> world_size;  // data-parallel ranks; 1 when empty
  std::optional<std::int64_t> per_device_train_batch_size;
  std::optional<std::int64_t> gradient_accumulation_steps;
  std::optional<double> learning_rate;
  std::optional<double> adam_beta1;
  std::optional<double> adam_beta2;
  std::optional<double> adam_epsilon;
  std::optional<double> weight_decay;
  std::optional<std::int64_t> warmup_steps;
  std::optional<std::int64_t> total_steps;  // --max_steps: fills scheduler total_num_steps
  std::optional<double> max_grad_norm;
  std::optional<bool> fp16;
  std::optional<bool> bf16;
  std::optional<std::int64_t> hidden_size;  // the model's; fills bucket sizes and thresholds
};

// Thrown by resolve_config for a config with errors: what() lists them all (as `zero config`
// prints them), errors() holds each one ("zero_optimization.stage: expected ...; did you mean
// ...?"), naming its JSON path. Other bad input (not JSON, not an object) is a plain zero::Error.
class ConfigError : public Error {
 public:
  ConfigError(const std::string& message, std::vector<std::string> errors)
      : Error(message), errors_(std::move(errors)) {}
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::vector<std::string> errors_;
};

struct ConfigResult {
  DeepSpeedConfig config;
  std::vector<std::string> warnings;  // one line each, naming the JSON path
};

// Parses `json_text` (strict JSON; duplicate keys are errors), fills "auto" from `trainer`,
// maps deprecated aliases, applies defaults and DeepSpeed's batch rule for the world size.
// Throws ConfigError listing every error found, each naming `source_name`, the JSON path, the
// value, what was expected and, for unknown keys, the nearest known key.
ConfigResult resolve_config(std::string_view json_text, const TrainerValues& trainer,
                            std::string_view source_name);

// resolve_config on a file's contents; a missing, unreadable or empty file is a zero::Error.
ConfigResult load_config_file(const std::filesystem::path& path, const TrainerValues& trainer);

// The resolved config as DeepSpeed JSON (every section, defaults filled in), indented by 2.
std::string to_json(const DeepSpeedConfig& config);

std::string_view name_of(OffloadDevice device);
std::string_view name_of(OptimizerType type);
std::string_view name_of(SchedulerType type);

// Names to types for C++ callers, with the JSON's rules. Each throws zero::Error naming the
// known values. Optimizer names are case-insensitive ("adamw" is kAdamW), as DeepSpeed compares
// its own; scheduler names are exact and "" is kNone (no schedule); warmup types are "log" and
// "linear".
OptimizerType optimizer_type_from_name(std::string_view name);
SchedulerType scheduler_type_from_name(std::string_view name);
WarmupType warmup_type_from_name(std::string_view name);

}  // namespace zero::config
