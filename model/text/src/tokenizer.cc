// Tokenizer: building the tables from a vocabulary, encoding with special tokens, decoding.
#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>

#include "hash.h"
#include "tokenizer_impl.h"
#include "zero/core/error.h"

namespace zero::text {
namespace {

std::uint64_t next_instance_id() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1);
}

std::uint64_t fingerprint_of(const BpeVocabulary& vocabulary, const detail::Pipeline& pipeline) {
  std::uint64_t hash = detail::hash_string("zero-bpe-v1");
  hash = detail::hash_combine(hash, vocabulary.tokens.size());
  for (const std::string& token : vocabulary.tokens)
    hash = detail::hash_combine(hash, detail::hash_string(token));
  hash = detail::hash_combine(hash, vocabulary.merges.size());
  for (const auto& [left, right] : vocabulary.merges)
    hash = detail::hash_combine(hash, (static_cast<std::uint64_t>(left) << 32) | right);
  for (TokenId id : vocabulary.special_ids) hash = detail::hash_combine(hash, id);
  if (!pipeline.description.empty())
    hash = detail::hash_combine(hash, detail::hash_string(pipeline.description));
  return hash;
}

// Hugging Face's decoder for one SentencePiece-style token: Replace("▁", " ") and ByteFallback.
std::string decoded_token(const std::string& token, bool byte_fallback) {
  if (byte_fallback && token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
      std::isxdigit(static_cast<unsigned char>(token[3])) &&
      std::isxdigit(static_cast<unsigned char>(token[4])) &&
      !std::islower(static_cast<unsigned char>(token[3])) &&
      !std::islower(static_cast<unsigned char>(token[4])))
    return std::string(1, static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
  std::string text;
  for (std::size_t at = 0; at < token.size();) {
    if (std::string_view(token).substr(at).starts_with(detail::kMetaspace)) {
      text += ' ';
      at += detail::kMetaspace.size();
    } else {
      text += token[at++];
    }
  }
  return text;
}

}  // namespace

detail::Pipeline gpt2_pipeline() {
  detail::Pipeline pipeline;
  pipeline.split_patterns = {detail::oniguruma_to_pcre2(detail::kGpt2Pattern)};
  return pipeline;
}

std::shared_ptr<const Tokenizer::Impl> build_tokenizer(BpeVocabulary vocabulary,
                                                       detail::Pipeline pipeline) {
  const bool byte_level = pipeline.kind == detail::ModelKind::kByteLevel;
  auto impl = std::make_shared<Tokenizer::Impl>(std::move(pipeline));
  const std::size_t vocab_size = vocabulary.tokens.size();
  impl->ids_by_bytes.reserve(vocab_size * 2);
  for (TokenId id = 0; id < vocab_size; ++id) {
    const std::string& token = vocabulary.tokens[id];
    ZERO_CHECK(!token.empty(), "token id ", id, " has no bytes (ids must be dense 0..",
               vocab_size - 1, ")");
    const bool special = std::find(vocabulary.special_ids.begin(), vocabulary.special_ids.end(),
                                   id) != vocabulary.special_ids.end();
    if (special) continue;
    const auto [it, inserted] = impl->ids_by_bytes.emplace(token, id);
    ZERO_CHECK(inserted, "token ids ", it->second, " and ", id, " have the same bytes");
  }
  for (int byte = 0; byte < 256; ++byte) {
    if (byte_level) {
      const auto it = impl->ids_by_bytes.find(std::string(1, static_cast<char>(byte)));
      ZERO_CHECK(it != impl->ids_by_bytes.end(), "the vocabulary has no token for byte ", byte,
                 ": not a byte-level BPE vocabulary");
      impl->byte_ids[byte] = it->second;
    } else {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", byte);
      const auto it = impl->ids_by_bytes.find(name);
      impl->byte_ids[byte] = it == impl->ids_by_bytes.end() ? kNoToken : it->second;
    }
  }
  impl->ranks = PairRanks(vocabulary.merges.size());
  for (std::size_t rank = 0; rank < vocabulary.merges.size(); ++rank) {
    const auto [left, right] = vocabulary.merges[rank];
    ZERO_CHECK(left < vocab_size && right < vocab_size, "merge ", rank, " names id ",
               std::max(left, right), " outside the vocabulary of ", vocab_size);
    const std::string merged = vocabulary.tokens[left] + vocabulary.tokens[right];
    const auto it = impl->ids_by_bytes.find(merged);
    ZERO_CHECK(it != impl->ids_by_bytes.end(), "merge ", rank, " (ids ", left, " + ", right,
               ") produces a token that is not in the vocabulary");
    impl->ranks.insert(left, right, {static_cast<std::uint32_t>(rank), it->second});
  }
  impl->skipped_on_decode.assign(vocab_size, false);
  for (TokenId id : vocabulary.special_ids) {
    ZERO_CHECK(id < vocab_size, "special token id ", id, " is outside the vocabulary");
    impl->specials.emplace_back(vocabulary.tokens[id], id);
    impl->skipped_on_decode[id] = true;
  }
  for (TokenId id : impl->pipeline.added_not_special) impl->skipped_on_decode[id] = false;
  std::sort(impl->specials.begin(), impl->specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& ids :
       {impl->pipeline.sequence_template.before, impl->pipeline.sequence_template.after})
    for (TokenId id : ids)
      ZERO_CHECK(id < vocab_size, "the template's token id ", id, " is outside the vocabulary");
  if (!byte_level)
    for (const std::string& token : vocabulary.tokens)
      impl->decoded.push_back(decoded_token(token, impl->pipeline.decode_byte_fallback));
  impl->fingerprint = fingerprint_of(vocabulary, impl->pipeline);
  impl->instance_id = next_instance_id();
  impl->vocabulary = std::move(vocabulary);
  return impl;
}

