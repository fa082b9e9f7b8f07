// The DeepSpeed config and the engine's options of a run (engine_setup.h): "auto" filled from the
// arguments under the config precedence rule, --report_to, --optim and the HF schedule's name.
#include "config/engine_setup.h"

#include <unistd.h>

#include <ctime>
#include <filesystem>

#include "config/input_checks.h"
#include "zero/train/config_precedence.h"
#include "zero/train/hf_schedule.h"

namespace zero::train::detail {
namespace {

namespace fs = std::filesystem;

// --optim: the optimizer when the DeepSpeed config has no "optimizer" section.
config::OptimizerType optimizer_for(const std::string& optim) {
  if (optim == "adamw_torch" || optim == "adamw_torch_fused" || optim == "adamw_hf")
    return config::OptimizerType::kAdamW;
  if (optim == "sgd") return config::OptimizerType::kSgd;
  throw Error("'" + optim + "' is not an optimizer zero has (adamw_torch, adamw_torch_fused, " +
              "adamw_hf or sgd)");
}

// The folder Hugging Face's TensorBoard callback writes to without --logging_dir:
// output_dir/runs/<Mon>DD_HH-MM-SS_<host>.
std::string default_logging_dir(const std::string& output_dir) {
  char stamp[32] = "";
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%b%d_%H-%M-%S", &local);
  char host[256] = "";
  ::gethostname(host, sizeof(host) - 1);
  return (fs::path(output_dir) / "runs" / (std::string(stamp) + "_" + host)).string();
}

// --report_to: only TensorBoard (tensorboard or all) or none.
void check_report_to(const TrainingArguments& arguments) {
  const std::string& to = arguments.report_to;
  if (to != "none" && to != "tensorboard" && to != "all")
    throw Error("'" + to + "': zero reports to TensorBoard only (tensorboard, all or none)");
}

}  // namespace

std::string report_to_folder(const TrainingArguments& arguments) {
  if (arguments.report_to == "none") return "";
  return arguments.logging_dir.empty() ? default_logging_dir(arguments.output_dir)
                                       : arguments.logging_dir;
}

EngineSetup resolve_engine(const TrainingArguments& arguments, const DeepSpeedText& deepspeed,
                           int world, std::optional<std::int64_t> total_steps,
                           std::optional<std::int64_t> hidden_size) {
  EngineSetup setup;
  // The config precedence rule (config_precedence.h): a flag not given yields to a value written
  // in the file; a given one must agree with it.
  const config::TrainerValues values =
      trainer_values_by_precedence(arguments, deepspeed.text, world, total_steps, hidden_size);
  const std::string& what = deepspeed.what;
  setup.deepspeed = as_input_error(
      what, [&] { return config::resolve_config(deepspeed.text, values, deepspeed.source); });
  as_input_error("--report_to", [&] { check_report_to(arguments); });
  config::OptimizerConfig default_optimizer;
  default_optimizer.type =
      as_input_error("--optim", [&] { return optimizer_for(arguments.optim); });
  const config::OptimizerType written = setup.deepspeed.config.optimizer.type;
  const bool adam =
      written == config::OptimizerType::kAdam || written == config::OptimizerType::kAdamW;
  if (arguments.given_flags && arguments.was_given("optim") &&
      written != config::OptimizerType::kNone &&
      (default_optimizer.type == config::OptimizerType::kSgd) == adam)
    input_error("--optim ", arguments.optim, " contradicts the optimizer ",
                config::name_of(written), " in ", what,
                "; drop the flag to take the config's optimizer");
  default_optimizer.lr = arguments.learning_rate;
  default_optimizer.betas = {arguments.adam_beta1, arguments.adam_beta2};
  default_optimizer.eps = arguments.adam_epsilon;
  default_optimizer.weight_decay = arguments.weight_decay;
  const std::string precision_hint =
      arguments.bf16 || arguments.fp16
          ? std::string(" (--bf16/--fp16 fill the config's \"enabled\": \"auto\"; without them ") +
                "the run trains in fp32)"
          : std::string();
  setup.engine = as_input_error("--deepspeed " + arguments.deepspeed + precision_hint, [&] {
    return engine_options_from_config(setup.deepspeed.config, default_optimizer);
  });
  if (setup.engine.options.scheduler.type == config::SchedulerType::kNone)
    as_input_error("--lr_scheduler_type", [&] {
      return make_hf_schedule(arguments.lr_scheduler_type, setup.engine.options.optimizer.lr, 0, 1);
    });
  return setup;
}

}  // namespace zero::train::detail
