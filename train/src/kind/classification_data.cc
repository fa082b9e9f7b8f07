// Labelled documents: CSV and JSON Lines readers, the label list, tokenized and padded examples.
#include "zero/train/classification_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "zero/core/error.h"
#include "zero/gpt2/rng.h"
#include "zero/text/text_files.h"

namespace zero::train {
namespace {

namespace fs = std::filesystem;

bool is_integer_text(const std::string& text) {
  if (text.empty()) return false;
  const std::size_t start = text[0] == '-' ? 1 : 0;
  return start < text.size() &&
         std::all_of(text.begin() + static_cast<std::ptrdiff_t>(start), text.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

std::string joined(const std::vector<std::string>& columns) {
  std::string out;
  for (const std::string& column : columns) out += (out.empty() ? "'" : ", '") + column + "'";
  return out;
}

// A decimal number pandas reads as a float ("1.5", "-2", "3e-1"), whole.
bool is_number_text(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return false;
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// The label as an error message quotes it: 'text', or a list as ['a', 'b'].
std::string quoted(const LabelledText& example) {
  if (example.kind != LabelKind::kList) return "'" + example.label + "'";
  return "[" + joined(example.classes) + "]";
}

// pandas' type of a CSV label column: integers, floats when one number is not an integer, else
// strings.
LabelKind csv_column_kind(const std::vector<LabelledText>& examples) {
  bool integers = true;
  for (const LabelledText& example : examples) {
    if (!is_number_text(example.label)) return LabelKind::kString;
    integers = integers && is_integer_text(example.label);
  }
  return integers ? LabelKind::kInteger : LabelKind::kFloat;
}

// A JSON label: its kind and text (a list's classes), or a zero::Error naming the value.
void read_json_label(const nlohmann::json& label, const std::string& where, LabelledText& example) {
  auto scalar = [&](const nlohmann::json& value, std::string& out) {
    if (value.is_number_integer()) {
      out = std::to_string(value.get<std::int64_t>());
      return LabelKind::kInteger;
    }
    if (value.is_number_float()) {
      out = value.dump();
      return LabelKind::kFloat;
    }
    ZERO_CHECK(value.is_string() && !value.get<std::string>().empty(), where, ": label ",
               label.dump(), value == label ? "" : " holds " + value.dump() + ", which",
               " is neither a non-empty string, a number nor a list of strings or integers");
    out = value.get<std::string>();
    return LabelKind::kString;
  };
  if (!label.is_array()) {
    example.kind = scalar(label, example.label);
    return;
  }
  example.kind = LabelKind::kList;
  for (const nlohmann::json& value : label) {
    std::string text;
    const LabelKind kind = scalar(value, text);
    ZERO_CHECK(kind != LabelKind::kFloat, where, ": label ", label.dump(), " holds the float ",
               value.dump(), "; a list label's classes are strings or integers");
    example.classes.push_back(std::move(text));
  }
}

}  // namespace

std::string_view name_of(LabelKind kind) {
  switch (kind) {
    case LabelKind::kString: return "string";
    case LabelKind::kInteger: return "integer";
    case LabelKind::kFloat: return "float";
    case LabelKind::kList: return "list";
  }
  return "?";
}

CsvTable read_csv_table(const fs::path& path) {
  const text::MappedFile file = text::open_text_file(path);
  const std::string_view bytes = file.bytes();
  std::vector<std::vector<std::string>> rows(1);
  std::string field;
  bool quoted = false, field_started = false;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (quoted) {
      if (c == '"' && i + 1 < bytes.size() && bytes[i + 1] == '"') {
        field.push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field.push_back(c);
      }
      continue;
    }
    if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      rows.back().push_back(std::move(field));
      field.clear();
      field_started = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
      rows.back().push_back(std::move(field));
      field.clear();
      field_started = false;
      rows.emplace_back();
    } else {
      field.push_back(c);
      field_started = true;
    }
  }
  ZERO_CHECK(!quoted, path.string(), ": a quoted field is not closed at the end of the file");
  if (field_started || !rows.back().empty()) rows.back().push_back(std::move(field));
  std::erase_if(rows, [](const std::vector<std::string>& row) {
    return row.empty() || (row.size() == 1 && row[0].empty());
  });
  ZERO_CHECK(!rows.empty(), path.string(), ": no header row");
  CsvTable table;
  table.header = std::move(rows.front());
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ZERO_CHECK(rows[r].size() == table.header.size(), path.string(), ": row ", r + 1, " has ",
               rows[r].size(), " fields, the header ", table.header.size());
    table.rows.push_back(std::move(rows[r]));
  }
  return table;
}

std::vector<LabelledText> read_labelled_file(const fs::path& path,
                                             const std::vector<std::string>& text_columns,
                                             const std::string& delimiter,
                                             const std::string& label_column) {
  ZERO_CHECK(!text_columns.empty(), "no text column named (--text_column_names)");
  std::vector<LabelledText> examples;
  const std::string extension = path.extension().string();
  if (extension == ".csv") {
    const CsvTable table = read_csv_table(path);
    auto column_of = [&](const std::string& name, const char* flag) {
      const auto found = std::find(table.header.begin(), table.header.end(), name);
      ZERO_CHECK(found != table.header.end(), path.string(), ": no column '", name, "' (", flag,
                 "); the header has ", joined(table.header));
      return static_cast<std::size_t>(found - table.header.begin());
    };
    std::vector<std::size_t> text_indices;
    for (const std::string& name : text_columns)
      text_indices.push_back(column_of(name, "--text_column_names"));
    const std::size_t label_index = column_of(label_column, "--label_column_name");
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      LabelledText example;
      for (std::size_t c = 0; c < text_indices.size(); ++c)
        example.text += (c ? delimiter : "") + table.rows[r][text_indices[c]];
      example.label = table.rows[r][label_index];
      ZERO_CHECK(!example.label.empty(), path.string(), ": row ", r + 2, " has an empty '",
                 label_column, "'");
      examples.push_back(std::move(example));
    }
    const LabelKind kind = csv_column_kind(examples);
    for (LabelledText& example : examples) example.kind = kind;
  } else if (extension == ".json" || extension == ".jsonl") {
    const text::MappedFile file = text::open_text_file(path);
    const std::string_view bytes = file.bytes();
    text::for_each_json_object(
        bytes, path, [&](const nlohmann::json& record, std::size_t line_number) {
          LabelledText example;
          for (std::size_t c = 0; c < text_columns.size(); ++c) {
            const auto field = record.find(text_columns[c]);
            ZERO_CHECK(field != record.end() && field->is_string(), path.string(), ":", line_number,
                       ": no string '", text_columns[c], "' (--text_column_names)");
            example.text += (c ? delimiter : "") + field->get<std::string>();
          }
          const auto label = record.find(label_column);
          ZERO_CHECK(label != record.end(), path.string(), ":", line_number, ": no '", label_column,
                     "' (--label_column_name)");
          const std::string where = path.string() + ":" + std::to_string(line_number);
          read_json_label(*label, where, example);
          // pyarrow reads one type a column: integers beside floats are floats; any other mix
          // fails to load.
          if (!examples.empty()) {
            const LabelledText& first = examples.front();
            const auto numeric = [](LabelKind kind) {
              return kind == LabelKind::kInteger || kind == LabelKind::kFloat;
            };
            ZERO_CHECK(first.kind == example.kind || (numeric(first.kind) && numeric(example.kind)),
                       where, ": label ", label->dump(), " is a ", name_of(example.kind),
                       ", the file's first label ", quoted(first), " a ", name_of(first.kind),
                       ": a label column holds one kind (strings, numbers or lists)");
          }
          examples.push_back(std::move(example));
        });
    const bool floats = std::any_of(examples.begin(), examples.end(), [](const LabelledText& e) {
      return e.kind == LabelKind::kFloat;
    });
    if (floats)
      for (LabelledText& example : examples) example.kind = LabelKind::kFloat;
  } else {
    ZERO_THROW(path.string(), ": labelled data must be .csv, .json or .jsonl, not '", extension,
               "'");
  }
  ZERO_CHECK(!examples.empty(), path.string(), ": no example");
  return examples;
}

