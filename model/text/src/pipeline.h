// What a tokenizer.json says around its BPE model: how text becomes pieces, what the model does
// with a piece that merges do not cover, what is added around a sequence, and how ids decode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text::detail {

// Byte-level: tokens are bytes (GPT-2, Llama 3, Qwen2); text is split by `split_patterns` and each
// piece's bytes merged. SentencePiece-style: tokens are UTF-8 strings with "▁" for a space (Llama
// 2, Mistral); a piece's characters are merged, a character missing from the vocabulary becomes
// its <0xXX> byte tokens (byte fallback) or the unknown token.
enum class ModelKind { kByteLevel, kSentencePiece };

// Metaspace's prepend_scheme: where "▁" is put in front of a segment that does not start with one.
enum class PrependScheme { kNever, kFirst, kAlways };

inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581 "▁"

struct Pipeline {
  ModelKind kind = ModelKind::kByteLevel;
  // PCRE2 patterns (Split, behavior Isolated, each applied to the pieces of the one before).
  std::vector<std::string> split_patterns;
  // Normalizer Sequence[NFC, Prepend("▁"), Replace(" ", "▁")] (each may be absent), applied to
  // each segment between added tokens (NFC commutes with the other two).
  bool normalizer_nfc = false;
  bool normalizer_prepend = false;
  bool normalizer_replace_spaces = false;
  // The Metaspace pre-tokenizer: spaces become "▁", "▁" is prepended as `prepend` says, and with
  // `metaspace_split` the text is cut before each "▁".
  bool metaspace = false;
  PrependScheme prepend = PrependScheme::kNever;
  bool metaspace_split = false;
  // The BPE model's options.
  bool ignore_merges = false;  // a piece that is a whole token is that token, merges unused
  bool byte_fallback = false;
  bool fuse_unknown = false;
  std::optional<TokenId> unknown_id;
  // TemplateProcessing's single sequence: the ids before and after it (add_special_tokens).
  SequenceTemplate sequence_template;
  // Decoder (SentencePiece-style): Replace("▁", " "), ByteFallback, Fuse, then Strip(" ", n, 0).
  bool decode_byte_fallback = false;
  std::size_t decode_strip_leading_spaces = 0;
  // Added tokens marked "special": false: decode keeps them even when it skips special tokens
  // (every other added token, and GPT-2's <|endoftext|>, is special).
  std::vector<TokenId> added_not_special;
  // Everything above in words, hashed into the fingerprint; empty for GPT-2's pipeline.
  std::string description;
};

}  // namespace zero::text::detail
