// GPT-2's byte <-> unicode map and UTF-8 repair with Python's errors="replace" semantics.
#include <array>
#include <string>

#include "utf8.h"
#include "zero/core/error.h"
#include "zero/text/tokenizer.h"

namespace zero::text {
namespace {

// encoder.py's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// 256, 257, ... in byte order.
struct ByteMap {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 324> to_byte{};  // code point -> byte, -1 if none
  ByteMap() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                             (byte >= 0xAE && byte <= 0xFF);
      to_unicode[byte] = printable ? static_cast<char32_t>(byte) : next++;
      to_byte[to_unicode[byte]] = byte;
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_unicode(std::uint8_t byte) { return byte_map().to_unicode[byte]; }

std::string bytes_to_unicode_string(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char byte : bytes) detail::append_utf8(out, byte_map().to_unicode[byte]);
  return out;
}

std::string unicode_string_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t offset = 0;
  while (offset < text.size()) {
    const char32_t code_point = detail::next_code_point(text, offset);
    ZERO_CHECK(code_point != detail::kInvalidCodePoint, "invalid UTF-8 in byte-level token '", text,
               "'");
    ZERO_CHECK(code_point < byte_map().to_byte.size() && byte_map().to_byte[code_point] >= 0,
               "code point U+", std::hex, static_cast<std::uint32_t>(code_point),
               " in byte-level token '", text, "' stands for no byte");
    out.push_back(static_cast<char>(byte_map().to_byte[code_point]));
  }
  return out;
}

std::string_view replace_invalid_utf8(std::string_view text, std::string& storage) {
  const std::size_t first_bad = detail::first_invalid_utf8(text);
  if (first_bad == text.size()) return text;
  storage.assign(text.substr(0, first_bad));
  std::size_t offset = first_bad;
  while (offset < text.size()) {
    const std::size_t length = detail::valid_sequence_length(text, offset);
    if (length > 0) {
      storage.append(text.substr(offset, length));
      offset += length;
    } else {
      storage.append("\xEF\xBF\xBD");
      offset += detail::maximal_subpart_length(text, offset);
    }
  }
  return storage;
}

}  // namespace zero::text
