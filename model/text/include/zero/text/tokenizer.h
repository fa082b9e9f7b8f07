// BPE tokenizers: GPT-2's byte-level BPE, and Hugging Face tokenizer.json files (byte-level with
// the file's own pre-tokenizer: Llama 3, Qwen2, SmolLM2; SentencePiece-style: Llama 2, Mistral).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zero::text {

using TokenId = std::uint32_t;

// Whether special (added) tokens written in the text (`<|endoftext|>`, `<s>`) become their ids.
//   kAsText:    "<|endoftext|>" is ordinary text (tiktoken's encode_ordinary).
//   kRecognize: every occurrence becomes the special id (Hugging Face's tokenizers, as
//               GPT2TokenizerFast and so run_clm; tiktoken's encode(allowed_special="all")).
enum class SpecialTokens { kAsText, kRecognize };

// Whether encode adds the ids the tokenizer.json's post_processor puts around a text (Hugging
// Face's add_special_tokens=True, as `tokenizer(text)` and run_clm do): see SequenceTemplate.
enum class AddSpecialTokens { kNo, kYes };

// Whether decode leaves out the special added tokens (Hugging Face's skip_special_tokens: those
// tokenizer.json marks "special": true, and GPT-2's <|endoftext|>), as the text-generation
// pipeline decodes.
enum class SkipSpecialTokens { kNo, kYes };

// The ids Hugging Face's post_processor (TemplateProcessing, single sequence) puts around one
// encoded text: Llama 2's <s>, Llama 3's <|begin_of_text|>; none for GPT-2 and Qwen2.
struct SequenceTemplate {
  std::vector<TokenId> before;  // bos
  std::vector<TokenId> after;   // eos, where the template has one
};

// A BPE vocabulary in memory: what a loader returns and what Tokenizer is built from.
// tokens[id] is the token's raw bytes (not the byte-level unicode form); in a SentencePiece-style
// tokenizer.json the token as written there ("▁the", "<0x0A>").
struct BpeVocabulary {
  std::vector<std::string> tokens;
  std::vector<std::pair<TokenId, TokenId>> merges;  // in rank order: merges[r] is rank r
  std::vector<TokenId> special_ids;                 // ids matched as whole strings, never merged
};

// Encoding contract (the reference is OpenAI's encoder.py, tiktoken's "gpt2" and Hugging Face's
// GPT2TokenizerFast, which agree):
// - Text is split by GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   with real Unicode categories (PCRE2 in UTF + UCP mode, JIT-compiled), then each piece's bytes
//   are merged by rank. Every valid UTF-8 input gives the reference's ids.
// - Invalid UTF-8: the references take Python str, which cannot hold invalid bytes; reading bytes
//   into them means bytes.decode("utf-8", errors="replace"). We do the same: each maximal
//   ill-formed subsequence (Unicode's "maximal subpart" rule, which Python follows) becomes one
//   U+FFFD before splitting, so ids equal reference(text.decode("utf-8", "replace")). Such input
//   therefore does not decode back to its original bytes; valid UTF-8 always round-trips exactly.
// - Unicode categories are those of the linked PCRE2 (10.42: Unicode 14); code points assigned in
//   later Unicode versions may split differently from a reference built on newer tables.
//
// From a tokenizer.json, encode is Hugging Face tokenizers' (0.20) `encode(text).ids` with
// SpecialTokens::kRecognize and AddSpecialTokens::kYes: added tokens are split out first, each
// segment between them is normalized (Prepend/Replace), pre-tokenized (the file's Split patterns,
// Digits, ByteLevel with or without GPT-2's pattern, or Metaspace) and merged by the BPE model
// (ignore_merges, byte_fallback to <0xXX>, unk_token, fuse_unk), then the template's ids are added.
// Anything else in the file (another normalizer, pre-tokenizer, model option, decoder or
// post-processor) is refused with zero::Error naming it, never approximated. Patterns are
// Oniguruma's; they are translated for PCRE2 with \s as White_Space, as GPT-2's is.
//
// A Tokenizer is immutable and cheap to copy (shared state); encode and decode are thread-safe.
// Each thread keeps its own cache of recently encoded pieces (bounded; see kCacheMaxEntries).
class Tokenizer {
 public:
  static constexpr std::size_t kCacheMaxEntries = 1 << 18;

