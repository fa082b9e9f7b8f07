// zero::train's preparation: every input checked and loaded on every rank before rank 0 writes
// the first byte to output_dir; the tokenizer files saved beside a model.
#include "prepare.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <sstream>
#include <tuple>

#include "checkpointing.h"
#include "zero/optim/lr_schedules.h"
#include "zero/optim/optimizers.h"
#include "zero/text/progress.h"
#include "zero/text/sampler.h"
#include "zero/text/streaming.h"
#include "zero/text/text_files.h"
#include "zero/train/config_precedence.h"
#include "zero/train/dataset_folder.h"
#include "zero/train/trainer.h"

namespace zero::train::detail {
namespace {

using nlohmann::json;

std::vector<std::string> split_files(const std::vector<std::string>& specs) {
  std::vector<std::string> files;
  for (const std::string& spec : specs)
    for (std::size_t begin = 0; begin <= spec.size();) {
      const std::size_t end = std::min(spec.find(',', begin), spec.size());
      if (end > begin) files.push_back(spec.substr(begin, end - begin));
      begin = end + 1;
    }
  return files;
}

// The examples of a CSV file as datasets' csv builder gives them to run_clm: one per row, the
// "text" column (else the first); rows parsed by read_csv_table (RFC 4180). Throws zero::Error
// naming the file.
std::vector<std::string> read_csv_texts(const fs::path& path) {
  CsvTable table = read_csv_table(path);
  std::size_t column = 0;
  for (std::size_t c = 0; c < table.header.size(); ++c)
    if (table.header[c] == "text") column = c;
  std::vector<std::string> texts;
  for (std::vector<std::string>& row : table.rows)
    if (!row[column].empty()) texts.push_back(std::move(row[column]));
  if (texts.empty())
    throw Error(path.string() + ": no row has text in column '" + table.header[column] + "'");
  return texts;
}

// CSV files become JSON Lines files (one {"text": ...} per row) in `scratch`, the form the
// tokenizer trainer and text::load_lm_datasets read; other files pass through.
std::vector<fs::path> with_csv_as_json_lines(const std::vector<std::string>& files,
                                             const fs::path& scratch) {
  std::vector<fs::path> paths;
  for (const std::string& file : files) {
    if (fs::path(file).extension() != ".csv") {
      paths.emplace_back(file);
      continue;
    }
    fs::create_directories(scratch);
    const fs::path converted =
        scratch / (std::to_string(paths.size()) + "_" + fs::path(file).stem().string() + ".jsonl");
    {
      std::ofstream out(converted, std::ios::trunc);
      for (const std::string& text : read_csv_texts(file))
        out << json{{"text", text}}.dump() << "\n";
      ZERO_CHECK(out.good(), "cannot write ", converted.string());
    }
    // The CSV's time, so that the token cache keyed by it (text::data_key) finds it next run.
    fs::last_write_time(converted, fs::last_write_time(file));
    paths.push_back(converted);
  }
  return paths;
}

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

// --report_to tensorboard (or all): the config's tensorboard monitor writes to --logging_dir, as
// Hugging Face's TensorBoardCallback does; a tensorboard section the config enables stays its own.
void apply_report_to(const TrainingArguments& arguments, config::DeepSpeedConfig& config) {
  const std::string& to = arguments.report_to;
  if (to == "none") return;
  if (to != "tensorboard" && to != "all")
    throw Error("'" + to + "': zero reports to TensorBoard only (tensorboard, all or none)");
  if (config.tensorboard.enabled) return;
  config.tensorboard.enabled = true;
  config.tensorboard.output_path = arguments.logging_dir.empty()
                                       ? default_logging_dir(arguments.output_dir)
                                       : arguments.logging_dir;
  config.tensorboard.job_name = "";
}

bool has_tokenizer_files(const fs::path& folder) {
  return fs::exists(folder / "tokenizer.json") || fs::exists(folder / "vocab.json") ||
         fs::exists(folder / "encoder.json");
}

// The arguments alone, and output_dir: absent, or empty, or to be written into.
void check_run_arguments(const TrainingArguments& arguments) {
  as_input_error("arguments", [&] { check_arguments(arguments); });
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
struct DataFiles {
  std::vector<std::string> train, validation, test;
};

DataFiles check_data_files(const TrainingArguments& arguments, bool console) {
  DataFiles files{split_files(arguments.train_files), split_files(arguments.validation_files),
                  split_files(arguments.test_files)};
  if (!arguments.dataset_name.empty()) {  // run_clm's load_dataset(name, config_name)
    DatasetSplits splits = dataset_splits(arguments.dataset_name, arguments.dataset_name,
                                          arguments.dataset_config_name);
    if (console)
      std::printf("data: --dataset_name %s as %s files: %zu train, %zu validation, %zu test\n",
                  arguments.dataset_name.c_str(), splits.format.c_str(), splits.train.size(),
                  splits.validation.size(), splits.test.size());
    files = {std::move(splits.train), std::move(splits.validation), std::move(splits.test)};
  }
  for (const auto* split : {&files.train, &files.validation, &files.test})
    for (const std::string& file : *split) {
      as_input_error(split == &files.train        ? "--train_file"
                     : split == &files.validation ? "--validation_file"
                                                  : "--test_file",
                     [&] { return text::open_text_file(file); });
    }
  return files;
}

// Labelled examples (text-classification) by split, read before the tokenizer that may learn on
// them; the validation split taken from the train examples when none is given.
struct LabelledSplits {
  std::vector<LabelledText> train, validation, test;
};

LabelledSplits read_labelled_splits(const TrainingArguments& arguments, const DataFiles& files) {
  std::vector<std::string> text_columns;
  for (const std::string& column : split_files({arguments.text_column_names}))
    text_columns.push_back(column);
  auto read_all = [&](const std::vector<std::string>& paths, const char* flag) {
    std::vector<LabelledText> examples;
    for (const std::string& file : paths)
      for (LabelledText& example : as_input_error(flag, [&] {
             return read_labelled_file(file, text_columns, arguments.text_column_delimiter,
                                       arguments.label_column_name);
           }))
        examples.push_back(std::move(example));
    return examples;
  };
  LabelledSplits labelled;
  labelled.train = read_all(files.train, "--train_file");
  labelled.validation = read_all(files.validation, "--validation_file");
  if (arguments.do_predict) labelled.test = read_all(files.test, "--test_file");
  if (labelled.validation.empty() && arguments.do_eval) {
    if (labelled.train.empty()) input_error("--do_eval needs --validation_file or --train_file");
    as_input_error("validation split", [&] {
      split_validation(labelled.train, labelled.validation, arguments.validation_split_percentage,
                       arguments.seed);
    });
  }
  return labelled;
}

// The model's config from --model_name_or_path (and the classifier head it holds) or
// --config_name; GPT-2's defaults otherwise.
void load_model_config(const TrainingArguments& arguments, Prepared& prepared) {
  if (!arguments.model_name_or_path.empty()) {
    const fs::path folder = arguments.model_name_or_path;
    if (!fs::is_regular_file(folder / "config.json"))
      input_error("--model_name_or_path ", folder.string(),
                  ": no config.json there (a Hugging Face checkpoint folder: config.json and "
                  "model.safetensors)");
    prepared.model_config = as_input_error("--model_name_or_path " + folder.string(),
                                           [&] { return gpt2::load_hf_config(folder); });
    prepared.pretrained = true;
    if (prepared.classification) {
      const gpt2::ClassifierCheckpoint checkpoint =
          as_input_error("--model_name_or_path " + folder.string(),
                         [&] { return gpt2::load_classifier_config(folder); });
      prepared.pretrained_head = checkpoint.has_score;
      prepared.head = checkpoint.head;
    }
  } else if (!arguments.config_name.empty()) {
    fs::path path = arguments.config_name;
    if (fs::is_directory(path)) path /= "config.json";
    prepared.model_config = as_input_error("--config_name " + arguments.config_name,
                                           [&] { return gpt2::GPT2Config::load(path); });
  }
}

// The tokenizer: named, the model's, or learned on the training texts (the labelled train
// examples, else `train_paths`).
void load_tokenizer(const TrainingArguments& arguments, const DataFiles& files,
                    const LabelledSplits& labelled, const std::vector<fs::path>& train_paths,
                    bool console, Prepared& prepared) {
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
  if (files.train.empty() || (prepared.classification && labelled.train.empty()))
    input_error("no tokenizer: give --tokenizer_name or --train_file");
  const Clock::time_point start = Clock::now();
  text::BpeTrainer trainer({.vocab_size = static_cast<std::size_t>(arguments.tokenizer_vocab_size),
                            .min_frequency = 2,
                            .add_end_of_text = true});
  if (prepared.classification) {
    for (const LabelledText& example : labelled.train) trainer.add_text(example.text);
  } else {
    as_input_error("--train_file", [&] { trainer.add_files(train_paths); });
  }
  prepared.learned_vocabulary = trainer.train();
  prepared.tokenizer = text::Tokenizer(*prepared.learned_vocabulary);
  if (console)
    std::printf("tokenizer: byte-level BPE of %zu tokens learned on the training files in %.1f s\n",
                prepared.learned_vocabulary->tokens.size(), seconds_since(start));
}

// The model config sized to the tokenizer (from scratch), --config_overrides, and run_clm's
// block_size: min(1024, model max length) by default; larger than n_positions is an error.
void shape_model(const TrainingArguments& arguments, Prepared& prepared) {
  const std::optional<text::TokenId> end_of_text = prepared.tokenizer->end_of_text_id();
  gpt2::GPT2Config& model_config = prepared.model_config;
  if (!prepared.pretrained && arguments.config_name.empty()) {
    // From scratch on GPT-2's architecture, sized to the tokenizer.
    model_config.vocab_size = static_cast<std::int64_t>(prepared.tokenizer->vocab_size());
    if (end_of_text) model_config.bos_token_id = model_config.eos_token_id = *end_of_text;
  }
  if (!arguments.config_overrides.empty()) {
    if (prepared.pretrained)
      input_error("--config_overrides can't be used with --model_name_or_path (as run_clm)");
    as_input_error("--config_overrides",
                   [&] { model_config.apply_overrides(arguments.config_overrides); });
  }
  as_input_error("model config", [&] { model_config.validate(); });
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

// run_classification: the label list from the train examples (or the checkpoint's head when it
// has the same labels), ids truncated and padded to max_seq_length with the pad token.
void prepare_classification(const TrainingArguments& arguments, const LabelledSplits& labelled,
                            Prepared& prepared) {
  const gpt2::GPT2Config& model_config = prepared.model_config;
  const std::optional<text::TokenId> end_of_text = prepared.tokenizer->end_of_text_id();
  prepared.block_size = arguments.max_seq_length;
  if (prepared.block_size > model_config.n_positions)
    input_error("--max_seq_length ", prepared.block_size, " is larger than the model's ",
                "n_positions ", model_config.n_positions);
  std::vector<std::string> labels =
      label_list(labelled.train.empty() ? labelled.validation : labelled.train);
  if (labels.empty()) labels = label_list(labelled.test);
  if (prepared.pretrained_head) {
    std::vector<std::string> ours = labels, theirs = prepared.head.id2label;
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    if (ours != theirs && !labelled.train.empty())
      input_error("--model_name_or_path ", arguments.model_name_or_path,
                  ": its classifier's labels (id2label) are not the training labels");
    labels = prepared.head.id2label;
  }
  if (prepared.pretrained && !prepared.pretrained_head)
    prepared.head.pad_token_id = model_config.eos_token_id;
  if (!prepared.pretrained) {
    if (!end_of_text)
      input_error("the tokenizer has no <|endoftext|>, which pads the examples (pad_token_id)");
    prepared.head.pad_token_id = *end_of_text;
  }
  prepared.head.num_labels = static_cast<std::int64_t>(labels.size());
  prepared.head.id2label = labels;
  as_input_error("the classifier head", [&] { prepared.head.validate(model_config); });
  const int pad = static_cast<int>(prepared.head.pad_token_id);
  auto encode = [&](const std::vector<LabelledText>& examples, const char* what) {
    return as_input_error(what, [&] {
      return encode_examples(examples, labels, *prepared.tokenizer, prepared.block_size, pad, what,
                             arguments.preprocessing_num_workers);
    });
  };
  prepared.classify_train = encode(labelled.train, "--train_file");
  prepared.classify_validation = encode(labelled.validation, "--validation_file");
  prepared.classify_test = encode(labelled.test, "--test_file");
  prepared.train_blocks = prepared.classify_train.size();
  if (arguments.max_train_samples > 0)
    prepared.train_blocks =
        std::min<std::size_t>(prepared.train_blocks, arguments.max_train_samples);
  prepared.test_examples = prepared.classify_test.size();
  if (arguments.max_predict_samples > 0)
    prepared.test_examples =
        std::min<std::size_t>(prepared.test_examples, arguments.max_predict_samples);
  if (arguments.do_train && prepared.train_blocks == 0) input_error("--train_file: no example");
}

// run_clm --streaming: training blocks come from the files in order as training goes (no
// shuffle, no split); the validation files are tokenized up front.
void prepare_streaming(const TrainingArguments& arguments, int world, int rank, bool console,
                       const fs::path& cache, const std::vector<fs::path>& train_paths,
                       const std::vector<fs::path>& validation_paths, Prepared& prepared) {
  if (arguments.do_eval && validation_paths.empty())
    input_error("--streaming: evaluation needs --validation_file (a stream has no split)");
  if (arguments.do_train && train_paths.empty()) input_error("--do_train needs --train_file");
  if (!validation_paths.empty()) {
    text::TokenizeOptions tokenize;
    tokenize.num_threads = arguments.preprocessing_num_workers;
    tokenize.show_progress = console;
    tokenize.keep_linebreaks = arguments.keep_linebreaks;
    const auto stream =
        std::make_shared<const text::TokenStream>(as_input_error("--validation_file", [&] {
          return text::load_token_stream(validation_paths, *prepared.tokenizer, cache, tokenize,
                                         arguments.overwrite_cache);
        }));
    prepared.data.validation = text::group_texts(stream, 0, stream->num_examples(),
                                                 static_cast<std::size_t>(prepared.block_size));
  }
  prepared.streaming_files = train_paths;
  if (arguments.do_train) {
    // The stream must hold one global batch.
    text::StreamingShard probe(
        text::StreamingBlocks(train_paths, *prepared.tokenizer,
                              static_cast<std::size_t>(prepared.block_size)),
        static_cast<std::size_t>(arguments.per_device_train_batch_size * world), world, rank);
    std::vector<std::vector<text::TokenId>> blocks;
    if (!as_input_error("--train_file", [&] { return probe.next(blocks); }))
      input_error("--train_file: the stream holds fewer than one global batch of ",
                  arguments.per_device_train_batch_size * world, " blocks of ", prepared.block_size,
                  " tokens");
  }
}

// Where run_clm's tokenized data is cached (text::load_token_stream): --cache_dir/zero_tokens,
// else a .zero_cache folder beside the first data file, as datasets keeps its caches beside the
// data it maps.
fs::path token_cache_folder(const TrainingArguments& arguments, const DataFiles& files) {
  if (!arguments.cache_dir.empty()) return fs::path(arguments.cache_dir) / "zero_tokens";
  const std::string& first = files.train.empty() ? files.validation.at(0) : files.train.front();
  return fs::absolute(first).parent_path() / ".zero_cache";
}

// run_clm's splits and blocks.
void prepare_blocks(const TrainingArguments& arguments, bool console, const fs::path& cache,
                    const std::vector<fs::path>& train_paths,
                    const std::vector<fs::path>& validation_paths, Prepared& prepared) {
  text::DataArguments data_arguments;
  data_arguments.cache_dir = cache;
  data_arguments.overwrite_cache = arguments.overwrite_cache;
  data_arguments.train_files = train_paths.empty() ? validation_paths : train_paths;
  data_arguments.validation_files = validation_paths;
  data_arguments.validation_split_percentage = arguments.validation_split_percentage;
  data_arguments.block_size = static_cast<std::size_t>(prepared.block_size);
  data_arguments.tokenize.num_threads = arguments.preprocessing_num_workers;
  data_arguments.tokenize.show_progress = console;
  data_arguments.tokenize.keep_linebreaks = arguments.keep_linebreaks;
  prepared.data = as_input_error(
      "data", [&] { return text::load_lm_datasets(*prepared.tokenizer, data_arguments); });
  prepared.train_blocks = prepared.data.train.size();
  if (arguments.max_train_samples > 0)
    prepared.train_blocks =
        std::min<std::size_t>(prepared.train_blocks, arguments.max_train_samples);
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

}  // namespace

Prepared prepare(const TrainingArguments& arguments, int world, int rank, bool print) {
  const bool console = print && rank == 0;
  check_run_arguments(arguments);
  Prepared prepared;
  const DataFiles files = check_data_files(arguments, console);
  prepared.classification = arguments.task == "text-classification";
  LabelledSplits labelled;
  if (prepared.classification) labelled = read_labelled_splits(arguments, files);
  // CSV files are read here (run_clm's csv builder) and handed on as JSON Lines from a scratch
  // folder outside output_dir, removed when prepare() returns.
  prepared.scratch = std::make_shared<ScratchFolder>(
      fs::temp_directory_path() /
      ("zero_csv_scratch_" + std::to_string(::getpid()) + "_" + std::to_string(rank)));
  const ScratchFolder& scratch = *prepared.scratch;
  const std::vector<fs::path> train_paths =
      prepared.classification ? std::vector<fs::path>() : as_input_error("--train_file", [&] {
        return with_csv_as_json_lines(files.train, scratch.path);
      });
  const std::vector<fs::path> validation_paths =
      prepared.classification ? std::vector<fs::path>() : as_input_error("--validation_file", [&] {
        return with_csv_as_json_lines(files.validation, scratch.path);
      });
  if (!arguments.deepspeed.empty() && !fs::is_regular_file(arguments.deepspeed))
    input_error("--deepspeed ", arguments.deepspeed, ": no such file");

  load_model_config(arguments, prepared);
  load_tokenizer(arguments, files, labelled, train_paths, console, prepared);
  shape_model(arguments, prepared);
  if (prepared.classification) {
    prepare_classification(arguments, labelled, prepared);
  } else if (arguments.streaming) {
    prepare_streaming(arguments, world, rank, console, token_cache_folder(arguments, files),
                      train_paths, validation_paths, prepared);
  } else {
    prepare_blocks(arguments, console, token_cache_folder(arguments, files), train_paths,
                   validation_paths, prepared);
  }
  prepared.eval_blocks = prepared.classification ? prepared.classify_validation.size()
                                                 : prepared.data.validation.size();
  if (arguments.max_eval_samples > 0)
    prepared.eval_blocks = std::min<std::size_t>(prepared.eval_blocks, arguments.max_eval_samples);
  if (arguments.do_eval && prepared.eval_blocks == 0 && prepared.classification)
    input_error("--do_eval: the validation data holds no example");
  if (arguments.do_eval && prepared.eval_blocks == 0)
    input_error("--do_eval: the validation data holds no block of ", prepared.block_size,
                " tokens");
  count_steps(arguments, world, prepared);

  // The DeepSpeed config, "auto" filled from the arguments as Hugging Face's Trainer does.
  EngineSetup engine =
      resolve_engine(arguments, world, prepared.total_steps, prepared.model_config.n_embd);
  prepared.deepspeed = std::move(engine.deepspeed);
  prepared.engine = std::move(engine.engine);
  return prepared;
}

EngineSetup resolve_engine(const TrainingArguments& arguments, int world, std::int64_t total_steps,
                           std::optional<std::int64_t> hidden_size, const std::string& json_text) {
  EngineSetup setup;
  static constexpr std::string_view kDefaultConfig =
      R"({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
          "gradient_clipping": "auto", "zero_optimization": {"stage": 0},
          "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}})";
  std::string text = json_text;
  std::string source = "(the options given)";
  if (text.empty() && arguments.deepspeed.empty()) {
    text = kDefaultConfig;
    source = "(no --deepspeed)";
  } else if (text.empty()) {
    text = with_batch_from_flags(read_deepspeed_file(arguments.deepspeed));
    source = arguments.deepspeed;
  }
  // The config precedence rule (config_precedence.h): a flag not given yields to a value written
  // in the file; a given one must agree with it.
  const config::TrainerValues values =
      trainer_values_by_precedence(arguments, text, world, total_steps, hidden_size);
  const std::string what = json_text.empty() && !arguments.deepspeed.empty()
                               ? "--deepspeed " + arguments.deepspeed
                           : json_text.empty() ? std::string("the default config")
                                               : std::string("the DeepSpeed config");
  setup.deepspeed =
      as_input_error(what, [&] { return config::resolve_config(text, values, source); });
  as_input_error("--report_to", [&] { apply_report_to(arguments, setup.deepspeed.config); });
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