gpt2::ProblemType problem_type_of(std::span<const LabelledText> examples,
                                  std::optional<bool> do_regression) {
  const LabelKind kind = examples.empty() ? LabelKind::kString : examples.front().kind;
  if (do_regression.value_or(kind == LabelKind::kFloat)) return gpt2::ProblemType::kRegression;
  return kind == LabelKind::kList ? gpt2::ProblemType::kMultiLabel
                                  : gpt2::ProblemType::kSingleLabel;
}

std::string classification_metric_key(gpt2::ProblemType problem) {
  switch (problem) {
    case gpt2::ProblemType::kSingleLabel: return "eval_accuracy";
    case gpt2::ProblemType::kRegression: return "eval_mse";
    case gpt2::ProblemType::kMultiLabel: return "eval_f1";
  }
  return "eval_accuracy";
}

std::vector<std::string> label_list(std::span<const LabelledText> examples,
                                    gpt2::ProblemType problem) {
  if (problem == gpt2::ProblemType::kRegression) return {"LABEL_0"};
  std::set<std::string> distinct;
  for (const LabelledText& example : examples) {
    if (example.kind == LabelKind::kList)
      distinct.insert(example.classes.begin(), example.classes.end());
    else
      distinct.insert(example.label);
  }
  std::vector<std::string> labels(distinct.begin(), distinct.end());
  if (std::all_of(labels.begin(), labels.end(), is_integer_text))
    std::sort(labels.begin(), labels.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a) < std::stoll(b);
    });
  return labels;
}

