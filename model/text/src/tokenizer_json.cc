// Hugging Face tokenizer.json: the BPE model, added tokens, and the normalizer, pre-tokenizer,
// post-processor and decoder read into a Pipeline; anything zero does not implement is refused.
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "json_file.h"
#include "pipeline.h"
#include "pretokenizer.h"
#include "tokenizer_impl.h"
#include "zero/core/error.h"

namespace zero::text {
namespace {

namespace fs = std::filesystem;
using detail::ModelKind;
using detail::Pipeline;
using nlohmann::json;

// The "type" of a normalizer, pre-tokenizer, processor or decoder object.
std::string type_of(const json& node, const fs::path& path, std::string_view field) {
  ZERO_CHECK(node.is_object() && node.contains("type") && node["type"].is_string(), path, ": ",
             field, " is not an object with a \"type\"");
  return node["type"].get<std::string>();
}

// A Split pattern: {"Regex": "..."} (Oniguruma) or {"String": "..."} (literal), for PCRE2.
std::string split_pattern(const json& pattern, const fs::path& path) {
  if (pattern.contains("Regex")) {
    try {
      return detail::oniguruma_to_pcre2(pattern["Regex"].get<std::string>());
    } catch (const Error& error) {
      ZERO_THROW(path, ": ", error.what());
    }
  }
  ZERO_CHECK(pattern.contains("String"), path, ": a Split pattern is neither Regex nor String");
  std::string literal;
  for (char c : pattern["String"].get<std::string>()) {
    if (static_cast<unsigned char>(c) < 0x80 && !std::isalnum(static_cast<unsigned char>(c)))
      literal += '\\';
    literal += c;
  }
  return literal;
}

class PipelineReader {
 public:
  explicit PipelineReader(const fs::path& path) : path_(path) {}

  Pipeline read(const json& document) {
    for (const char* unsupported : {"truncation", "padding"})
      ZERO_CHECK(!document.contains(unsupported) || document[unsupported].is_null(), path_, ": ",
                 unsupported,
                 " is set; zero does not truncate or pad in the tokenizer (set it to null)");
    if (document.contains("normalizer")) read_normalizer(document["normalizer"]);
    ZERO_CHECK(
        document.contains("pre_tokenizer"), path_,
        ": no \"pre_tokenizer\" (a Hugging Face tokenizer.json always has one, null or not)");
    read_pre_tokenizer(document["pre_tokenizer"]);
    const bool sentencepiece =
        pipeline_.metaspace || pipeline_.normalizer_prepend || pipeline_.normalizer_replace_spaces;
    if (byte_level_) {
      ZERO_CHECK(!sentencepiece, path_, ": a ByteLevel pre-tokenizer together with \"▁\" ",
                 "(Metaspace, Prepend or Replace) is not supported");
      pipeline_.kind = ModelKind::kByteLevel;
    } else {
      ZERO_CHECK(
          sentencepiece, path_, ": the pre_tokenizer has no ByteLevel and nothing puts ",
          "\"▁\" for spaces (Metaspace, or the normalizer Prepend + Replace): zero reads only ",
          "byte-level and SentencePiece-style BPE");
      ZERO_CHECK(pipeline_.split_patterns.empty(), path_,
                 ": Split or Digits without ByteLevel is not supported");
      pipeline_.kind = ModelKind::kSentencePiece;
    }
    read_model_options(document["model"]);
    ZERO_CHECK(document.contains("decoder"), path_, ": no \"decoder\"");
    read_decoder(document["decoder"]);
    return std::move(pipeline_);
  }

