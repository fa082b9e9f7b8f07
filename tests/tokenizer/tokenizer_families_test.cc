// Llama-family tokenizer.json files against Hugging Face tokenizers 0.20, id for id: byte-level
// BPE with the file's own pre-tokenizer (Llama 3, Qwen2, SmolLM2) and SentencePiece-style BPE
// (Llama 2, Mistral), built by tests/golden/llama_tokenizer_reference.py with the `tokenizers`
// library (nothing can be downloaded) and encoded there on the fortunes files, the README, a
// stress text, and tiny shakespeare and WikiText-2 where the shared data has them. Also what zero
// refuses in a tokenizer.json, without Python.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../common/test_data.h"
#include "token_ids.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The reference's output folder, made once per process and removed at exit.
struct Reference {
  fs::path folder;
  json manifest;
  std::string skip_reason;

  Reference() {
    const char* python = std::getenv("ZERO_PYTHON");
    if (python == nullptr || *python == '\0') {
      skip_reason = "ZERO_PYTHON is not set (the golden venv with tokenizers 0.20)";
      return;
    }
    folder = testing::scratch_dir("tokenizer_families");
    const std::string command = std::string(python) + " " + ZERO_GOLDEN_DIR +
                                "/llama_tokenizer_reference.py '" + folder.string() + "' '" +
                                ZERO_SOURCE_DIR + "' '" + testing::shared_data_dir().string() + "'";
    const int status = std::system(command.c_str());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
      skip_reason = "the Python at ZERO_PYTHON cannot import tokenizers";
      return;
    }
    if (status != 0) {
      skip_reason = "FAIL";
      return;
    }
    manifest = json::parse(testing::read_bytes(folder / "manifest.json"));
  }
  ~Reference() {
    if (!folder.empty()) fs::remove_all(folder);
  }
};

const Reference& reference() {
  static const Reference instance;
  return instance;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return lines;
    start = end + 1;
  }
}

std::string ids_text(const std::vector<TokenId>& ids) {
  std::string text;
  for (TokenId id : ids) text += std::to_string(id) + " ";
  return text;
}

class Families : public ::testing::TestWithParam<const char*> {};

