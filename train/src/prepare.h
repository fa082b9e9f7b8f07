// What zero::train::train runs before it touches output_dir, and how it moves GPT-2 weights
// between the engine's shards and whole models (internal to zero::train).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "task_kind.h"
#include "zero/config/ds_config.h"
#include "zero/core/allocator.h"
#include "zero/core/memory_ledger.h"
#include "zero/engine/engine.h"
#include "zero/engine/from_config.h"
#include "zero/gpt2/checkpoint_hf.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/engine_classifier.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/hf_weights.h"
#include "zero/gpt2/model.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/tokenizer.h"
#include "zero/train/arguments.h"
#include "zero/train/classification_data.h"
#include "zero/train/trainer.h"

namespace zero::train::detail {

namespace fs = std::filesystem;

// Bad input: an InputError (zero train exits 2) with the parts streamed into its message.
template <typename... Parts>
[[noreturn]] void input_error(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw InputError(message.str());
}

// Runs `body`; a zero::Error (any std::exception) from it becomes an InputError prefixed by `what`.
template <typename Body>
auto as_input_error(std::string_view what, Body&& body) {
  try {
    return body();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& error) {
    input_error(what, ": ", error.what());
  }
}

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `count` limited to `limit` when that is positive (--max_train_samples and the like).
inline std::size_t capped(std::size_t count, std::int64_t limit) {
  return limit > 0 ? std::min<std::size_t>(count, static_cast<std::size_t>(limit)) : count;
}

// The comma-separated lists of `specs` as one list ("a.txt,b.txt" "c.txt": three files).
std::vector<std::string> split_files(const std::vector<std::string>& specs);

// Removes a scratch folder when it goes out of scope.
struct ScratchFolder {
  fs::path path;
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// Everything checked and loaded before output_dir is touched.
struct Prepared {
  const TaskKind* task = nullptr;  // --task's
  gpt2::GPT2Config model_config;
  bool pretrained = false;
  std::optional<text::Tokenizer> tokenizer;
  std::optional<text::BpeVocabulary> learned_vocabulary;  // set when the tokenizer was learned
  fs::path tokenizer_folder;                              // else where its files are
  text::LmDatasets data;
  std::size_t train_blocks = 0;            // 0 with --streaming (unknown)
  std::vector<fs::path> streaming_files;   // --streaming: the train files, read as training goes
  std::shared_ptr<ScratchFolder> scratch;  // CSV files converted (kept while streaming)
  std::size_t eval_blocks = 0;
  std::int64_t block_size = 0;
  config::ConfigResult deepspeed;
  EngineOptionsResult engine;
  std::int64_t total_steps = 0;
  std::int64_t steps_per_epoch = 1;
  std::uint64_t batches_per_epoch = 0;
  // --task text-classification: the encoded splits, the head (labels, pad id), and whether the
  // checkpoint given holds a trained score.weight.
  ClassificationDataset classify_train, classify_validation, classify_test;
  gpt2::ClassifierConfig head;
  bool pretrained_head = false;
  std::size_t test_examples = 0;
};

// Checks every input (arguments, files, model, tokenizer, config) and loads the data, on every
// rank, writing nothing; throws InputError naming what is wrong.
Prepared prepare(const TrainingArguments& arguments, int world, int rank, bool print);

// The DeepSpeed config with "auto" filled from the arguments as Hugging Face's Trainer fills it
// (`json_text` when not empty, else --deepspeed, else stage 0 with the flags' AdamW), and the
// engine's options from it. `hidden_size` fills the "auto" bucket sizes and thresholds (none:
// such an "auto" is an error). Throws InputError naming the source. prepare() and the planner
// (plan.cc) both resolve through it.
struct EngineSetup {
  config::ConfigResult deepspeed;
  EngineOptionsResult engine;
};
EngineSetup resolve_engine(const TrainingArguments& arguments, int world, std::int64_t total_steps,
                           std::optional<std::int64_t> hidden_size,
                           const std::string& json_text = {});

// `value` as indented JSON at `path`.
void write_json(const fs::path& path, const nlohmann::json& value);

// The tokenizer files into `folder` (the learned vocabulary, or the files it came from) and a
// tokenizer_config.json when there is none.
void save_tokenizer(const Prepared& prepared, const fs::path& folder);

// Streams a Hugging Face checkpoint's weights into this rank's shards, each rank reading only its
// partition (gpt2::load_hf_partitions): the body, and for the classifier score.weight when the
// checkpoint has it (else its initialisation stays).
template <typename Model>
void load_pretrained(Model& model, const fs::path& folder) {
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
}

}  // namespace zero::train::detail
