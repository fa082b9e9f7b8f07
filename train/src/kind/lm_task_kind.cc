// The causal language-modelling task before its model exists (task_kind.h): run_clm's flags, its
// text files (CSV read as datasets' csv builder reads them, Arrow files as datasets' cache holds
// them), the token datasets in blocks or a stream, and the LmTask that trains them.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "config/input_checks.h"
#include "kind/prepared.h"
#include "kind/task_kind.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/text/arrow_stream.h"
#include "zero/text/streaming.h"
#include "zero/train/hub_cache.h"
#include "zero/train/token_dataset.h"

namespace zero::train::detail {
namespace {

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

// CSV and Arrow files become JSON Lines files (one {"text": ...} per row) in `scratch`, the form
// the tokenizer trainer and text::load_lm_datasets read; other files pass through.
std::vector<fs::path> with_tables_as_json_lines(const std::vector<std::string>& files,
                                                const fs::path& scratch) {
  std::vector<fs::path> paths;
  for (const std::string& file : files) {
    const fs::path extension = fs::path(file).extension();
    if (extension != ".csv" && extension != ".arrow") {
      paths.emplace_back(file);
      continue;
    }
    fs::create_directories(scratch);
    const fs::path converted =
        scratch / (std::to_string(paths.size()) + "_" + fs::path(file).stem().string() + ".jsonl");
    {
      std::ofstream out(converted, std::ios::trunc);
      const auto write = [&](std::string_view text) {
        out << nlohmann::json{{"text", text}}.dump() << "\n";
      };
      if (extension == ".csv") {
        for (const std::string& text : read_csv_texts(file)) write(text);
      } else {  // datasets' cache: the "text" column (else the first), null values left out
        const text::ArrowTextColumn column = text::for_each_arrow_text(file, write);
        ZERO_CHECK(column.num_rows > column.num_nulls, file, ": column '", column.name,
                   "' holds no text (", column.num_rows, " rows, ", column.num_nulls, " null)");
      }
      ZERO_CHECK(out.good(), "cannot write ", converted.string());
    }
    // The file's time, so that the token cache keyed by it (text::data_key) finds it next run.
    fs::last_write_time(converted, fs::last_write_time(file));
    paths.push_back(converted);
  }
  return paths;
}

// run_clm --streaming: training blocks come from the files in order as training goes (no
// shuffle, no split); the validation files are tokenized up front.
void prepare_streaming(const TrainingArguments& arguments, const PrepareScope& scope,
                       const fs::path& cache, const TaskSources& sources, Prepared& prepared) {
  if (arguments.do_eval && sources.validation_paths.empty())
    input_error("--streaming: evaluation needs --validation_file (a stream has no split)");
  if (arguments.do_train && sources.train_paths.empty())
    input_error("--do_train needs --train_file");
  if (!sources.validation_paths.empty()) {
    text::TokenizeOptions tokenize;
    tokenize.num_threads = arguments.preprocessing_num_workers;
    tokenize.show_progress = scope.console;
    tokenize.keep_linebreaks = arguments.keep_linebreaks;
    const auto stream =
        std::make_shared<const text::TokenStream>(as_input_error("--validation_file", [&] {
          return text::load_token_stream(sources.validation_paths, *prepared.tokenizer, cache,
                                         tokenize, arguments.overwrite_cache);
        }));
    prepared.data.validation = text::group_texts(stream, 0, stream->num_examples(),
                                                 static_cast<std::size_t>(prepared.block_size));
  }
  prepared.streaming_files = sources.train_paths;
  if (arguments.do_train) {
    // The stream must hold one global batch.
    const std::int64_t global_batch = arguments.per_device_train_batch_size * scope.world;
    text::StreamingShard probe(text::StreamingBlocks(sources.train_paths, *prepared.tokenizer,
                                                     static_cast<std::size_t>(prepared.block_size)),
                               static_cast<std::size_t>(global_batch), scope.world, scope.rank);
    std::vector<std::vector<text::TokenId>> blocks;
    if (!as_input_error("--train_file", [&] { return probe.next(blocks); }))
      input_error("--train_file: the stream holds fewer than one global batch of ", global_batch,
                  " blocks of ", prepared.block_size, " tokens");
  }
}

// Where run_clm's tokenized data is cached (text::load_token_stream): the zero_tokens folder of
// the datasets cache (--cache_dir, else HF_DATASETS_CACHE, else HF_HOME/datasets, else
// ~/.cache/huggingface/datasets), where datasets keeps what load_dataset prepares. Never beside
// the data: a data folder may be read-only, shared or a checkout. A file's cache is named by its
// content (text::data_key), so two files of one name do not meet there.
fs::path token_cache_folder(const TrainingArguments& arguments) {
  return datasets_cache_folder(arguments.cache_dir, process_environment()) / "zero_tokens";
}

// run_clm's splits and blocks.
void prepare_blocks(const TrainingArguments& arguments, const PrepareScope& scope,
                    const fs::path& cache, const TaskSources& sources, Prepared& prepared) {
  text::DataArguments data_arguments;
  data_arguments.cache_dir = cache;
  data_arguments.overwrite_cache = arguments.overwrite_cache;
  data_arguments.train_files =
      sources.train_paths.empty() ? sources.validation_paths : sources.train_paths;
  data_arguments.validation_files = sources.validation_paths;
  data_arguments.validation_split_percentage = arguments.validation_split_percentage;
  data_arguments.block_size = static_cast<std::size_t>(prepared.block_size);
  data_arguments.tokenize.num_threads = arguments.preprocessing_num_workers;
  data_arguments.tokenize.show_progress = scope.console;
  data_arguments.tokenize.keep_linebreaks = arguments.keep_linebreaks;
  prepared.data = as_input_error(
      "data", [&] { return text::load_lm_datasets(*prepared.tokenizer, data_arguments); });
  prepared.train_blocks = capped(prepared.data.train.size(), arguments.max_train_samples);
}

// run_clm's splits and blocks of token ids given in memory (TrainingArguments::train_dataset,
// validation_dataset): each checked against the model's vocabulary, then grouped as a file's
// tokenized examples are (a row is an example).
void prepare_token_datasets(const TrainingArguments& arguments, Prepared& prepared) {
  const TokenDataset* train = arguments.train_dataset.get();
  const TokenDataset* validation = arguments.validation_dataset.get();
  for (const TokenDataset* dataset : {train, validation})
    if (dataset != nullptr) check_token_ids(*dataset, prepared.model_config.vocab_size);
  text::DataArguments data_arguments;
  data_arguments.validation_split_percentage = arguments.validation_split_percentage;
  data_arguments.block_size = static_cast<std::size_t>(prepared.block_size);
  const TokenDataset& first = train != nullptr ? *train : *validation;  // eval only: as files
  prepared.data = as_input_error("data", [&] {
    return text::split_lm_datasets(first.rows, validation ? validation->rows : nullptr,
                                   data_arguments, first.name, validation ? validation->name : "");
  });
  prepared.train_blocks = capped(prepared.data.train.size(), arguments.max_train_samples);
}

class LmTaskKind final : public TaskKind {
 public:
  std::string_view name() const override { return "causal-lm"; }
  void check_arguments(const TrainingArguments& arguments) const override {
    if (arguments.do_predict || !arguments.test_files.empty())
      throw Error("--do_predict and --test_file need --task text-classification");
  }
  std::vector<std::string> evaluation_metrics() const override { return {"eval_loss"}; }
  bool planned() const override { return true; }

