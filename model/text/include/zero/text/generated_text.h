// The text Hugging Face's text-generation pipeline (transformers 4.46) returns for a prompt and the
// ids generate() gave: a tokenizer's side of `zero generate`.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zero/text/tokenizer.h"

namespace zero::text {

// The prompt's ids as the pipeline's `tokenizer(prompt_text)` gives them: added tokens written in
// the text recognised, and the template's bos/eos added (Llama's bos; nothing for GPT-2).
std::vector<TokenId> encode_prompt(const Tokenizer& tokenizer, std::string_view prompt_text);

// transformers' clean_up_tokenization: " ." -> ".", " ?", " !", " ,", " ' " -> "'", " n't",
// " 'm", " 's", " 've", " 're" (the pipeline decodes with clean_up_tokenization_spaces=True).
std::string clean_up_tokenization(std::string_view text);

// The pipeline's FULL_TEXT: `prompt_text`, then the text of `sequence` (the prompt's ids and the
// new ones, as generate() returns them) after its first len(decode(prompt_ids)) characters; each
// decoded with skip_special_tokens=True, invalid UTF-8 replaced (U+FFFD per maximal subpart, as
// the byte-level decoder's from_utf8_lossy) and cleaned up, lengths counted in code points. Ids
// past the tokenizer's vocabulary decode to nothing, as in tokenizers' decode. Not exact for a
// SentencePiece-style tokenizer's byte tokens that do not form UTF-8: Hugging Face's ByteFallback
// writes one U+FFFD per such token, this one per maximal subpart (Tokenizer::decode keeps bytes).
std::string generated_text(const Tokenizer& tokenizer, std::string_view prompt_text,
                           std::span<const TokenId> prompt_ids, std::span<const TokenId> sequence);

}  // namespace zero::text
