// Reading and writing byte-level BPE vocabularies: OpenAI (encoder.json + vocab.bpe) and Hugging
// Face (vocab.json + merges.txt); finding the files in a folder.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "json_file.h"
#include "zero/core/error.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kEndOfText = "<|endoftext|>";

// Fills tokens from a token -> id object whose keys are in byte-level unicode form;
// `<|endoftext|>` becomes the special token.
void read_vocab_object(const json& object, const fs::path& path, BpeVocabulary& vocabulary) {
  ZERO_CHECK(object.is_object() && !object.empty(), path, ": the vocabulary is not a non-empty ",
             "JSON object of token -> id");
  vocabulary.tokens.assign(object.size(), std::string());
  for (const auto& [key, value] : object.items()) {
    ZERO_CHECK(value.is_number_unsigned(), path, ": the id of token '", key, "' is not a number");
    const auto id = value.get<std::uint64_t>();
    ZERO_CHECK(id < object.size(), path, ": token '", key, "' has id ", id, " but the ",
               object.size(), " ids must be 0..", object.size() - 1);
    ZERO_CHECK(vocabulary.tokens[id].empty(), path, ": id ", id, " appears twice");
    try {
      vocabulary.tokens[id] = unicode_string_to_bytes(key);
    } catch (const Error& error) {
      ZERO_THROW(path, ": ", error.what());
    }
  }
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id)
    if (vocabulary.tokens[id] == kEndOfText)
      vocabulary.special_ids.push_back(static_cast<TokenId>(id));
}

// Maps a merge's two byte-level halves to ids.
class MergeReader {
 public:
  MergeReader(const BpeVocabulary& vocabulary, const fs::path& path) : path_(path) {
    for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id)
      ids_.emplace(vocabulary.tokens[id], static_cast<TokenId>(id));
  }
  std::pair<TokenId, TokenId> read(std::string_view left, std::string_view right,
                                   std::size_t line) const {
    return {lookup(left, line), lookup(right, line)};
  }

 private:
  TokenId lookup(std::string_view unicode_form, std::size_t line) const {
    std::string bytes;
    try {
      bytes = unicode_string_to_bytes(unicode_form);
    } catch (const Error& error) {
      ZERO_THROW(path_, ": merge ", line, ": ", error.what());
    }
    const auto it = ids_.find(bytes);
    ZERO_CHECK(it != ids_.end(), path_, ": merge ", line, " names '", unicode_form,
               "', which is not in the vocabulary");
    return it->second;
  }
  fs::path path_;
  std::unordered_map<std::string, TokenId> ids_;
};

std::vector<std::pair<TokenId, TokenId>> read_merges_text(const std::string& text,
                                                          const BpeVocabulary& vocabulary,
                                                          const fs::path& path) {
  MergeReader reader(vocabulary, path);
  std::vector<std::pair<TokenId, TokenId>> merges;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const std::size_t space = line.find(' ');
    ZERO_CHECK(space != std::string_view::npos && space > 0 && space + 1 < line.size() &&
                   line.find(' ', space + 1) == std::string_view::npos,
               path, ": line ", line_number, " is not a merge 'left right': '", line, "'");
    merges.push_back(reader.read(line.substr(0, space), line.substr(space + 1), line_number));
  }
  return merges;
}

}  // namespace

namespace detail {

std::string read_tokenizer_file(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  ZERO_CHECK(stream.good(), "cannot open tokenizer file ", path);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

json parse_tokenizer_json(const fs::path& path) {
  try {
    return json::parse(read_tokenizer_file(path));
  } catch (const json::exception& error) {
    ZERO_THROW("tokenizer file ", path, " is not valid JSON: ", error.what());
  }
}

}  // namespace detail

Tokenizer Tokenizer::from_vocab_and_merges(const fs::path& vocab_path,
                                           const fs::path& merges_path) {
  BpeVocabulary vocabulary;
  read_vocab_object(detail::parse_tokenizer_json(vocab_path), vocab_path, vocabulary);
  vocabulary.merges =
      read_merges_text(detail::read_tokenizer_file(merges_path), vocabulary, merges_path);
  return Tokenizer(std::move(vocabulary));
}

Tokenizer Tokenizer::load(const fs::path& path) {
  ZERO_CHECK(fs::exists(path), "tokenizer path ", path, " does not exist");
  if (fs::is_regular_file(path)) {
    ZERO_CHECK(path.extension() == ".json", "tokenizer file ", path,
               " is not a tokenizer.json; pass the folder holding the vocabulary files");
    return from_tokenizer_json(path);
  }
  if (fs::exists(path / "tokenizer.json")) return from_tokenizer_json(path / "tokenizer.json");
  if (fs::exists(path / "vocab.json") && fs::exists(path / "merges.txt"))
    return from_vocab_and_merges(path / "vocab.json", path / "merges.txt");
  if (fs::exists(path / "encoder.json") && fs::exists(path / "vocab.bpe"))
    return from_vocab_and_merges(path / "encoder.json", path / "vocab.bpe");
  ZERO_THROW("tokenizer folder ", path, " holds none of tokenizer.json, vocab.json + merges.txt, ",
             "encoder.json + vocab.bpe");
}

void save_vocab_and_merges(const BpeVocabulary& vocabulary, const fs::path& folder) {
  fs::create_directories(folder);
  json vocab = json::object();
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    const bool special = std::find(vocabulary.special_ids.begin(), vocabulary.special_ids.end(),
                                   id) != vocabulary.special_ids.end();
    vocab[special ? vocabulary.tokens[id] : bytes_to_unicode_string(vocabulary.tokens[id])] = id;
  }
  {
    std::ofstream stream(folder / "vocab.json", std::ios::binary | std::ios::trunc);
    ZERO_CHECK(stream.good(), "cannot write ", folder / "vocab.json");
    stream << vocab.dump() << "\n";
    ZERO_CHECK(stream.good(), "writing ", folder / "vocab.json", " failed");
  }
  std::ofstream stream(folder / "merges.txt", std::ios::binary | std::ios::trunc);
  ZERO_CHECK(stream.good(), "cannot write ", folder / "merges.txt");
  stream << "#version: 0.2\n";
  for (const auto& [left, right] : vocabulary.merges)
    stream << bytes_to_unicode_string(vocabulary.tokens[left]) << ' '
           << bytes_to_unicode_string(vocabulary.tokens[right]) << '\n';
  ZERO_CHECK(stream.good(), "writing ", folder / "merges.txt", " failed");
}

}  // namespace zero::text
