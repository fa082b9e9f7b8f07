// The trainer's results and checkpoints as dicts; checkpoint info and consolidate.
#include <nanobind/stl/string.h>

#include <filesystem>
#include <optional>
#include <string>

#include "bindings.h"
#include "results.h"
#include "zero/checkpoint/zero_checkpoint.h"
#include "zero/gpt2/consolidate.h"
#include "zero/train/estimate.h"

namespace nb = nanobind;

namespace zero::python {

namespace {

namespace fs = std::filesystem;

void put(nb::dict& out, const char* key, const std::optional<double>& value) {
  if (value) out[key] = *value;
}

}  // namespace

nb::dict log_entry_dict(const train::LogEntry& entry) {
  nb::dict out;
  out["step"] = entry.step;
  out["epoch"] = entry.epoch;
  put(out, "loss", entry.loss);
  put(out, "learning_rate", entry.learning_rate);
  put(out, "grad_norm", entry.grad_norm);
  put(out, "loss_scale", entry.loss_scale);
  put(out, "tokens_per_second", entry.tokens_per_second);
  put(out, "eval_loss", entry.eval_loss);
  put(out, "perplexity", entry.perplexity);
  put(out, "eval_accuracy", entry.eval_accuracy);
  put(out, "eval_mse", entry.eval_mse);
  put(out, "eval_f1", entry.eval_f1);
  put(out, "epoch_train_loss", entry.epoch_train_loss);
  put(out, "train_accuracy", entry.train_accuracy);
  put(out, "num_input_tokens_seen", entry.num_input_tokens_seen);
  return out;
}

namespace {

// `zero checkpoint info`: the index of the checkpoint `given` names, validated (sizes, headers
// and, with `checksums`, checksums: throws zero::Error naming what is wrong).
nb::dict info(const std::string& given, bool checksums) {
  fs::path folder;
  checkpoint::CheckpointIndex index;
  {
    nb::gil_scoped_release release;
    folder = checkpoint::resolve(given);
    index = checkpoint::read_index(folder);
    checkpoint::validate(folder, index, checksums);
  }
  nb::dict out;
  out["folder"] = folder.string();
  out["world_size"] = index.world_size;
  out["stage"] = index.stage;
  out["param_dtype"] = index.param_dtype;
  out["master_dtype"] = index.master_dtype;
  out["optimizer"] = index.optimizer;
  nb::list states;
  for (const std::string& state : index.optimizer_states) states.append(state);
  out["optimizer_states"] = states;
  out["global_steps"] = index.training.global_steps;
  out["optimizer_steps"] = index.training.optimizer_steps;
  out["skipped_steps"] = index.training.skipped_steps;
  out["loss_scale"] = index.training.loss_scaler.scale;
  nb::dict units;
  std::size_t parameters = 0;
  for (const checkpoint::UnitInfo& unit : index.units) {
    units[unit.name.c_str()] = unit.num_elements;
    parameters += unit.num_elements;
  }
  out["units"] = units;
  out["parameters"] = parameters;
  nb::list files;
  for (const checkpoint::ShardFileInfo& file : index.files) {
    nb::dict entry;
    entry["name"] = file.name;
    entry["rank"] = file.rank;
    entry["size_bytes"] = file.size_bytes;
    nb::dict ranges;
    for (const auto& [unit, range] : file.ranges)
      ranges[unit.c_str()] = nb::make_tuple(range.begin, range.end);
    entry["ranges"] = ranges;
    files.append(entry);
  }
  out["files"] = files;
  out["valid"] = true;
  out["checksums_checked"] = checksums;
  return out;
}

nb::dict consolidate(const std::string& given, const std::string& out_folder) {
  gpt2::ConsolidateSummary summary;
  {
    nb::gil_scoped_release release;
    summary = gpt2::consolidate_checkpoint(given, out_folder);
  }
  nb::dict out;
  out["checkpoint"] = summary.checkpoint.string();
  out["model"] = summary.model.string();
  out["architecture"] = summary.classifier ? "GPT2ForSequenceClassification" : "GPT2LMHeadModel";
  out["global_steps"] = summary.global_steps;
  out["num_files"] = summary.num_files;
  out["world_size"] = summary.world_size;
  nb::list copied;
  for (const std::string& name : summary.copied) copied.append(name);
  out["copied"] = copied;
  return out;
}

}  // namespace

nb::dict train_result_dict(const train::TrainResult& result) {
  nb::dict out;
  out["global_step"] = result.global_step;
  out["epoch"] = result.epoch;
  put(out, "train_loss", result.train_loss);
  put(out, "eval_loss", result.eval_loss);
  put(out, "eval_accuracy", result.eval_accuracy);
  put(out, "test_loss", result.test_loss);
  if (result.test_report) out["test_report"] = result.test_report->to_json_text();
  nb::list history;
  for (const train::LogEntry& entry : result.log_history) history.append(log_entry_dict(entry));
  out["log_history"] = history;
  out["preempted"] = result.preempted;
  nb::list plans;
  for (const train::RankPlan& plan : result.plan) plans.append(train::rank_plan_json(plan));
  out["plan"] = plans;
  return out;
}

void add_checkpoint(nb::module_& m) {
  m.def("checkpoint_info", &info, nb::arg("dir"), nb::arg("checksums") = true,
        "`zero checkpoint info DIR`: the checkpoint's index, validated.");
  m.def("checkpoint_consolidate", &consolidate, nb::arg("dir"), nb::arg("out"),
        "`zero checkpoint consolidate DIR OUT`: OUT/model.safetensors + config.json.");
}

}  // namespace zero::python