 private:
  void read_normalizer(const json& node) {
    if (node.is_null()) return;
    const std::string type = type_of(node, path_, "normalizer");
    if (type == "Sequence") {
      for (const json& child : node.at("normalizers")) read_normalizer(child);
    } else if (type == "NFC") {
      pipeline_.normalizer_nfc = true;
      describe("nfc");
    } else if (type == "Prepend") {
      ZERO_CHECK(node.at("prepend") == detail::kMetaspace, path_, ": normalizer Prepend of '",
                 node.at("prepend").get<std::string>(), "' (only \"▁\" is supported)");
      pipeline_.normalizer_prepend = true;
    } else if (type == "Replace") {
      ZERO_CHECK(node.at("pattern").contains("String") && node["pattern"]["String"] == " " &&
                     node.at("content") == detail::kMetaspace,
                 path_, ": normalizer Replace ", node.dump(),
                 " (only the String \" \" by \"▁\" is supported)");
      pipeline_.normalizer_replace_spaces = true;
    } else {
      ZERO_THROW(path_, ": normalizer '", type,
                 "' is not supported (zero implements Sequence, NFC, Prepend \"▁\" and Replace "
                 "\" \" by \"▁\")");
    }
  }

  void read_pre_tokenizer(const json& node) {
    if (node.is_null()) return;
    const std::string type = type_of(node, path_, "pre_tokenizer");
    ZERO_CHECK(!byte_level_, path_, ": pre-tokenizer '", type,
               "' after ByteLevel (it would split byte-level text) is not supported");
    if (type == "Sequence") {
      for (const json& child : node.at("pretokenizers")) read_pre_tokenizer(child);
    } else if (type == "Split") {
      const std::string behavior = node.at("behavior").get<std::string>();
      ZERO_CHECK(behavior == "Isolated", path_, ": Split with behavior '", behavior,
                 "' is not supported (only Isolated)");
      ZERO_CHECK(!node.value("invert", false), path_, ": Split with invert true is not supported");
      pipeline_.split_patterns.push_back(split_pattern(node.at("pattern"), path_));
      describe("split " + node.at("pattern").dump());
    } else if (type == "Digits") {
      const bool individual = node.value("individual_digits", false);
      pipeline_.split_patterns.push_back(individual ? R"(\p{N})" : R"(\p{N}+)");
      describe(individual ? "digits individual" : "digits");
    } else if (type == "ByteLevel") {
      ZERO_CHECK(!node.value("add_prefix_space", false), path_,
                 ": pre-tokenizer ByteLevel with add_prefix_space true is not supported");
      if (node.value("use_regex", true)) {
        pipeline_.split_patterns.push_back(detail::oniguruma_to_pcre2(detail::kGpt2Pattern));
        describe("gpt2 pattern");
      }
      byte_level_ = true;
    } else if (type == "Metaspace") {
      ZERO_CHECK(!pipeline_.metaspace && pipeline_.split_patterns.empty(), path_,
                 ": Metaspace combined with another pre-tokenizer is not supported");
      ZERO_CHECK(node.value("replacement", std::string(detail::kMetaspace)) == detail::kMetaspace,
                 path_, ": Metaspace replacement '", node["replacement"].get<std::string>(),
                 "' (only \"▁\" is supported)");
      pipeline_.metaspace = true;
      pipeline_.metaspace_split = node.value("split", true);
      if (node.contains("prepend_scheme")) {
        const std::string scheme = node["prepend_scheme"].get<std::string>();
        ZERO_CHECK(scheme == "always" || scheme == "first" || scheme == "never", path_,
                   ": Metaspace prepend_scheme '", scheme, "' (always, first or never)");
        pipeline_.prepend = scheme == "always"  ? detail::PrependScheme::kAlways
                            : scheme == "first" ? detail::PrependScheme::kFirst
                                                : detail::PrependScheme::kNever;
      } else {
        pipeline_.prepend = node.value("add_prefix_space", true) ? detail::PrependScheme::kAlways
                                                                 : detail::PrependScheme::kNever;
      }
    } else {
      ZERO_THROW(path_, ": pre_tokenizer '", type,
                 "' is not supported (zero implements Sequence, Split, Digits, ByteLevel and "
                 "Metaspace)");
    }
  }

