// Unicode normalization form C (a tokenizer.json's NFC normalizer), by ICU.
#pragma once

#include <string>
#include <string_view>

namespace zero::text::detail {

// True when every code point of valid UTF-8 `text` is below U+0300 (no combining mark, nothing
// that composes or decomposes), so NFC leaves it unchanged; false says nothing.
bool below_combining_marks(std::string_view text);
// `text` (valid UTF-8) in NFC, as Hugging Face's NFC normalizer (unicode-normalization) gives it.
std::string to_nfc(std::string_view text);

}  // namespace zero::text::detail