namespace {

// Example i's label as `problem` reads it: data.labels[i] (single-label) or data.targets' row i.
void encode_label(const LabelledText& example, std::size_t i,
                  const std::vector<std::string>& labels, const std::string& what,
                  ClassificationDataset& data) {
  auto id_of = [&](const std::string& label) {
    const auto found = std::find(labels.begin(), labels.end(), label);
    if (found == labels.end()) {
      std::string known;
      for (const std::string& name : labels) known += (known.empty() ? "" : ", ") + name;
      ZERO_THROW(what, ": example ", i + 1, " has label ", quoted(example),
                 example.kind == LabelKind::kList ? ", whose class '" + label + "' is" : ",",
                 " not one of the training labels (", known, ")");
    }
    return static_cast<std::size_t>(found - labels.begin());
  };
  const std::size_t K = labels.size();
  switch (data.problem) {
    case gpt2::ProblemType::kSingleLabel:
      ZERO_CHECK(example.kind != LabelKind::kList, what, ": example ", i + 1,
                 " has the list label ", quoted(example),
                 "; the train split's labels are not lists (multi-label ",
                 "classification takes a list label in every split)");
      data.labels[i] = static_cast<int>(id_of(example.label));
      return;
    case gpt2::ProblemType::kRegression:
      ZERO_CHECK(example.kind == LabelKind::kInteger || example.kind == LabelKind::kFloat ||
                     (example.kind == LabelKind::kString && is_number_text(example.label)),
                 what, ": example ", i + 1, " has label ", quoted(example), ", a ",
                 name_of(example.kind), " where regression (a float label column, or ",
                 "--do_regression) takes numbers");
      data.targets[i] = std::strtof(example.label.c_str(), nullptr);
      ZERO_CHECK(std::isfinite(data.targets[i]), what, ": example ", i + 1, " has label ",
                 quoted(example), ", which is not a finite float (regression targets are fp32)");
      return;
    case gpt2::ProblemType::kMultiLabel:
      ZERO_CHECK(example.kind == LabelKind::kList, what, ": example ", i + 1, " has label ",
                 quoted(example), ", a ", name_of(example.kind),
                 "; the train split's labels are lists (multi-label classification), so every "
                 "split's are");
      for (const std::string& label : example.classes) data.targets[i * K + id_of(label)] = 1.0f;
      return;
  }
}

}  // namespace

