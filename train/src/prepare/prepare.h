// What zero::train::train runs before it touches output_dir, and how it moves GPT-2 weights
// between the engine's shards and whole models (internal to zero::train).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "config/console.h"
#include "kind/prepared.h"
#include "kind/task_kind.h"
#include "zero/engine/engine.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/train/arguments.h"
#include "zero/train/run_config.h"

namespace zero::train::detail {

// check_arguments (arguments.h), then the rules of --task's own flags (TaskKind::check_arguments);
// returns --task's kind. Throws InputError naming the flag.
const TaskKind& checked_task(const TrainingArguments& arguments);

// Checks every input of `run` (arguments, files, model, tokenizer) and loads the data, on rank
// `rank` of run.world_size, writing nothing; throws InputError naming what is wrong. The engine's
// options are the run's (its scheduler's "auto" lengths from the steps counted here). Its lines go
// to `console` (rank 0's).
Prepared prepare(const RunConfig& run, int rank, const Console& console);

// `value` as indented JSON at `path`.
void write_json(const fs::path& path, const nlohmann::json& value);

// The tokenizer files into `folder` (the learned vocabulary, or the files it came from) and a
// tokenizer_config.json when there is none.
void save_tokenizer(const Prepared& prepared, const fs::path& folder);

// What a load left out, as Hugging Face's from_pretrained warns of it: the checkpoint's tensors the
// model has no use for (an LM's lm_head.weight read into a classifier) and the model's tensors the
// checkpoint lacks, which keep their initialisation (a classifier's score.weight from an LM).
struct PretrainedLoad {
  std::vector<std::string> unused;
  std::vector<std::string> newly_initialised;
};

// Streams a Hugging Face checkpoint's weights into this rank's shards, each rank reading only its
// partition (gpt2::load_hf_partitions): the body, and for the classifier score.weight when the
// checkpoint has it (else its initialisation stays).
template <typename Model>
PretrainedLoad load_pretrained(Model& model, const fs::path& folder) {
  std::span<const UnitId> body(model.units());
  std::vector<UnitId> extra;
  std::map<std::string, std::vector<std::int64_t>> optional;
  if constexpr (std::is_same_v<Model, gpt2::EngineClassifier>) {
    body = body.first(body.size() - 1);
    extra.push_back(model.score_unit());
    optional[gpt2::kScoreTensorName] = {model.head_config().num_labels, model.config().n_embd};
  }
  const gpt2::HFWeights weights(folder, model.config(), optional);
  gpt2::load_hf_partitions(model.engine(), body, weights, extra);
  PretrainedLoad load{.unused = weights.unused(), .newly_initialised = {}};
  for (const auto& [name, shape] : optional)
    if (!weights.contains(name)) load.newly_initialised.push_back(name);
  return load;
}

}  // namespace zero::train::detail