  void read_model_options(const json& model) {
    for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"})
      ZERO_CHECK(!model.contains(affix) || model[affix].is_null() || model[affix] == "", path_,
                 ": the BPE model's ", affix, " ", model[affix].dump(), " is not supported");
    ZERO_CHECK(!model.contains("dropout") || model["dropout"].is_null() ||
                   model["dropout"].get<double>() == 0.0,
               path_, ": BPE dropout ", model["dropout"].dump(), " is not supported");
    pipeline_.ignore_merges = model.value("ignore_merges", false);
    pipeline_.byte_fallback = model.value("byte_fallback", false);
    pipeline_.fuse_unknown = model.value("fuse_unk", false);
  }

  void read_decoder(const json& node) {
    const std::string type = node.is_null() ? "null" : type_of(node, path_, "decoder");
    if (pipeline_.kind == ModelKind::kByteLevel) {
      ZERO_CHECK(type == "ByteLevel", path_, ": decoder '", type,
                 "' with a ByteLevel pre-tokenizer (zero decodes byte-level tokens to bytes: "
                 "ByteLevel only)");
      return;
    }
    const json steps = type == "Sequence" ? node.at("decoders") : json::array({node});
    const char* order[] = {"Replace", "ByteFallback", "Fuse", "Strip"};
    std::size_t next = 0;
    bool fused = false;
    for (const json& step : steps) {
      const std::string name = type_of(step, path_, "decoder");
      while (next < 4 && name != order[next]) ++next;
      ZERO_CHECK(next < 4, path_, ": decoder '", name,
                 "' is not supported here (zero implements Sequence of Replace \"▁\" by \" \", "
                 "ByteFallback, Fuse, Strip, in that order)");
      ++next;
      if (name == "Replace") {
        ZERO_CHECK(step.at("pattern").contains("String") &&
                       step["pattern"]["String"] == detail::kMetaspace && step.at("content") == " ",
                   path_, ": decoder Replace ", step.dump(), " (only \"▁\" by \" \")");
        replaces_metaspace_ = true;
      } else if (name == "ByteFallback") {
        pipeline_.decode_byte_fallback = true;
      } else if (name == "Fuse") {
        fused = true;
      } else {
        ZERO_CHECK(fused && step.at("content") == " " && step.value("stop", 0) == 0, path_,
                   ": decoder Strip ", step.dump(),
                   " (only leading spaces, after Fuse, are supported)");
        pipeline_.decode_strip_leading_spaces = step.value("start", 0);
      }
    }
    ZERO_CHECK(replaces_metaspace_, path_, ": the decoder does not turn \"▁\" back into spaces");
    describe("decode strip " + std::to_string(pipeline_.decode_strip_leading_spaces) +
             (pipeline_.decode_byte_fallback ? " byte fallback" : ""));
  }

  void describe(const std::string& part) { pipeline_.description += part + ";"; }