ClassificationDataset encode_examples(std::span<const LabelledText> examples,
                                      const std::vector<std::string>& labels,
                                      gpt2::ProblemType problem, const text::Tokenizer& tokenizer,
                                      std::int64_t max_seq_length, int pad_id,
                                      const std::string& what, int num_threads) {
  ZERO_CHECK(max_seq_length >= 1, "--max_seq_length must be at least 1, got ", max_seq_length);
  ClassificationDataset data;
  data.problem = problem;
  data.num_labels = static_cast<std::int64_t>(labels.size());
  const std::int64_t T = data.seq_len = max_seq_length;
  const std::size_t N = examples.size();
  data.tokens.assign(N * static_cast<std::size_t>(T), pad_id);
  if (data.float_targets())
    data.targets.assign(N * labels.size(), 0.0f);
  else
    data.labels.resize(N);
  for (std::size_t i = 0; i < N; ++i) encode_label(examples[i], i, labels, what, data);
  const int threads = num_threads > 0
                          ? num_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::int64_t> truncated(static_cast<std::size_t>(threads), 0);
  std::vector<std::thread> workers;
  for (int w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      std::vector<text::TokenId> ids;
      for (std::size_t i = static_cast<std::size_t>(w); i < N;
           i += static_cast<std::size_t>(threads)) {
        ids.clear();
        tokenizer.encode_append(examples[i].text, ids);
        if (static_cast<std::int64_t>(ids.size()) > T) ++truncated[static_cast<std::size_t>(w)];
        const std::size_t count = std::min<std::size_t>(ids.size(), static_cast<std::size_t>(T));
        for (std::size_t t = 0; t < count; ++t)
          data.tokens[i * static_cast<std::size_t>(T) + t] = static_cast<int>(ids[t]);
      }
    });
  for (std::thread& worker : workers) worker.join();
  for (std::int64_t count : truncated) data.truncated += count;
  return data;
}

void split_validation(std::vector<LabelledText>& train, std::vector<LabelledText>& validation,
                      int percentage, std::uint64_t seed) {
  ZERO_CHECK(percentage > 0 && percentage < 100,
             "--validation_split_percentage must be in (0, 100), got ", percentage);
  const std::size_t n = train.size();
  const auto held =
      static_cast<std::size_t>(std::ceil(static_cast<double>(n) * percentage / 100.0));
  ZERO_CHECK(held >= 1 && held < n, "--validation_split_percentage ", percentage, " of ", n,
             " examples leaves no train or no validation example");
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  // Fisher-Yates over a counter-based stream of (seed, "validation split").
  const std::uint64_t key = gpt2::derive_key(seed, gpt2::hash_name("validation split"));
  for (std::size_t i = n - 1; i > 0; --i) {
    const std::size_t j = gpt2::mix64(key + i) % (i + 1);
    std::swap(order[i], order[j]);
  }
  std::vector<LabelledText> rest;
  for (std::size_t k = 0; k < n; ++k)
    (k < held ? validation : rest).push_back(std::move(train[order[k]]));
  train = std::move(rest);
}

void fill_classification_batch(const ClassificationDataset& data,
                               std::span<const std::size_t> indices, std::int64_t B, int pad_id,
                               std::vector<int>& tokens, std::vector<int>& labels,
                               std::vector<float>& targets) {
  const std::size_t T = static_cast<std::size_t>(data.seq_len);
  const std::size_t K = static_cast<std::size_t>(data.num_labels);
  ZERO_CHECK(static_cast<std::int64_t>(indices.size()) <= B,
             "classification batch: ", indices.size(), " rows for B=", B);
  tokens.assign(static_cast<std::size_t>(B) * T, pad_id);
  labels.assign(static_cast<std::size_t>(B), -100);
  targets.clear();
  if (data.float_targets())
    targets.assign(static_cast<std::size_t>(B) * K, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t b = 0; b < indices.size(); ++b) {
    std::copy_n(data.tokens.begin() + static_cast<std::ptrdiff_t>(indices[b] * T), T,
                tokens.begin() + static_cast<std::ptrdiff_t>(b * T));
    if (data.float_targets()) {
      labels[b] = 0;
      std::copy_n(data.targets.begin() + static_cast<std::ptrdiff_t>(indices[b] * K), K,
                  targets.begin() + static_cast<std::ptrdiff_t>(b * K));
    } else {
      labels[b] = data.labels[indices[b]];
    }
  }
}

void fill_classification_batch(const ClassificationDataset& data,
                               std::span<const std::size_t> indices, std::int64_t B, int pad_id,
                               std::vector<int>& tokens, std::vector<int>& labels) {
  ZERO_CHECK(!data.float_targets(), "classification batch: problem_type ", name_of(data.problem),
             " has float targets");
  std::vector<float> targets;
  fill_classification_batch(data, indices, B, pad_id, tokens, labels, targets);
}

}  // namespace zero::train