  // Loads a folder holding tokenizer.json, or vocab.json + merges.txt (Hugging Face), or
  // encoder.json + vocab.bpe (OpenAI), tried in that order; or a tokenizer.json file itself.
  // Throws zero::Error naming the path and what is missing or malformed.
  static Tokenizer load(const std::filesystem::path& path);
  // vocab.json/encoder.json (token -> id) with merges.txt/vocab.bpe ("a b" per line).
  static Tokenizer from_vocab_and_merges(const std::filesystem::path& vocab_path,
                                         const std::filesystem::path& merges_path);
  static Tokenizer from_tokenizer_json(const std::filesystem::path& path);
  // Checks the vocabulary: all 256 single bytes present, ids unique, merges producing known tokens.
  explicit Tokenizer(BpeVocabulary vocabulary);

  std::vector<TokenId> encode(std::string_view text, SpecialTokens special = SpecialTokens::kAsText,
                              AddSpecialTokens add = AddSpecialTokens::kNo) const;
  // Appends the ids of `text` to `ids` (the form the data pipeline uses).
  void encode_append(std::string_view text, std::vector<TokenId>& ids,
                     SpecialTokens special = SpecialTokens::kAsText,
                     AddSpecialTokens add = AddSpecialTokens::kNo) const;
  // The concatenated bytes of the tokens. Ids that split a multi-byte character give the raw
  // bytes (possibly invalid UTF-8), like tiktoken's decode_bytes. Throws for an unknown id.
  // SentencePiece-style: Hugging Face's decoder (skip_special_tokens=False): "▁" is a space,
  // <0xXX> its byte, and Strip's leading spaces are removed from the start of the result; bytes
  // that are not valid UTF-8 stay raw bytes where Hugging Face writes U+FFFD.
  // SkipSpecialTokens::kYes leaves the special added tokens out before decoding.
  std::string decode(std::span<const TokenId> ids,
                     SkipSpecialTokens skip = SkipSpecialTokens::kNo) const;
  // What AddSpecialTokens::kYes adds around each text (empty when the file has no template).
  const SequenceTemplate& sequence_template() const;

  std::size_t vocab_size() const;
  std::string_view token_bytes(TokenId id) const;                 // throws for an unknown id
  std::optional<TokenId> token_id(std::string_view bytes) const;  // exact token lookup
  // The id of `<|endoftext|>` when the vocabulary has it.
  std::optional<TokenId> end_of_text_id() const;
  const BpeVocabulary& vocabulary() const;
  // A 64-bit hash of the ids, merges and special tokens, and of the pipeline where it is not
  // GPT-2's: equal for tokenizers that encode alike whatever file format they came from. Keys the
  // token cache.
  std::uint64_t fingerprint() const;

  // Encodes one piece (a pre-tokenizer match) without the cache; `force_heap` selects the
  // O(n log n) merge used for long pieces whatever the length (tests compare both paths).
  void encode_piece_uncached(std::string_view piece, std::vector<TokenId>& ids,
                             bool force_heap = false) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// Writes `vocabulary` as Hugging Face's vocab.json + merges.txt in `folder` (created if needed).
void save_vocab_and_merges(const BpeVocabulary& vocabulary, const std::filesystem::path& folder);

// GPT-2's byte <-> printable-unicode map (encoder.py's bytes_to_unicode): the code point that
// stands for byte b in vocab files, and the inverse of the whole string.
char32_t byte_to_unicode(std::uint8_t byte);
std::string bytes_to_unicode_string(std::string_view bytes);  // UTF-8 of the mapped code points
// Throws zero::Error for a code point that is no byte's image or for invalid UTF-8.
std::string unicode_string_to_bytes(std::string_view text);

// UTF-8 with each maximal ill-formed subsequence replaced by U+FFFD (Python's errors="replace").
// Returns `text` itself when it is valid, else a view of `storage`.
std::string_view replace_invalid_utf8(std::string_view text, std::string& storage);

}  // namespace zero::text
