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
  ZERO_CHECK(options.compute_dtype == DType::kFloat32,
             "the CPU engine computes in fp32 only; compute dtype ", name_of(options.compute_dtype),
             " (bf16.enabled / fp16.enabled with half storage) needs the CUDA engine");
}

}  // namespace zero
