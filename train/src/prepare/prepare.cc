// zero::train's preparation: every input checked and loaded on every rank before rank 0 writes
// the first byte to output_dir; the tokenizer files saved beside a model.
#include "prepare/prepare.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "config/console.h"
#include "config/engine_setup.h"
#include "config/input_checks.h"
#include "prepare/model_config.h"
#include "prepare/resume_folder.h"
#include "zero/gpt2/family.h"
#include "zero/text/text_files.h"
#include "zero/train/dataset_folder.h"
#include "zero/train/token_dataset.h"

namespace zero::train::detail {
namespace {

using nlohmann::json;

bool has_tokenizer_files(const fs::path& folder) {
  return fs::exists(folder / "tokenizer.json") || fs::exists(folder / "vocab.json") ||
         fs::exists(folder / "encoder.json");
}

// The arguments alone, and output_dir: absent, or empty, or to be written into.
void check_run_arguments(const TrainingArguments& arguments) {
  checked_task(arguments);
  if (arguments.streaming && arguments.max_steps <= 0)
    input_error("--streaming needs --max_steps: a stream has no length (as in Hugging Face)");
  const fs::path output_dir = arguments.output_dir;
  if (fs::exists(output_dir)) {
    if (!fs::is_directory(output_dir))
      input_error("--output_dir ", output_dir.string(), " exists and is not a folder");
    if (!fs::is_empty(output_dir) && !arguments.overwrite_output_dir &&
        !resume_folder(arguments))  // run_clm: resuming writes into it
      input_error("--output_dir ", output_dir.string(),
                  " already exists and is not empty; use --overwrite_output_dir to write into it");
  }
}

// The data files by split: present, non-empty and text, checked before any work.
DataFiles check_data_files(const TrainingArguments& arguments, const Console& console) {
  DataFiles files{split_files(arguments.train_files), split_files(arguments.validation_files),
                  split_files(arguments.test_files)};
  if (!arguments.dataset_name.empty()) {  // run_clm's load_dataset(name, config_name)
    DatasetSplits splits = dataset_splits(arguments.dataset_name, arguments.dataset_name,
                                          arguments.dataset_config_name, arguments.cache_dir);
    console.say("data: --dataset_name %s as %s files: %zu train, %zu validation, %zu test\n",
                arguments.dataset_name.c_str(), splits.format.c_str(), splits.train.size(),
                splits.validation.size(), splits.test.size());
    files = {std::move(splits.train), std::move(splits.validation), std::move(splits.test)};
  }
  for (const auto* split : {&files.train, &files.validation, &files.test})
    for (const std::string& file : *split) {
      if (fs::path(file).extension() == ".arrow") continue;  // read when converted (read_sources)
      as_input_error(split == &files.train        ? "--train_file"
                     : split == &files.validation ? "--validation_file"
                                                  : "--test_file",
                     [&] { return text::open_text_file(file); });
    }
  return files;
}

// The tokenizer: named, the model's, or learned on the task's training texts.
void load_tokenizer(const TrainingArguments& arguments, const TaskSources& sources,
                    const Console& console, Prepared& prepared) {
  fs::path tokenizer_folder = arguments.tokenizer_name;
  if (tokenizer_folder.empty() && !arguments.model_name_or_path.empty() &&
      has_tokenizer_files(arguments.model_name_or_path))
    tokenizer_folder = arguments.model_name_or_path;
  if (!tokenizer_folder.empty()) {
    prepared.tokenizer = as_input_error("tokenizer " + tokenizer_folder.string(),
                                        [&] { return text::Tokenizer::load(tokenizer_folder); });
    prepared.tokenizer_folder = tokenizer_folder;
    return;
  }
  if (prepared.pretrained)
    input_error("--model_name_or_path ", arguments.model_name_or_path,
                " holds no tokenizer files; give --tokenizer_name");
  if (arguments.train_dataset || arguments.validation_dataset)
    input_error(
        "token ids (",
        (arguments.train_dataset ? arguments.train_dataset : arguments.validation_dataset)->name,
        ") need the tokenizer that made them: give --tokenizer_name (its files are saved "
        "with the model)");
  const Clock::time_point start = Clock::now();
  text::BpeTrainer trainer({.vocab_size = static_cast<std::size_t>(arguments.tokenizer_vocab_size),
                            .min_frequency = 2,
                            .add_end_of_text = true});
  prepared.task->add_tokenizer_texts(sources, trainer);
  prepared.learned_vocabulary = trainer.train();
  prepared.tokenizer = text::Tokenizer(*prepared.learned_vocabulary);
  console.say("tokenizer: byte-level BPE of %zu tokens learned on the training files in %.1f s\n",
              prepared.learned_vocabulary->tokens.size(), seconds_since(start));
}

// The model's config (model_config_from_flags; from scratch, GPT-2's shape sized to the tokenizer)
// and what of the checkpoint's is the task's, and run_clm's block_size: min(1024, model max
// length) by default; larger than n_positions is an error.
void shape_model(const TrainingArguments& arguments, Prepared& prepared) {
  gpt2::GPT2Config scratch;
  scratch.vocab_size = static_cast<std::int64_t>(prepared.tokenizer->vocab_size());
  if (const std::optional<text::TokenId> end_of_text = prepared.tokenizer->end_of_text_id())
    scratch.bos_token_id = scratch.eos_token_id = *end_of_text;
  prepared.model_config = model_config_from_flags(arguments, scratch);
  if (prepared.pretrained)
    prepared.task->load_checkpoint_config(arguments.model_name_or_path, prepared);
  const gpt2::GPT2Config& model_config = prepared.model_config;
  if (static_cast<std::int64_t>(prepared.tokenizer->vocab_size()) > model_config.vocab_size)
    input_error("the tokenizer has ", prepared.tokenizer->vocab_size(),
                " tokens but the model's vocab_size is ", model_config.vocab_size);
  prepared.block_size = arguments.block_size > 0
                            ? arguments.block_size
                            : std::min<std::int64_t>(1024, model_config.n_positions);
  if (prepared.block_size > model_config.n_positions)
    input_error("--block_size ", prepared.block_size, " is larger than the model's n_positions ",
                model_config.n_positions);
}

// Steps: Hugging Face's rule (max_steps, else ceil(epochs × updates per epoch)).
void count_steps(const TrainingArguments& arguments, int world, Prepared& prepared) {
  const std::int64_t B = arguments.per_device_train_batch_size;
  const std::int64_t accumulation = arguments.gradient_accumulation_steps;
  const std::size_t global_batch = static_cast<std::size_t>(B * world);
  // (With --streaming the length is unknown: an "epoch" is the max_steps run.)
  // --dataloader_drop_last: an epoch's last incomplete global batch is not one.
  prepared.batches_per_epoch =
      arguments.streaming ? static_cast<std::uint64_t>(arguments.max_steps * accumulation)
      : arguments.dataloader_drop_last ? prepared.train_blocks / global_batch
                                       : (prepared.train_blocks + global_batch - 1) / global_batch;
  if (arguments.do_train && !arguments.streaming && prepared.batches_per_epoch == 0)
    input_error("--dataloader_drop_last: the ", prepared.train_blocks,
                " train blocks make no whole global batch of ", global_batch);
  prepared.steps_per_epoch = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(prepared.batches_per_epoch) / accumulation);
  prepared.total_steps =
      arguments.max_steps > 0
          ? arguments.max_steps
          : static_cast<std::int64_t>(std::ceil(arguments.num_train_epochs *
                                                static_cast<double>(prepared.steps_per_epoch)));
  prepared.total_steps = std::max<std::int64_t>(prepared.total_steps, 1);
}

// The run's DeepSpeed config and engine options: those resolved where the run started, with a
// "scheduler" section's "auto" lengths filled from the steps counted in the data when --max_steps
// did not give them (Hugging Face's trainer_config_finalize): the same text, resolved for them.
EngineSetup run_engine(const RunConfig& run, std::int64_t total_steps) {
  if (run.arguments.max_steps > 0 ||
      run.engine.options.scheduler.type == config::SchedulerType::kNone)
    return {run.deepspeed, run.engine};
  return resolve_engine(run.arguments, run.deepspeed_text, run.world_size, total_steps,
                        run.hidden_size);
}

}  // namespace