Tokenizer::Tokenizer(BpeVocabulary vocabulary)
    : Tokenizer(build_tokenizer(std::move(vocabulary), gpt2_pipeline())) {}

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

void Tokenizer::encode_append(std::string_view text, std::vector<TokenId>& ids,
                              SpecialTokens special, AddSpecialTokens add) const {
  const SequenceTemplate& wrap = impl_->pipeline.sequence_template;
  if (add == AddSpecialTokens::kYes) ids.insert(ids.end(), wrap.before.begin(), wrap.before.end());
  if (special == SpecialTokens::kAsText || impl_->specials.empty()) {
    impl_->encode_ordinary(text, ids, true);
  } else {
    // Split at the earliest special token (the longest one when several start there).
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t best = std::string_view::npos;
      const std::pair<std::string, TokenId>* found = nullptr;
      for (const auto& candidate : impl_->specials) {
        const std::size_t at = text.find(candidate.first, start);
        if (at < best) {
          best = at;
          found = &candidate;
        }
      }
      if (found == nullptr) break;
      impl_->encode_ordinary(text.substr(start, best - start), ids, start == 0);
      ids.push_back(found->second);
      start = best + found->first.size();
    }
    if (start < text.size()) impl_->encode_ordinary(text.substr(start), ids, start == 0);
  }
  if (add == AddSpecialTokens::kYes) ids.insert(ids.end(), wrap.after.begin(), wrap.after.end());
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, SpecialTokens special,
                                       AddSpecialTokens add) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_append(text, ids, special, add);
  return ids;
}

void Tokenizer::encode_piece_uncached(std::string_view piece, std::vector<TokenId>& ids,
                                      bool force_heap) const {
  impl_->merge_piece(piece, ids, force_heap);
}

std::string Tokenizer::decode(std::span<const TokenId> ids, SkipSpecialTokens skip) const {
  std::string text;
  text.reserve(ids.size() * 4);
  const bool byte_level = impl_->pipeline.kind == detail::ModelKind::kByteLevel;
  const auto& tokens = byte_level ? impl_->vocabulary.tokens : impl_->decoded;
  for (TokenId id : ids) {
    ZERO_CHECK(id < tokens.size(), "cannot decode token id ", id, ": the vocabulary has ",
               tokens.size(), " tokens");
    if (skip == SkipSpecialTokens::kYes && impl_->skipped_on_decode[id]) continue;
    text += tokens[id];
  }
  std::size_t strip = 0;
  while (strip < impl_->pipeline.decode_strip_leading_spaces && strip < text.size() &&
         text[strip] == ' ')
    ++strip;
  text.erase(0, strip);
  return text;
}

std::size_t Tokenizer::vocab_size() const { return impl_->vocabulary.tokens.size(); }

std::string_view Tokenizer::token_bytes(TokenId id) const {
  ZERO_CHECK(id < impl_->vocabulary.tokens.size(), "unknown token id ", id);
  return impl_->vocabulary.tokens[id];
}

std::optional<TokenId> Tokenizer::token_id(std::string_view bytes) const {
  for (const auto& [text, id] : impl_->specials)
    if (text == bytes) return id;
  const auto it = impl_->ids_by_bytes.find(std::string(bytes));
  if (it == impl_->ids_by_bytes.end()) return std::nullopt;
  return it->second;
}

std::optional<TokenId> Tokenizer::end_of_text_id() const { return token_id("<|endoftext|>"); }

const BpeVocabulary& Tokenizer::vocabulary() const { return impl_->vocabulary; }

const SequenceTemplate& Tokenizer::sequence_template() const {
  return impl_->pipeline.sequence_template;
}

std::uint64_t Tokenizer::fingerprint() const { return impl_->fingerprint; }

}  // namespace zero::text