TEST_P(Families, IdsAndDecodingEqualHuggingFaceTokenizers) {
  const Reference& ref = reference();
  ASSERT_NE(ref.skip_reason, "FAIL") << "tests/golden/llama_tokenizer_reference.py failed";
  if (!ref.skip_reason.empty()) GTEST_SKIP() << ref.skip_reason;
  const std::string name = GetParam();
  const Tokenizer tokenizer = Tokenizer::load(ref.folder / name);
  std::size_t checked = 0;
  for (const json& entry : ref.manifest) {
    if (entry["tokenizer"] != name) continue;
    const std::string text_name = entry["text"].get<std::string>();
    const std::string text = testing::read_bytes(ref.folder / "texts" / (text_name + ".txt"));
    const std::vector<std::string> expected =
        split_lines(testing::read_bytes(entry["ids"].get<std::string>()));
    if (entry["mode"] == "lines") {
      const std::vector<std::string> lines = split_lines(text);
      ASSERT_EQ(expected.size(), lines.size() + 1) << text_name;  // the file ends in "\n"
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::vector<TokenId> ids =
            tokenizer.encode(lines[i], SpecialTokens::kRecognize, AddSpecialTokens::kYes);
        if (ids == parse_ids(expected[i])) continue;
        if (++mismatches <= 5)
          ADD_FAILURE() << name << " " << text_name << " line " << i + 1 << " '" << lines[i]
                        << "'\n  zero: " << ids_text(ids) << "\n  HF:   " << expected[i];
      }
      EXPECT_EQ(mismatches, 0u) << name << " " << text_name << ": lines whose ids differ of "
                                << lines.size();
    } else {
      const std::vector<TokenId> ids = tokenizer.encode(text, SpecialTokens::kRecognize);
      const std::vector<TokenId> want = parse_ids(expected.front());
      std::size_t first = 0;
      while (first < ids.size() && first < want.size() && ids[first] == want[first]) ++first;
      EXPECT_EQ(ids, want) << name << " " << text_name << " whole: first difference at token "
                           << first << " of " << want.size();
      EXPECT_EQ(tokenizer.decode(ids), testing::read_bytes(entry["decoded"].get<std::string>()))
          << name << " " << text_name << ": decode differs from Hugging Face's";
      if (text_name == "readme" && name != "unk") {  // "unk" loses what is not in its vocabulary
        EXPECT_TRUE(tokenizer.decode(ids) == text) << name << ": the README does not round-trip";
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 4u) << "the manifest lists too few texts for " << name;
}

INSTANTIATE_TEST_SUITE_P(TokenizerJson, Families,
                         ::testing::Values("llama3", "qwen2", "smollm2", "llama2", "mistral",
                                           "metaspace", "unk"));

// A byte-level tokenizer.json with the 256 byte tokens, "<s>" and Llama 3's pre-tokenizer.
json byte_level_document() {
  json vocab = json::object();
  for (int byte = 0; byte < 256; ++byte)
    vocab[bytes_to_unicode_string(std::string(1, static_cast<char>(byte)))] = byte;
  vocab["<s>"] = 256;
  return {{"version", "1.0"},
          {"added_tokens", {{{"id", 256}, {"content", "<s>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern",
                {{"Regex", R"((?i:'s|'t)|\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

// The error loading `document` gives ("" when it loads).
std::string load_error(const json& document) {
  const fs::path folder = testing::scratch_dir("tokenizer_json_refused");
  std::ofstream(folder / "tokenizer.json") << document.dump();
  const std::string error = testing::error_of([&] { Tokenizer::load(folder); });
  fs::remove_all(folder);
  return error;
}

TEST(TokenizerJson, TheFilesPipelineSplitsAndItsTemplateAddsBos) {
  const json document = byte_level_document();
  ASSERT_EQ(load_error(document), "");
  const fs::path folder = testing::scratch_dir("tokenizer_json_template");
  std::ofstream(folder / "tokenizer.json") << document.dump();
  const Tokenizer tokenizer = Tokenizer::load(folder);
  fs::remove_all(folder);
  // Single bytes (no merges): the pieces only show through the ids of whole texts, so compare
  // the bos and a round trip; the pattern's own effect is checked against tokenizers above.
  EXPECT_EQ(tokenizer.sequence_template().before, std::vector<TokenId>{256});
  EXPECT_TRUE(tokenizer.sequence_template().after.empty());
  const auto ids = tokenizer.encode("Hi<s>", SpecialTokens::kRecognize, AddSpecialTokens::kYes);
  EXPECT_EQ(ids, (std::vector<TokenId>{256, 'H', 'i', 256}));
  EXPECT_EQ(tokenizer.decode(ids), "<s>Hi<s>");
}

TEST(TokenizerJson, WhatZeroDoesNotImplementIsRefusedByName) {
  struct Case {
    std::string what;
    std::function<void(json&)> change;
  };
  const std::vector<Case> cases = {
      {"NFKC",
       [](json& d) {
         d["normalizer"] = {{"type", "NFKC"}};
       }},
      {"Whitespace",
       [](json& d) {
         d["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
       }},
      {"MergedWithPrevious",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious"; }},
      {"invert", [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }},
      {"\\w",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+)"; }},
      {"add_prefix_space",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; }},
      {"after ByteLevel",
       [](json& d) {
         auto& list = d["pre_tokenizer"]["pretokenizers"];
         std::swap(list[0], list[1]);
       }},
      {"RobertaProcessing",
       [](json& d) {
         d["post_processor"] = {{"type", "RobertaProcessing"}};
       }},
      {"WordPiece",
       [](json& d) {
         d["decoder"] = {{"type", "WordPiece"}};
       }},
      {"Unigram", [](json& d) { d["model"]["type"] = "Unigram"; }},
      {"dropout", [](json& d) { d["model"]["dropout"] = 0.1; }},
      {"continuing_subword_prefix",
       [](json& d) { d["model"]["continuing_subword_prefix"] = "##"; }},
      {"lstrip", [](json& d) { d["added_tokens"][0]["lstrip"] = true; }},
      {"truncation",
       [](json& d) {
         d["truncation"] = {{"max_length", 8}};
       }},
      {"pre_tokenizer", [](json& d) { d.erase("pre_tokenizer"); }},
      {"no ByteLevel", [](json& d) { d["pre_tokenizer"] = nullptr; }},
      {"decoder 'Metaspace'",
       [](json& d) {  // a SentencePiece-style file, Metaspace's decoder
         d["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
         d["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
       }},
  };
  for (const Case& each : cases) {
    json document = byte_level_document();
    each.change(document);
    const std::string error = load_error(document);
    EXPECT_NE(error.find(each.what == "no ByteLevel" ? "has no ByteLevel" : each.what),
              std::string::npos)
        << each.what << ": '" << error << "'";
    EXPECT_NE(error.find("tokenizer.json"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace zero::text
