// What zero::train::prepare() checks and loads before output_dir is touched (internal to
// zero::train): the model's config, the tokenizer, the task's encoded data, the run's length and
// its engine. A TaskKind (task_kind.h) fills its own part of it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "zero/config/ds_config.h"
#include "zero/engine/from_config.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/config.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/lm_dataset.h"
#include "zero/text/tokenizer.h"
#include "zero/train/classification_data.h"

namespace zero::train::detail {

namespace fs = std::filesystem;

class TaskKind;

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

}  // namespace zero::train::detail
