// Shared pieces of the text-classification trainer tests: labelled CSV examples and a tiny
// classifier's arguments.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "zero/train/arguments.h"

namespace zero::testing {

// `count` labelled lines: the label's topic words mixed with shared words, so the task is
// learnable but not trivial. Labels are names or (integers = true) 2, 10, 33.
inline void write_labelled_csv(const std::filesystem::path& file, int count, std::uint64_t seed,
                               bool integers = false) {
  static const char* kShared[] = {"the", "a", "of", "and", "is", "to", "my", "not", "where"};
  static const char* kTopics[3][4] = {{"sea", "ship", "wave", "sail"},
                                      {"sword", "battle", "crown", "king"},
                                      {"heart", "love", "thee", "fair"}};
  static const char* kNames[3] = {"sea", "war", "love"};
  static const char* kNumbers[3] = {"2", "10", "33"};
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 7;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::ofstream out(file);
  out << "id,text,label\n";
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(next() % 3);
    out << i << ",\"";
    const int words = 3 + static_cast<int>(next() % 6);
    for (int w = 0; w < words; ++w)
      out << (w ? " " : "") << (next() % 3 == 0 ? kTopics[label][next() % 4] : kShared[next() % 9]);
    out << "\"," << (integers ? kNumbers[label] : kNames[label]) << "\n";
  }
}

inline train::TrainingArguments classify_arguments(const std::filesystem::path& folder,
                                                   const std::filesystem::path& output) {
  train::TrainingArguments arguments;
  arguments.task = "text-classification";
  arguments.train_files = {(folder / "train.csv").string()};
  arguments.validation_files = {(folder / "validation.csv").string()};
  arguments.test_files = {(folder / "test.csv").string()};
  arguments.text_column_names = "text";
  arguments.max_seq_length = 12;
  arguments.config_overrides = "n_layer=2,n_embd=32,n_head=4,n_positions=16";
  arguments.tokenizer_vocab_size = 300;
  arguments.output_dir = output.string();
  arguments.do_train = arguments.do_eval = arguments.do_predict = true;
  arguments.per_device_train_batch_size = 8;
  arguments.per_device_eval_batch_size = 3;
  arguments.num_train_epochs = 2;  // 64 examples / 8: 8 steps per epoch
  arguments.logging_steps = 1;
  arguments.learning_rate = 3e-3;
  arguments.save_strategy = train::IntervalStrategy::kNo;
  arguments.plot = false;
  return arguments;
}

}  // namespace zero::testing