  fs::path path_;
  Pipeline pipeline_;
  bool byte_level_ = false;
  bool replaces_metaspace_ = false;
};

// TemplateProcessing's "single": the special tokens' ids before and after $A.
void read_post_processor(const json& node, const fs::path& path, Pipeline& pipeline,
                         std::size_t vocab_size) {
  if (node.is_null()) return;
  const std::string type = type_of(node, path, "post_processor");
  if (type == "Sequence") {
    for (const json& child : node.at("processors"))
      read_post_processor(child, path, pipeline, vocab_size);
    return;
  }
  if (type == "ByteLevel") return;  // offsets only
  ZERO_CHECK(type == "TemplateProcessing", path, ": post_processor '", type,
             "' is not supported (zero implements TemplateProcessing, ByteLevel and Sequence)");
  SequenceTemplate& wrap = pipeline.sequence_template;
  ZERO_CHECK(wrap.before.empty() && wrap.after.empty(), path, ": more than one TemplateProcessing");
  bool seen_sequence = false;
  for (const json& piece : node.at("single")) {
    if (piece.contains("Sequence")) {
      ZERO_CHECK(!seen_sequence && piece["Sequence"].at("id") == "A", path,
                 ": the template's single sequence must hold $A once");
      seen_sequence = true;
      continue;
    }
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    const json& special = node.at("special_tokens");
    ZERO_CHECK(special.contains(name), path, ": the template names '", name,
               "', which is not in its special_tokens");
    for (const json& id : special[name].at("ids")) {
      ZERO_CHECK(id.get<std::uint64_t>() < vocab_size, path, ": the template's token '", name,
                 "' has id ", id.dump(), " outside the vocabulary");
      (seen_sequence ? wrap.after : wrap.before).push_back(id.get<TokenId>());
    }
  }
  ZERO_CHECK(seen_sequence, path, ": the template's single sequence has no $A");
  std::string words = "template";
  for (TokenId id : wrap.before) words += " " + std::to_string(id);
  words += " $A";
  for (TokenId id : wrap.after) words += " " + std::to_string(id);
  pipeline.description += words + ";";
}

// A token as the vocabulary keeps it: raw bytes (byte-level) or as written (SentencePiece-style).
std::string token_of(const std::string& key, ModelKind kind, const fs::path& path) {
  if (kind == ModelKind::kSentencePiece) return key;
  try {
    return unicode_string_to_bytes(key);
  } catch (const Error& error) {
    ZERO_THROW(path, ": ", error.what());
  }
}

BpeVocabulary read_vocabulary(const json& document, const json& model, const fs::path& path,
                              const Pipeline& pipeline) {
  BpeVocabulary vocabulary;
  ZERO_CHECK(model.contains("vocab") && model.contains("merges"), path,
             ": the BPE model has no vocab or merges");
  // Added tokens are raw text, not byte-level unicode: read them first and skip them in vocab.
  std::unordered_map<std::string, TokenId> added;
  if (document.contains("added_tokens") && document["added_tokens"].is_array())
    for (const json& token : document["added_tokens"]) {
      const std::string content = token.at("content").get<std::string>();
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        ZERO_CHECK(!token.value(flag, false), path, ": added token '", content, "' has ", flag,
                   " true, which is not supported");
      ZERO_CHECK(!(token.value("normalized", false) &&
                   (pipeline.normalizer_nfc || pipeline.normalizer_prepend ||
                    pipeline.normalizer_replace_spaces)),
                 path, ": added token '", content,
                 "' is matched after normalization (normalized true), which is not supported");
      added.emplace(content, token.at("id").get<TokenId>());
    }
  json model_vocab = model["vocab"];
  ZERO_CHECK(model_vocab.is_object() && !model_vocab.empty(), path, ": empty vocabulary");
  for (const auto& [content, id] : added) model_vocab.erase(content);
  const std::size_t size = model_vocab.size() + added.size();
  vocabulary.tokens.assign(size, std::string());
  std::unordered_map<std::string, TokenId> ids_by_key;
  for (const auto& [key, value] : model_vocab.items()) {
    ZERO_CHECK(value.is_number_unsigned(), path, ": the id of token '", key, "' is not a number");
    const auto id = value.get<std::uint64_t>();
    ZERO_CHECK(id < size, path, ": token '", key, "' has id ", id, " outside 0..", size - 1);
    ZERO_CHECK(vocabulary.tokens[id].empty(), path, ": id ", id, " appears twice");
    vocabulary.tokens[id] = token_of(key, pipeline.kind, path);
    ids_by_key.emplace(key, static_cast<TokenId>(id));
  }
  for (const auto& [content, id] : added) {
    ZERO_CHECK(id < size && vocabulary.tokens[id].empty(), path, ": added token '", content,
               "' has id ", id, ", which is outside the vocabulary or taken");
    vocabulary.tokens[id] = content;
    vocabulary.special_ids.push_back(id);
  }
  auto lookup = [&](const std::string& key, std::size_t index) {
    const auto it = ids_by_key.find(key);
    ZERO_CHECK(it != ids_by_key.end(), path, ": merge ", index, " names '", key,
               "', which is not in the vocabulary");
    return it->second;
  };
  std::size_t index = 0;
  for (const json& merge : model["merges"]) {
    ++index;
    std::string left, right;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      ZERO_CHECK(space != std::string::npos, path, ": merge ", index, " '", text, "' has no space");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      ZERO_CHECK(merge.is_array() && merge.size() == 2, path, ": merge ", index,
                 " is neither \"a b\" nor [\"a\", \"b\"]");
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    }
    vocabulary.merges.emplace_back(lookup(left, index), lookup(right, index));
  }
  return vocabulary;
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json(const fs::path& path) {
  const json document = detail::parse_tokenizer_json(path);
  ZERO_CHECK(document.is_object() && document.contains("model") && document["model"].is_object(),
             path, ": no \"model\" object (not a Hugging Face tokenizer.json)");
  const json& model = document["model"];
  // A field of the wrong type or missing (a null model type, an added token without "content", a
  // merge of numbers) is the file's error, named like the checks here.
  try {
    const std::string type = model.value("type", std::string("BPE"));
    ZERO_CHECK(type == "BPE", path, ": model type is '", type,
               "', only BPE (byte-level or SentencePiece-style) is supported");
    Pipeline pipeline = PipelineReader(path).read(document);
    BpeVocabulary vocabulary = read_vocabulary(document, model, path, pipeline);
    if (document.contains("added_tokens") && document["added_tokens"].is_array())
      for (const json& token : document["added_tokens"])
        if (!token.value("special", true))
          pipeline.added_not_special.push_back(token.at("id").get<TokenId>());
    if (document.contains("post_processor"))
      read_post_processor(document["post_processor"], path, pipeline, vocabulary.tokens.size());
    if (model.contains("unk_token") && !model["unk_token"].is_null()) {
      const std::string unknown = model["unk_token"].get<std::string>();
      const auto it = std::find(vocabulary.tokens.begin(), vocabulary.tokens.end(), unknown);
      ZERO_CHECK(it != vocabulary.tokens.end(), path, ": unk_token '", unknown,
                 "' is not in the vocabulary");
      pipeline.unknown_id = static_cast<TokenId>(it - vocabulary.tokens.begin());
    }
    if (pipeline.kind == ModelKind::kSentencePiece) {
      pipeline.description +=
          std::string("sentencepiece") + (pipeline.normalizer_prepend ? " prepend" : "") +
          (pipeline.normalizer_replace_spaces ? " replace" : "") +
          (pipeline.metaspace ? " metaspace" : "") + (pipeline.metaspace_split ? " split" : "") +
          " scheme " + std::to_string(static_cast<int>(pipeline.prepend)) +
          (pipeline.byte_fallback ? " byte_fallback" : "") +
          (pipeline.fuse_unknown ? " fuse_unk" : "") + " unk " +
          (pipeline.unknown_id ? std::to_string(*pipeline.unknown_id) : "-") + ";";
    }
    if (pipeline.ignore_merges) pipeline.description += "ignore_merges;";
    // GPT-2's own pipeline keeps the fingerprint of its vocab.json + merges.txt form.
    if (pipeline.description == "gpt2 pattern;") pipeline.description.clear();
    try {
      return Tokenizer(build_tokenizer(std::move(vocabulary), std::move(pipeline)));
    } catch (const Error& error) {
      ZERO_THROW(path, ": ", error.what());
    }
  } catch (const json::exception& error) {
    ZERO_THROW(path, ": not a valid tokenizer.json: ", error.what());
  }
}

}  // namespace zero::text
