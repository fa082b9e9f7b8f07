// What a run writes besides the model: its log entries as JSON (metrics.jsonl, trainer_state.json's
// log_history, read back on resume), the start log's memory line, the swap rates and the loss plot.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/console.h"
#include "zero/core/allocator.h"
#include "zero/core/swap_store.h"
#include "zero/engine/engine.h"
#include "zero/train/arguments.h"
#include "zero/train/run_types.h"

namespace zero::train::detail {

// A log entry as Hugging Face's log_history holds it (absent fields left out; NaN/inf as null),
// and back (a null number reads as NaN).
nlohmann::json entry_to_json(const LogEntry& entry);
LogEntry entry_from_json(const nlohmann::json& line);

// trainer_state.json as Hugging Face's Trainer writes it at `step` (epoch = step /
// steps_per_epoch), with `log_history` (entry_to_json lines and the final train summary) and the
// fields of `state` (best_metric, best_global_step, best_model_checkpoint,
// num_input_tokens_seen) over their defaults.
nlohmann::json hf_trainer_state(const TrainingArguments& arguments, std::int64_t step,
                                std::int64_t steps_per_epoch, std::int64_t max_steps,
                                std::int64_t train_batch_size, const nlohmann::json& log_history,
                                const nlohmann::json& state = nullptr);

// The start log's memory line: the ZeRO memory formula for this run, beside what one rank would
// hold unsharded, and where the states are placed (offload: docs/engine.md).
std::string memory_line(const EngineOptions& options, const Engine& engine, int world);

// The log line's swap rates and bytes of a window's traffic (" | swap read 1.23 GB/s, write 0.98
// GB/s (2.460 GB, 1.960 GB)": read, then written), empty when nothing was swapped.
std::string swap_rates(const SwapTraffic& traffic);

// loss.svg in `folder` from the log's training and evaluation losses (monitors.h's plot_losses);
// false with `why` when it could not be drawn (gnuplot missing).
bool plot_log(const std::filesystem::path& folder, const std::vector<LogEntry>& log,
              std::string& why);
// plot_log into `folder`, saying where on `console` (rank 0's), or why not on stderr when `warn`.
void plot_loss(const std::filesystem::path& folder, const std::vector<LogEntry>& log,
               const detail::Console& console, bool warn);

}  // namespace zero::train::detail
