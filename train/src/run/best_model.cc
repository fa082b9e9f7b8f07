// The best checkpoint and the rotation that keeps it (best_model.h).
#include "run/best_model.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "config/input_checks.h"
#include "kind/task_kind.h"

namespace zero::train::detail {

namespace fs = std::filesystem;

std::string checked_best_metric_key(const TrainingArguments& arguments) {
  const std::string metric = metric_for_best_model_of(arguments);
  if (metric.empty()) return "";
  const std::string key = metric.starts_with("eval_") ? metric : "eval_" + metric;
  const std::vector<std::string> metrics = task_kind(arguments.task).evaluation_metrics();
  if (std::find(metrics.begin(), metrics.end(), key) != metrics.end()) return key;
  std::string available;
  for (std::size_t i = 0; i < metrics.size(); ++i)
    available += (i == 0 ? "" : i + 1 == metrics.size() ? " and " : ", ") + metrics[i];
  input_error("--metric_for_best_model ", metric, ": the metric '", key,
              "' is not found in the evaluation metrics; the available evaluation metrics are ",
              available);
}

bool update_best(BestModel& best, const TrainingArguments& arguments, const LogEntry& evaluation,
                 const fs::path& checkpoint, std::int64_t step) {
  const std::string key = checked_best_metric_key(arguments);
  if (key.empty()) return false;
  const std::optional<double>& value = key == "eval_loss"  ? evaluation.eval_loss
                                       : key == "eval_mse" ? evaluation.eval_mse
                                       : key == "eval_f1"  ? evaluation.eval_f1
                                                           : evaluation.eval_accuracy;
  if (!value) return false;
  const bool greater = greater_is_better_for(arguments);
  if (best.metric && !best.checkpoint.empty() &&
      !(greater ? *value > *best.metric : *value < *best.metric))
    return false;
  best = {.metric = *value, .checkpoint = checkpoint.string(), .step = step};
  return true;
}

std::vector<fs::path> rotate_keeping_best(const fs::path& output_dir, std::int64_t save_total_limit,
                                          const std::string& best_checkpoint) {
  std::vector<fs::path> removed;
  if (save_total_limit < 1) return removed;
  std::vector<std::pair<long long, fs::path>> numbered;
  for (const fs::directory_entry& entry : fs::directory_iterator(output_dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("checkpoint-")) continue;
    char* end = nullptr;
    const long long number = std::strtoll(name.c_str() + 11, &end, 10);
    if (end != name.c_str() + 11 && *end == '\0') numbered.emplace_back(number, entry.path());
  }
  std::sort(numbered.begin(), numbered.end());
  std::vector<fs::path> sorted;
  for (auto& [number, path] : numbered) sorted.push_back(std::move(path));
  if (static_cast<std::int64_t>(sorted.size()) <= save_total_limit) return removed;
  // By folder name: output_dir may be spelled another way than when the best was recorded.
  const fs::path best = fs::path(best_checkpoint).filename();
  const auto found = std::find_if(sorted.begin(), sorted.end(),
                                  [&](const fs::path& path) { return path.filename() == best; });
  if (!best_checkpoint.empty() && found != sorted.end())  // to the second newest place
    for (auto at = found; at + 2 < sorted.end(); ++at) std::iter_swap(at, at + 1);
  std::int64_t limit = save_total_limit;
  if (!best_checkpoint.empty() && limit == 1 && sorted.back().filename() != best) limit = 2;
  std::string latest;
  if (std::ifstream stream(output_dir / "latest"); stream) std::getline(stream, latest);
  const std::size_t excess = sorted.size() - std::min<std::size_t>(sorted.size(), limit);
  for (std::size_t i = 0; i < excess; ++i) {
    if (sorted[i].filename() == latest) continue;
    fs::remove_all(sorted[i]);
    removed.push_back(sorted[i]);
  }
  return removed;
}

BestModel best_model_from_state(const nlohmann::json& state) {
  BestModel best;
  if (!state.value("best_metric", nlohmann::json()).is_number()) return best;
  best.metric = state["best_metric"].get<double>();
  best.checkpoint = state.value("best_model_checkpoint", std::string());
  best.step = state.value("best_global_step", std::int64_t{0});
  return best;
}

}  // namespace zero::train::detail
