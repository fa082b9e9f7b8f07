// Fuzzes a model's config.json: the input is the file's text, read as `zero train
// --model_name_or_path` reads it, then validated and written back and read again.
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/gpt2/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const zero::gpt2::GPT2Config config =
        zero::gpt2::GPT2Config::from_json_text(zero::fuzz::as_text(data, size));
    config.padded_vocab_size();
    config.validate();
    zero::gpt2::GPT2Config::from_json_text(config.to_json_text());
  } catch (const zero::Error&) {
  }
  return 0;
}
