// Range checks for EngineOptions, each naming the DeepSpeed key at fault.
#include "zero/engine/options.h"

#include "zero/core/error.h"

namespace zero {

void validate(const EngineOptions& options) {
  ZERO_CHECK(options.stage >= 0 && options.stage <= 3,
             "zero_optimization.stage must be 0, 1, 2 or 3, got ", options.stage);
  ZERO_CHECK(options.gradient_accumulation_steps >= 1,
             "gradient_accumulation_steps must be >= 1, got ", options.gradient_accumulation_steps);
  for (const auto& [key, value] :
       {std::pair{"reduce_bucket_size", options.reduce_bucket_size},
        std::pair{"allgather_bucket_size", options.allgather_bucket_size},
        std::pair{"stage3_prefetch_bucket_size", options.prefetch_bucket_size},
        std::pair{"stage3_max_live_parameters", options.max_live_parameters},
        std::pair{"stage3_param_persistence_threshold", options.param_persistence_threshold}})
    ZERO_CHECK(value >= 0, "zero_optimization.", key, " must be >= 0, got ", value);
  ZERO_CHECK(options.gradient_clipping >= 0, "gradient_clipping must be >= 0, got ",
             options.gradient_clipping);
  ZERO_CHECK(options.gradient_predivide_factor > 0, "gradient_predivide_factor must be > 0, got ",
             options.gradient_predivide_factor);
  ZERO_CHECK(options.alignment_elements >= 1, "alignment_elements must be >= 1");
  ZERO_CHECK(!(options.fp16.enabled && options.bf16.enabled),
             "fp16.enabled and bf16.enabled are both true: enable one of them");
  ZERO_CHECK(!options.fp16.fp16_master_weights_and_grads,
             "fp16.fp16_master_weights_and_grads: fp16 master weights are not supported (the "
             "master weights are fp32)");
  ZERO_CHECK(!options.bf16.bf16_master_weights_and_grads && !options.bf16.bf16_optimizer_states,
             "bf16.bf16_master_weights_and_grads / bf16.bf16_optimizer_states: bf16 master "
             "weights and optimizer states are not supported (they are fp32)");
  using config::OffloadDevice;
  const auto& offload_optimizer = options.offload_optimizer;
  const auto& offload_param = options.offload_param;
  if (offload_optimizer.device != OffloadDevice::kNone) {
    ZERO_CHECK(options.stage >= 1, "zero_optimization.offload_optimizer.device ",
               config::name_of(offload_optimizer.device),
               " needs ZeRO stage 1, 2 or 3 (stage is 0), as DeepSpeed: offload moves the "
               "optimizer's shard");
    ZERO_CHECK(
        offload_optimizer.device != OffloadDevice::kNvme || !offload_optimizer.nvme_path.empty(),
        "zero_optimization.offload_optimizer.nvme_path is required when device is "
        "\"nvme\" (the folder the swap files go to)");
    ZERO_CHECK(offload_optimizer.ratio > 0.0 && offload_optimizer.ratio <= 1.0,
               "zero_optimization.offload_optimizer.ratio must be in (0, 1], got ",
               offload_optimizer.ratio);
    // offload_param (cpu or nvme) may join it: the parameter shards rest off the device whichever
    // sub-group steps where.
    ZERO_CHECK(offload_optimizer.ratio == 1.0 ||
                   (options.stage == 3 && offload_optimizer.device == OffloadDevice::kCpu),
               "zero_optimization.offload_optimizer.ratio ", offload_optimizer.ratio,
               ": partial offload needs stage 3 (as DeepSpeed) and offload_optimizer.device "
               "\"cpu\" (got stage ",
               options.stage, ", device \"", config::name_of(offload_optimizer.device), "\")");
    ZERO_CHECK(options.optimizer.type != config::OptimizerType::kLamb,
               "zero_optimization.offload_optimizer with optimizer \"Lamb\": the host "
               "optimizer steps one sub-group at a time and Lamb's trust ratios need whole "
               "tensors (DeepSpeed offloads Adam, AdamW and Adagrad)");
    ZERO_CHECK(options.sub_group_size >= 1, "zero_optimization.sub_group_size must be >= 1, got ",
               options.sub_group_size);
  }
  if (offload_param.device != OffloadDevice::kNone && options.stage == 3) {
    ZERO_CHECK(offload_param.device != OffloadDevice::kNvme || !offload_param.nvme_path.empty(),
               "zero_optimization.offload_param.nvme_path is required when device is \"nvme\" "
               "(the folder the swap files go to)");
    ZERO_CHECK(offload_param.max_in_cpu >= 0,
               "zero_optimization.offload_param.max_in_cpu must be >= 0, got ",
               offload_param.max_in_cpu);
  }
  if (options.grad_accum_dtype.has_value()) {
    const DType accumulate = *options.grad_accum_dtype;
    const bool half = options.fp16.enabled || options.bf16.enabled;
    ZERO_CHECK(accumulate == DType::kFloat32 ||
                   (accumulate == DType::kFloat16 && options.fp16.enabled) ||
                   (accumulate == DType::kBFloat16 && options.bf16.enabled),
               "data_types.grad_accum_dtype ", name_of(accumulate), " needs ",
               accumulate == DType::kFloat16 ? "fp16" : "bf16",
               ".enabled (gradients accumulate in fp32 or in the training dtype",
               half ? ")" : "; this run trains in fp32)");
  }
}

}  // namespace zero