  TaskSources read_sources(const TrainingArguments& /*arguments*/, const DataFiles& files,
                           const fs::path& scratch) const override {
    TaskSources sources;
    sources.train_paths = as_input_error(
        "--train_file", [&] { return with_tables_as_json_lines(files.train, scratch); });
    sources.validation_paths = as_input_error(
        "--validation_file", [&] { return with_tables_as_json_lines(files.validation, scratch); });
    return sources;
  }
  void add_tokenizer_texts(const TaskSources& sources, text::BpeTrainer& trainer) const override {
    if (sources.train_paths.empty())
      input_error("no tokenizer: give --tokenizer_name or --train_file");
    as_input_error("--train_file", [&] { trainer.add_files(sources.train_paths); });
  }
  void prepare_data(const TrainingArguments& arguments, const DataFiles& /*files*/,
                    const TaskSources& sources, const PrepareScope& scope,
                    Prepared& prepared) const override {
    const fs::path cache = token_cache_folder(arguments);
    if (arguments.train_dataset || arguments.validation_dataset) {
      prepare_token_datasets(arguments, prepared);
    } else if (arguments.streaming) {
      prepare_streaming(arguments, scope, cache, sources, prepared);
    } else {
      prepare_blocks(arguments, scope, cache, sources, prepared);
    }
    prepared.eval_blocks = capped(prepared.data.validation.size(), arguments.max_eval_samples);
    if (arguments.do_eval && prepared.eval_blocks == 0)
      input_error("--do_eval: the validation data holds no block of ", prepared.block_size,
                  " tokens");
  }
};

}  // namespace

const TaskKind& lm_task_kind() {
  static const LmTaskKind kind;
  return kind;
}

}  // namespace zero::train::detail
