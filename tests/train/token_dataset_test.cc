// Token ids given in memory (TrainingArguments::train_dataset/validation_dataset,
// zero/train/token_dataset.h) train as the texts they tokenize to train from files; bad ids are
// errors naming the dataset, row and position (issue 43).
#include "zero/train/token_dataset.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/test_data.h"
#include "train_test_util.h"
#include "zero/text/bpe_trainer.h"
#include "zero/text/tokenizer.h"

namespace zero::testing {
namespace {

// The corpus as texts (write_corpus' lines without their "\n"), a JSON Lines file of them, and a
// BPE learned on them, saved as vocab.json + merges.txt for --tokenizer_name.
class TokenDatasets : public ::testing::Test {
 protected:
  void SetUp() override {
    write_corpus(folder_.path() / "corpus.txt", 300);
    std::ifstream in(folder_.path() / "corpus.txt");
    for (std::string line; std::getline(in, line);) texts_.push_back(line);
    text::BpeTrainer trainer({.vocab_size = 300, .min_frequency = 2, .add_end_of_text = true});
    for (const std::string& text : texts_) trainer.add_text(text);
    text::save_vocab_and_merges(trainer.train(), tokenizer_folder());
  }
  fs::path tokenizer_folder() const { return folder_.path() / "tokenizer"; }
  // Rows [first, last) of the texts as a JSON Lines file.
  fs::path jsonl(const std::string& name, std::size_t first, std::size_t last) const {
    const fs::path path = folder_.path() / (name + ".jsonl");
    std::ofstream out(path);
    for (std::size_t i = first; i < last; ++i) out << nlohmann::json{{"text", texts_[i]}} << "\n";
    return path;
  }
  // Rows [first, last) of the texts as run_clm's tokenize_function gives them (the tokenizer's
  // special tokens recognised, its template added), as 64-bit ids.
  std::shared_ptr<const train::TokenDataset> ids(const std::string& name, std::size_t first,
                                                 std::size_t last) const {
    const text::Tokenizer tokenizer = text::Tokenizer::load(tokenizer_folder());
    train::TokenDatasetBuilder builder(name);
    for (std::size_t i = first; i < last; ++i) {
      const std::vector<text::TokenId> row = tokenizer.encode(
          texts_[i], text::SpecialTokens::kRecognize, text::AddSpecialTokens::kYes);
      const std::vector<std::int64_t> wide(row.begin(), row.end());
      builder.add_row(std::span<const std::int64_t>(wide));
    }
    return builder.finish();
  }
  train::TrainingArguments arguments(const std::string& out) const {
    train::TrainingArguments a = tiny_arguments({}, folder_.path() / out);
    a.train_files.clear();
    a.tokenizer_name = tokenizer_folder().string();
    a.max_steps = 8;
    a.do_eval = true;
    return a;
  }
  TempFolder folder_{"token_dataset"};
  std::vector<std::string> texts_;
};

void expect_same_run(const train::TrainResult& files, const train::TrainResult& ids) {
  const std::vector<double> expected = logged_losses(files.log_history);
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(logged_losses(ids.log_history), expected);
  ASSERT_TRUE(files.eval_loss.has_value());
  EXPECT_EQ(ids.eval_loss, files.eval_loss);
}

TEST_F(TokenDatasets, IdsTrainAndValidateAsTheTextsTheyTokenizeTo) {
  train::TrainingArguments from_files = arguments("files");
  from_files.train_files = {jsonl("train", 30, texts_.size()).string()};
  from_files.validation_files = {jsonl("validation", 0, 30).string()};
  train::TrainingArguments from_ids = arguments("ids");
  from_ids.train_dataset = ids("train_dataset", 30, texts_.size());
  from_ids.validation_dataset = ids("validation_dataset", 0, 30);
  expect_same_run(run_one(from_files), run_one(from_ids));
}

TEST_F(TokenDatasets, TrainIdsAloneSplitOffTheValidationRowsAsATrainFile) {
  train::TrainingArguments from_files = arguments("files");
  from_files.train_files = {jsonl("all", 0, texts_.size()).string()};
  from_files.validation_split_percentage = 10;
  train::TrainingArguments from_ids = arguments("ids");
  from_ids.train_dataset = ids("train_dataset", 0, texts_.size());
  from_ids.validation_split_percentage = 10;
  expect_same_run(run_one(from_files), run_one(from_ids));
}

TEST_F(TokenDatasets, RowsOfExactlyBlockSizeAreTheBlocks) {
  // The texts' ids concatenated and cut into rows of block_size (16) here: one group of rows, so
  // run_clm's group_texts gives back these rows, and the run is the texts' run.
  train::TrainingArguments from_files = arguments("files");
  from_files.train_files = {jsonl("all", 0, texts_.size()).string()};
  from_files.validation_split_percentage = 0;
  from_files.do_eval = false;
  const std::shared_ptr<const train::TokenDataset> all = ids("all", 0, texts_.size());
  const std::span<const text::TokenId> stream = all->rows->tokens();
  train::TokenDatasetBuilder builder("train_dataset");
  std::vector<std::int32_t> narrow(stream.begin(), stream.end());
  for (std::size_t start = 0; start + 16 <= narrow.size(); start += 16)
    builder.add_row(std::span<const std::int32_t>(narrow).subspan(start, 16));
  ASSERT_LT(builder.num_rows(), 1000u);
  train::TrainingArguments from_ids = arguments("ids");
  from_ids.do_eval = false;
  from_ids.validation_split_percentage = 0;  // else 5% of the rows, not of the texts, validate
  from_ids.train_dataset = builder.finish();
  const std::vector<double> expected = logged_losses(run_one(from_files).log_history);
  ASSERT_EQ(expected.size(), 8u);
  EXPECT_EQ(logged_losses(run_one(from_ids).log_history), expected);
}

TEST_F(TokenDatasets, ANegativeIdIsAnErrorNamingItsRowAndPosition) {
  train::TokenDatasetBuilder builder("train_dataset");
  const std::vector<std::int32_t> good = {1, 2, 3};
  builder.add_row(std::span<const std::int32_t>(good));
  const std::vector<std::int64_t> bad = {4, 5, -1, 6};
  const std::string message =
      error_of([&] { builder.add_row(std::span<const std::int64_t>(bad)); });
  EXPECT_NE(message.find("train_dataset[1][2]: token id -1 is negative"), std::string::npos)
      << message;
  const std::vector<std::int64_t> huge = {std::int64_t{1} << 40};
  const std::string large = error_of([&] { builder.add_row(std::span<const std::int64_t>(huge)); });
  EXPECT_NE(large.find("train_dataset[1][0]: token id 1099511627776 is larger than any token id"),
            std::string::npos)
      << large;
  EXPECT_EQ(builder.num_rows(), 1u);  // the bad rows left nothing behind
  const std::string empty = error_of([] { train::TokenDatasetBuilder("eval_dataset").finish(); });
  EXPECT_NE(empty.find("eval_dataset: no rows of token ids"), std::string::npos) << empty;
}

TEST_F(TokenDatasets, AnIdOutsideTheModelsVocabularyIsAnErrorNamingItsRowAndPosition) {
  train::TrainingArguments a = arguments("vocab");
  a.train_dataset = ids("train_dataset", 0, texts_.size());
  train::TokenDatasetBuilder builder("eval_dataset");
  const std::vector<std::int32_t> row0 = {1, 2}, row1 = {}, row2 = {3, 4, 299, 300, 5};
  for (const auto* row : {&row0, &row1, &row2})
    builder.add_row(std::span<const std::int32_t>(*row));
  a.validation_dataset = builder.finish();
  const std::string message = error_of([&] { run_one(a); });
  EXPECT_NE(
      message.find("eval_dataset[2][3]: token id 300 is not below the model's vocab_size 300"),
      std::string::npos)
      << message;
}

TEST_F(TokenDatasets, IdsRefuseFilesStreamingAndAMissingTokenizer) {
  train::TrainingArguments both = arguments("both");
  both.train_dataset = ids("train_dataset", 0, 50);
  both.validation_files = {jsonl("validation", 0, 30).string()};
  const std::string files = error_of([&] { run_one(both); });
  EXPECT_NE(files.find("train_dataset: give the data as token ids or as files"), std::string::npos)
      << files;
  train::TrainingArguments streaming = arguments("streaming");
  streaming.train_dataset = ids("train_dataset", 0, 50);
  streaming.streaming = true;
  const std::string stream = error_of([&] { run_one(streaming); });
  EXPECT_NE(stream.find("train_dataset: token ids in memory are not streamed"), std::string::npos)
      << stream;
  train::TrainingArguments untokenized = arguments("untokenized");
  untokenized.tokenizer_name.clear();
  untokenized.train_dataset = ids("train_dataset", 0, 50);
  const std::string tokenizer = error_of([&] { run_one(untokenized); });
  EXPECT_NE(tokenizer.find("token ids (train_dataset) need the tokenizer that made them"),
            std::string::npos)
      << tokenizer;
  train::TrainingArguments validation_only = arguments("validation_only");
  validation_only.validation_dataset = ids("validation_dataset", 0, 50);
  const std::string only = error_of([&] { run_one(validation_only); });
  EXPECT_NE(only.find("--do_train needs train_dataset"), std::string::npos) << only;
}

}  // namespace
}  // namespace zero::testing
