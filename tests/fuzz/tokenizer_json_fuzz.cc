// Fuzzes the tokenizer.json loader (Hugging Face tokenizers' file): the input is tokenizer.json,
// then after a NUL byte a text to encode. A tokenizer that loads encodes the text (special tokens
// as text and recognized) and decodes the ids again.
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [json, text] = zero::fuzz::split_at_nul(zero::fuzz::as_text(data, size));
  const std::filesystem::path path = zero::fuzz::fresh_folder() / "tokenizer.json";
  zero::fuzz::write_bytes(path, json);
  try {
    const zero::text::Tokenizer tokenizer = zero::text::Tokenizer::from_tokenizer_json(path);
    for (const auto special :
         {zero::text::SpecialTokens::kAsText, zero::text::SpecialTokens::kRecognize})
      tokenizer.decode(tokenizer.encode(text, special));
  } catch (const zero::Error&) {
  }
  return 0;
}
