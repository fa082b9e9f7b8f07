// Fuzzes the tokenizer loaders of vocab.json + merges.txt: the input is vocab.json, a NUL, then
// merges.txt, a NUL, then a text to encode. A tokenizer that loads encodes the text (special
// tokens as text and recognized) and decodes the ids again.
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [vocab, rest] = zero::fuzz::split_at_nul(zero::fuzz::as_text(data, size));
  const auto [merges, text] = zero::fuzz::split_at_nul(rest);
  const std::filesystem::path folder = zero::fuzz::fresh_folder();
  zero::fuzz::write_bytes(folder / "vocab.json", vocab);
  zero::fuzz::write_bytes(folder / "merges.txt", merges);
  try {
    const zero::text::Tokenizer tokenizer =
        zero::text::Tokenizer::from_vocab_and_merges(folder / "vocab.json", folder / "merges.txt");
    for (const auto special :
         {zero::text::SpecialTokens::kAsText, zero::text::SpecialTokens::kRecognize})
      tokenizer.decode(tokenizer.encode(text, special));
  } catch (const zero::Error&) {
  }
  return 0;
}
