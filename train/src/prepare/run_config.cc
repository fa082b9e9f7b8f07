// A run's configuration, resolved once where the run starts (zero/train/run_config.h).
#include "zero/train/run_config.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "config/engine_setup.h"
#include "config/input_checks.h"
#include "prepare/model_config.h"
#include "prepare/prepare.h"
#include "zero/engine/state_policy.h"

namespace zero::train {

namespace {

// The run's length the config is resolved for: --max_steps, else 1 (the planner's), unless the
// file writes its own total_num_steps, which prepare() checks against the steps it counts.
std::optional<std::int64_t> length_to_resolve(const TrainingArguments& arguments,
                                              const std::string& json_text) {
  if (arguments.max_steps > 0) return arguments.max_steps;
  const nlohmann::json root = nlohmann::json::parse(json_text, nullptr, false);
  const nlohmann::json::json_pointer total("/scheduler/params/total_num_steps");
  if (root.is_object() && root.contains(total) && root[total].is_number()) return std::nullopt;
  return 1;
}

}  // namespace

RunConfig make_run_config(TrainingArguments arguments, int world_size,
                          const std::string& deepspeed_json, bool model_from_flags) {
  if (world_size < 1) detail::input_error("--world_size must be at least 1, got ", world_size);
  RunConfig run;
  run.world_size = world_size;
  run.deepspeed_text = deepspeed_text_of(arguments, deepspeed_json);  // the one read of the file
  if (deepspeed_json.empty())
    run.from_file = apply_config_precedence(arguments, run.deepspeed_text, world_size);
  detail::checked_task(arguments);
  if (model_from_flags) run.hidden_size = detail::model_config_from_flags(arguments).n_embd;
  detail::EngineSetup engine = detail::resolve_engine(
      arguments, run.deepspeed_text, world_size,
      length_to_resolve(arguments, run.deepspeed_text.text), run.hidden_size);
  run.deepspeed = std::move(engine.deepspeed);
  run.engine = std::move(engine.engine);
  run.arguments = std::move(arguments);
  return run;
}

RunConfig with_micro_batch(RunConfig run, std::int64_t micro_batch) {
  run.arguments.per_device_train_batch_size = micro_batch;
  config::DeepSpeedConfig& config = run.deepspeed.config;
  config.train_micro_batch_size_per_gpu = micro_batch;
  config.train_batch_size = micro_batch * config.gradient_accumulation_steps * run.world_size;
  return run;
}

DType final_model_dtype(const RunConfig& run) {
  const bool deepspeed = run.deepspeed_text.what != "the default config";  // deepspeed_text_of
  const DType compute = state_policy(run.engine.options).compute;
  const config::ZeroOptimizationConfig& zero = run.deepspeed.config.zero_optimization;
  if (!deepspeed || compute == DType::kFloat32) return DType::kFloat32;
  if (zero.stage == 3 && !zero.gather_16bit_weights_on_model_save) return DType::kFloat32;
  return compute;
}

}  // namespace zero::train
