// DeepSpeedConfig -> EngineOptions: field for field, with clear errors for what is not built.
#include "zero/engine/from_config.h"

#include <algorithm>
#include <sstream>

#include "zero/core/error.h"
#include "zero/engine/memory_formula.h"

namespace zero {

EngineOptionsResult engine_options_from_config(const config::DeepSpeedConfig& config,
                                               const config::OptimizerConfig& default_optimizer) {
  EngineOptionsResult result;
  EngineOptions& options = result.options;
  std::vector<std::string> errors;
  const auto& zero_config = config.zero_optimization;

  // The sections are the engine's own structs: assigned whole. A bucket size of 0 (as in Hugging
  // Face's test configs) reduces every unit on its own: the engine's smallest bucket does that.
  static_cast<config::ZeroOptimizationConfig&>(options) = zero_config;
  options.gradient_accumulation_steps = static_cast<int>(config.gradient_accumulation_steps);
  options.gradient_clipping = config.gradient_clipping;
  options.prescale_gradients = config.prescale_gradients;
  options.gradient_predivide_factor = config.gradient_predivide_factor;

  // Mixed precision: state_policy() says where each state lives and in which dtype.
  options.fp16 = config.fp16;
  options.bf16 = config.bf16;
  options.grad_accum_dtype = config.grad_accum_dtype;

  // Offload: state_policy() says where each state lives; validate() checks the combinations.
  options.aio = AioSettings{.block_size = config.aio.block_size,
                            .queue_depth = config.aio.queue_depth,
                            .intra_op_parallelism = config.aio.intra_op_parallelism,
                            .single_submit = config.aio.single_submit,
                            .overlap_events = config.aio.overlap_events,
                            .use_gds = config.aio.use_gds};
  if (zero_config.offload_param.device != config::OffloadDevice::kNone && zero_config.stage != 3)
    result.warnings.push_back("zero_optimization.offload_param.device " +
                              std::string(config::name_of(zero_config.offload_param.device)) +
                              " ignored: parameters are offloaded at stage 3 only (stage " +
                              std::to_string(zero_config.stage) + ")");

  if (config.optimizer.type == config::OptimizerType::kNone) {
    if (default_optimizer.type == config::OptimizerType::kNone)
      errors.push_back(
          "optimizer: the config has no \"optimizer\" section and no default "
          "optimizer was given");
    options.optimizer = default_optimizer;
  } else {
    options.optimizer = config.optimizer;
    if (config.optimizer.eps_inside_sqrt)
      errors.push_back("optimizer.params.eps_inside_sqrt: true is not supported");
  }
  options.scheduler = config.scheduler;

  if (config.communication_data_type.has_value() && errors.empty()) {
    const DType reduced = state_policy(options).model_grads;
    if (*config.communication_data_type != reduced)
      result.warnings.push_back(
          "communication_data_type: " + std::string(name_of(*config.communication_data_type)) +
          " ignored; gradients are reduced in their own dtype (" + std::string(name_of(reduced)) +
          "), 16-bit values summed in fp32");
  }

  if (!errors.empty()) {
    std::ostringstream message;
    message << errors.size() << " setting(s) of the DeepSpeed config cannot run on this engine:";
    for (const std::string& error : errors) message << "\n  - " << error;
    ZERO_THROW(message.str());
  }
  validate(options);
  return result;
}

}  // namespace zero
