// The resolved config written back as DeepSpeed JSON, every section with its defaults filled in.
#include <nlohmann/json.hpp>

#include "zero/config/ds_config.h"

namespace zero::config {

namespace {

using Json = nlohmann::ordered_json;

Json optional_dtype(const std::optional<DType>& dtype) {
  return dtype ? Json(std::string(name_of(*dtype))) : Json(nullptr);
}

Json to_json_value(const OffloadParamConfig& offload) {
  return Json{{"device", name_of(offload.device)},
              {"nvme_path", offload.nvme_path.empty() ? Json(nullptr) : Json(offload.nvme_path)},
              {"buffer_count", offload.buffer_count},
              {"buffer_size", offload.buffer_size},
              {"max_in_cpu", offload.max_in_cpu},
              {"pin_memory", offload.pin_memory}};
}

Json to_json_value(const OffloadOptimizerConfig& offload) {
  return Json{{"device", name_of(offload.device)},
              {"nvme_path", offload.nvme_path.empty() ? Json(nullptr) : Json(offload.nvme_path)},
              {"buffer_count", offload.buffer_count},
              {"pin_memory", offload.pin_memory},
              {"pipeline_read", offload.pipeline_read},
              {"pipeline_write", offload.pipeline_write},
              {"fast_init", offload.fast_init},
              {"ratio", offload.ratio}};
}

Json to_json_value(const ZeroOptimizationConfig& zero) {
  return Json{
      {"stage", zero.stage},
      {"contiguous_gradients", zero.contiguous_gradients},
      {"reduce_scatter", zero.reduce_scatter},
      {"reduce_bucket_size", zero.reduce_bucket_size},
      {"allgather_partitions", zero.allgather_partitions},
      {"allgather_bucket_size", zero.allgather_bucket_size},
      {"overlap_comm", zero.overlap_comm},
      {"load_from_fp32_weights", zero.load_from_fp32_weights},
      {"offload_param", to_json_value(zero.offload_param)},
      {"offload_optimizer", to_json_value(zero.offload_optimizer)},
      {"sub_group_size", zero.sub_group_size},
      {"stage3_prefetch_bucket_size", zero.prefetch_bucket_size},
      {"stage3_param_persistence_threshold", zero.param_persistence_threshold},
      {"stage3_model_persistence_threshold", zero.model_persistence_threshold},
      {"stage3_max_live_parameters", zero.max_live_parameters},
      {"stage3_max_reuse_distance", zero.max_reuse_distance},
      {"stage3_gather_16bit_weights_on_model_save", zero.gather_16bit_weights_on_model_save},
      {"ignore_unused_parameters", zero.ignore_unused_parameters},
      {"round_robin_gradients", zero.round_robin_gradients}};
}

Json to_json_value(const OptimizerConfig& optimizer) {
  if (optimizer.type == OptimizerType::kNone) return nullptr;
  Json params{{"lr", optimizer.lr}};
  switch (optimizer.type) {
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW:
      params["betas"] = optimizer.betas;
      params["eps"] = optimizer.eps;
      params["weight_decay"] = optimizer.weight_decay;
      params["bias_correction"] = optimizer.bias_correction;
      params["adam_w_mode"] = optimizer.adam_w_mode;
      params["torch_adam"] = optimizer.torch_adam;
      break;
    case OptimizerType::kLamb:
      params["betas"] = optimizer.betas;
      params["eps"] = optimizer.eps;
      params["weight_decay"] = optimizer.weight_decay;
      params["bias_correction"] = optimizer.bias_correction;
      params["eps_inside_sqrt"] = optimizer.eps_inside_sqrt;
      params["max_coeff"] = optimizer.max_coeff;
      params["min_coeff"] = optimizer.min_coeff;
      break;
    case OptimizerType::kSgd:
      params["momentum"] = optimizer.momentum;
      params["dampening"] = optimizer.dampening;
      params["weight_decay"] = optimizer.weight_decay;
      params["nesterov"] = optimizer.nesterov;
      break;
    case OptimizerType::kNone: break;
  }
  return Json{{"type", name_of(optimizer.type)}, {"params", params}};
}

Json to_json_value(const SchedulerConfig& scheduler) {
  if (scheduler.type == SchedulerType::kNone) return nullptr;
  const char* warmup_type = scheduler.warmup_type == WarmupType::kLinear ? "linear" : "log";
  Json params = Json::object();
  switch (scheduler.type) {
    case SchedulerType::kWarmupLR:
    case SchedulerType::kWarmupDecayLR:
      params = Json{{"warmup_min_lr", scheduler.warmup_min_lr},
                    {"warmup_max_lr", scheduler.warmup_max_lr},
                    {"warmup_num_steps", scheduler.warmup_num_steps},
                    {"warmup_type", warmup_type}};
      if (scheduler.type == SchedulerType::kWarmupDecayLR)
        params["total_num_steps"] = scheduler.total_num_steps;
      break;
    case SchedulerType::kWarmupCosineLR:
      params = Json{{"total_num_steps", scheduler.total_num_steps},
                    {"warmup_min_ratio", scheduler.warmup_min_ratio},
                    {"warmup_num_steps", scheduler.warmup_num_steps},
                    {"cos_min_ratio", scheduler.cos_min_ratio},
                    {"warmup_type", warmup_type}};
      break;
    case SchedulerType::kOneCycle:
      params = Json{{"cycle_min_lr", scheduler.cycle_min_lr},
                    {"cycle_max_lr", scheduler.cycle_max_lr},
                    {"decay_lr_rate", scheduler.decay_lr_rate},
                    {"cycle_first_step_size", scheduler.cycle_first_step_size},
                    {"cycle_second_step_size", scheduler.cycle_second_step_size},
                    {"cycle_first_stair_count", scheduler.cycle_first_stair_count},
                    {"cycle_second_stair_count", scheduler.cycle_second_stair_count},
                    {"decay_step_size", scheduler.decay_step_size},
                    {"cycle_momentum", scheduler.cycle_momentum},
                    {"cycle_min_mom", scheduler.cycle_min_mom},
                    {"cycle_max_mom", scheduler.cycle_max_mom},
                    {"decay_mom_rate", scheduler.decay_mom_rate}};
      break;
    case SchedulerType::kLRRangeTest:
      params = Json{{"lr_range_test_min_lr", scheduler.lr_range_test_min_lr},
                    {"lr_range_test_step_size", scheduler.lr_range_test_step_size},
                    {"lr_range_test_step_rate", scheduler.lr_range_test_step_rate},
                    {"lr_range_test_staircase", scheduler.lr_range_test_staircase}};
      break;
    case SchedulerType::kNone: break;
  }
  return Json{{"type", name_of(scheduler.type)}, {"params", params}};
}

Json to_json_value(const FileMonitorConfig& monitor) {
  return Json{{"enabled", monitor.enabled},
              {"output_path", monitor.output_path},
              {"job_name", monitor.job_name}};
}

}  // namespace

std::string to_json(const DeepSpeedConfig& config) {
  const auto optional_string = [](const std::optional<std::string>& text) {
    return text ? Json(*text) : Json(nullptr);
  };
  Json root{
      {"train_batch_size", config.train_batch_size},
      {"train_micro_batch_size_per_gpu", config.train_micro_batch_size_per_gpu},
      {"gradient_accumulation_steps", config.gradient_accumulation_steps},
      {"gradient_clipping", config.gradient_clipping},
      {"steps_per_print", config.steps_per_print ? Json(*config.steps_per_print) : Json(nullptr)},
      {"prescale_gradients", config.prescale_gradients},
      {"gradient_predivide_factor", config.gradient_predivide_factor},
      {"communication_data_type", optional_dtype(config.communication_data_type)},
      {"data_types", Json{{"grad_accum_dtype", optional_dtype(config.grad_accum_dtype)}}},
      {"wall_clock_breakdown", config.wall_clock_breakdown},
      {"fp16", Json{{"enabled", config.fp16.enabled},
                    {"auto_cast", config.fp16.auto_cast},
                    {"loss_scale", config.fp16.loss_scale},
                    {"initial_scale_power", config.fp16.initial_scale_power},
                    {"loss_scale_window", config.fp16.loss_scale_window},
                    {"hysteresis", config.fp16.hysteresis},
                    {"consecutive_hysteresis", config.fp16.consecutive_hysteresis},
                    {"min_loss_scale", config.fp16.min_loss_scale},
                    {"fp16_master_weights_and_grads", config.fp16.fp16_master_weights_and_grads}}},
      {"bf16", Json{{"enabled", config.bf16.enabled},
                    {"immediate_grad_update", config.bf16.immediate_grad_update},
                    {"check_grad_overflow", config.bf16.check_grad_overflow},
                    {"bf16_master_weights_and_grads", config.bf16.bf16_master_weights_and_grads},
                    {"bf16_optimizer_states", config.bf16.bf16_optimizer_states}}},
      {"optimizer", to_json_value(config.optimizer)},
      {"scheduler", to_json_value(config.scheduler)},
      {"zero_optimization", to_json_value(config.zero_optimization)},
      {"aio", Json{{"block_size", config.aio.block_size},
                   {"queue_depth", config.aio.queue_depth},
                   {"intra_op_parallelism", config.aio.intra_op_parallelism},
                   {"single_submit", config.aio.single_submit},
                   {"overlap_events", config.aio.overlap_events},
                   {"use_gds", config.aio.use_gds}}},
      {"activation_checkpointing",
       Json{{"partition_activations", config.activation_checkpointing.partition_activations},
            {"contiguous_memory_optimization",
             config.activation_checkpointing.contiguous_memory_optimization},
            {"cpu_checkpointing", config.activation_checkpointing.cpu_checkpointing},
            {"number_checkpoints", config.activation_checkpointing.number_checkpoints
                                       ? Json(*config.activation_checkpointing.number_checkpoints)
                                       : Json(nullptr)},
            {"synchronize_checkpoint_boundary",
             config.activation_checkpointing.synchronize_checkpoint_boundary},
            {"profile", config.activation_checkpointing.profile}}},
      {"checkpoint",
       Json{{"tag_validation", config.checkpoint.tag_validation},
            {"load_universal", config.checkpoint.load_universal},
            {"use_node_local_storage", config.checkpoint.use_node_local_storage},
            {"parallel_write",
             Json{{"pipeline_stage", config.checkpoint.parallel_write_pipeline_stage}}}}},
      {"tensorboard", to_json_value(config.tensorboard)},
      {"csv_monitor", to_json_value(config.csv_monitor)},
      {"wandb", Json{{"enabled", config.wandb.enabled},
                     {"group", optional_string(config.wandb.group)},
                     {"team", optional_string(config.wandb.team)},
                     {"project", config.wandb.project}}},
  };
  return root.dump(2);
}

}  // namespace zero::config
