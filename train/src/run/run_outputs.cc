// Log entries, trainer_state.json, the memory and swap lines and the loss plot (run_outputs.h).
#include "run/run_outputs.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <utility>

#include "zero/engine/memory_formula.h"
#include "zero/optim/optimizers.h"
#include "zero/train/monitors.h"

namespace zero::train::detail {
namespace {

// The optional numbers of a LogEntry under their log_history keys: the one list both directions
// use.
constexpr std::pair<const char*, std::optional<double> LogEntry::*> kOptionalFields[] = {
    {"loss", &LogEntry::loss},
    {"grad_norm", &LogEntry::grad_norm},
    {"learning_rate", &LogEntry::learning_rate},
    {"loss_scale", &LogEntry::loss_scale},
    {"tokens_per_second", &LogEntry::tokens_per_second},
    {"eval_loss", &LogEntry::eval_loss},
    {"perplexity", &LogEntry::perplexity},
    {"eval_accuracy", &LogEntry::eval_accuracy},
    {"eval_mse", &LogEntry::eval_mse},
    {"eval_f1", &LogEntry::eval_f1},
    {"epoch_train_loss", &LogEntry::epoch_train_loss},
    {"train_accuracy", &LogEntry::train_accuracy},
    {"num_input_tokens_seen", &LogEntry::num_input_tokens_seen}};

}  // namespace

nlohmann::json entry_to_json(const LogEntry& entry) {
  nlohmann::json out;
  for (const auto& [key, field] : kOptionalFields)
    if (entry.*field) out[key] = *(entry.*field);
  if (entry.num_input_tokens_seen)  // a count, as Hugging Face writes it
    out["num_input_tokens_seen"] = static_cast<std::int64_t>(*entry.num_input_tokens_seen);
  out["epoch"] = entry.epoch;
  out["step"] = entry.step;
  return out;
}

LogEntry entry_from_json(const nlohmann::json& line) {
  LogEntry entry;
  entry.step = line.value("step", std::int64_t{0});
  entry.epoch = line.value("epoch", 0.0);
  for (const auto& [key, field] : kOptionalFields) {
    if (!line.contains(key)) continue;
    if (line[key].is_number()) entry.*field = line[key].get<double>();
    if (line[key].is_null()) entry.*field = std::numeric_limits<double>::quiet_NaN();
  }
  return entry;
}

nlohmann::json hf_trainer_state(const TrainingArguments& arguments, std::int64_t step,
                                std::int64_t steps_per_epoch, std::int64_t max_steps,
                                std::int64_t train_batch_size, const nlohmann::json& log_history,
                                const nlohmann::json& state) {
  nlohmann::json out = {
      {"global_step", step},
      {"epoch", static_cast<double>(step) / static_cast<double>(steps_per_epoch)},
      {"max_steps", max_steps},
      {"num_train_epochs", arguments.num_train_epochs},
      {"logging_steps", arguments.logging_steps},
      {"eval_steps", arguments.eval_steps > 0 ? arguments.eval_steps : arguments.logging_steps},
      {"save_steps", arguments.save_steps},
      {"train_batch_size", train_batch_size},
      {"num_input_tokens_seen", 0},
      {"total_flos", 0},
      {"best_metric", nullptr},
      {"best_global_step", nullptr},
      {"best_model_checkpoint", nullptr},
      {"is_local_process_zero", true},
      {"is_world_process_zero", true},
      {"is_hyper_param_search", false},
      {"log_history", log_history}};
  if (state.is_object()) out.update(state);
  return out;
}

// The ZeRO memory formula for this run, beside what one rank would hold unsharded, and where the
// states are placed (offload: docs/engine.md).
std::string memory_line(const EngineOptions& options, const Engine& engine, int world) {
  std::vector<std::size_t> sizes;
  for (UnitId unit = 0; unit < static_cast<UnitId>(engine.num_units()); ++unit)
    sizes.push_back(engine.layout(unit).num_elements());  // every unit the engine holds
  const StatePolicy policy = state_policy(options);
  const int states = optim::make_optimizer(options.optimizer)->states_per_element();
  auto mib = [&](int stage, int ranks) {
    return static_cast<double>(model_state_bytes(stage, sizes, ranks, options.alignment_elements,
                                                 policy.compute, states, policy.accumulate)
                                   .total()) /
           (1024.0 * 1024.0);
  };
  const ModelStateBytesBySpace placed = model_state_bytes(options, sizes, world, states);
  std::string where;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    const auto space = static_cast<MemorySpace>(s);
    const std::int64_t bytes = placed.in(space).total();
    if (bytes == 0) continue;
    char part[64];
    std::snprintf(part, sizeof(part), "%s%s %.1f MiB", where.empty() ? "" : ", ",
                  std::string(name_of(space)).c_str(),
                  static_cast<double>(bytes) / (1024.0 * 1024.0));
    where += part;
  }
  char line[512];
  std::snprintf(line, sizeof(line),
                "memory: model states per rank %.1f MiB (stage %d, %s parameters, %s gradient "
                "accumulation), %.1f MiB unsharded; placed: %s",
                mib(options.stage, world), options.stage,
                std::string(name_of(policy.compute)).c_str(),
                std::string(name_of(policy.accumulate)).c_str(), mib(0, 1), where.c_str());
  return line;
}

std::string swap_rates(const SwapTraffic& traffic) {
  if (traffic.bytes_read == 0 && traffic.bytes_written == 0) return "";
  char text[160];
  std::snprintf(text, sizeof(text), " | swap read %.2f GB/s, write %.2f GB/s (%.3f GB, %.3f GB)",
                traffic.read_gb_per_s(), traffic.write_gb_per_s(),
                static_cast<double>(traffic.bytes_read) / 1e9,
                static_cast<double>(traffic.bytes_written) / 1e9);
  return text;
}

bool plot_log(const std::filesystem::path& folder, const std::vector<LogEntry>& log,
              std::string& why) {
  std::vector<PlotPoint> train_points, eval_points;
  for (const LogEntry& entry : log) {
    if (entry.loss) train_points.push_back({entry.step, *entry.loss});
    if (entry.eval_loss) eval_points.push_back({entry.step, *entry.eval_loss});
  }
  return plot_losses(folder, train_points, eval_points, why);
}

void plot_loss(const std::filesystem::path& folder, const std::vector<LogEntry>& log,
               const detail::Console& console, bool warn) {
  std::string why;
  if (plot_log(folder, log, why))
    console.say("plot: %s/loss.svg\n", folder.c_str());
  else if (warn)
    std::fprintf(stderr, "zero train: warning: no loss plot: %s\n", why.c_str());
}

}  // namespace zero::train::detail