const TaskKind& checked_task(const TrainingArguments& arguments) {
  return *as_input_error("arguments", [&] {
    check_arguments(arguments);
    const TaskKind* kind = &task_kind(arguments.task);
    kind->check_arguments(arguments);  // its own flags' rules
    return kind;
  });
}

Prepared prepare(const RunConfig& run, int rank, const Console& console) {
  const TrainingArguments& arguments = run.arguments;
  const int world = run.world_size;
  const PrepareScope scope{.world = world, .rank = rank, .console = console.progress_bars()};
  check_run_arguments(arguments);
  Prepared prepared;
  prepared.task = &task_kind(arguments.task);
  prepared.pretrained = !arguments.model_name_or_path.empty();
  const DataFiles files = check_data_files(arguments, console);
  // CSV files the task converts go to a scratch folder outside output_dir, removed when prepare()
  // returns (or when streaming ends).
  prepared.scratch = std::make_shared<ScratchFolder>(
      fs::temp_directory_path() /
      ("zero_csv_scratch_" + std::to_string(::getpid()) + "_" + std::to_string(rank)));
  const TaskSources sources = prepared.task->read_sources(arguments, files, prepared.scratch->path);

  load_tokenizer(arguments, sources, console, prepared);
  shape_model(arguments, prepared);
  prepared.task->prepare_data(arguments, files, sources, scope, prepared);
  count_steps(arguments, world, prepared);
  EngineSetup engine = run_engine(run, prepared.total_steps);
  prepared.deepspeed = std::move(engine.deepspeed);
  prepared.engine = std::move(engine.engine);
  return prepared;
}

void write_json(const fs::path& path, const json& value) {
  std::ofstream out(path, std::ios::trunc);
  ZERO_CHECK(out.good(), "cannot write ", path.string());
  out << value.dump(2) << "\n";
}

void save_tokenizer(const Prepared& prepared, const fs::path& folder) {
  if (prepared.learned_vocabulary) {
    text::save_vocab_and_merges(*prepared.learned_vocabulary, folder);
  } else {
    for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt", "encoder.json",
                             "vocab.bpe", "special_tokens_map.json", "tokenizer_config.json"})
      if (fs::exists(prepared.tokenizer_folder / name) &&
          !fs::equivalent(prepared.tokenizer_folder, folder))
        fs::copy_file(prepared.tokenizer_folder / name, folder / name,
                      fs::copy_options::overwrite_existing);
  }
  if (!fs::exists(folder / "tokenizer_config.json")) {
    json config = {{"tokenizer_class", "GPT2Tokenizer"},
                   {"model_max_length", prepared.model_config.n_positions},
                   {"add_prefix_space", false}};
    if (prepared.tokenizer->end_of_text_id())
      for (const char* key : {"bos_token", "eos_token", "unk_token"}) config[key] = "<|endoftext|>";
    write_json(folder / "tokenizer_config.json", config);
  }
}

}  // namespace zero::train::detail
