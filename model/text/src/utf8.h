// UTF-8 decoding per Unicode Table 3-7 (well-formed byte sequences) and its maximal subparts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zero::text::detail {

inline constexpr char32_t kInvalidCodePoint = 0xFFFFFFFF;

// The [low, high] range allowed for the second byte after `lead`, and the sequence length; length
// 0 for a byte that cannot start a sequence.
struct LeadInfo {
  int length;
  unsigned char second_low, second_high;
};

inline LeadInfo lead_info(unsigned char lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead < 0xC2) return {0, 0, 0};
  if (lead < 0xE0) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead < 0xF0) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead < 0xF4) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Length of the well-formed sequence at `offset`, or 0 when it is ill-formed.
inline std::size_t valid_sequence_length(std::string_view text, std::size_t offset) {
  const auto lead = static_cast<unsigned char>(text[offset]);
  const LeadInfo info = lead_info(lead);
  if (info.length <= 1) return static_cast<std::size_t>(info.length);
  if (offset + info.length > text.size()) return 0;
  const auto second = static_cast<unsigned char>(text[offset + 1]);
  if (second < info.second_low || second > info.second_high) return 0;
  for (int i = 2; i < info.length; ++i) {
    const auto byte = static_cast<unsigned char>(text[offset + i]);
    if (byte < 0x80 || byte > 0xBF) return 0;
  }
  return static_cast<std::size_t>(info.length);
}

// Length of the maximal subpart of an ill-formed sequence at `offset` (at least 1): the lead byte
// and the continuation bytes that could still have completed it. One U+FFFD replaces it.
inline std::size_t maximal_subpart_length(std::string_view text, std::size_t offset) {
  const LeadInfo info = lead_info(static_cast<unsigned char>(text[offset]));
  if (info.length <= 1) return 1;
  std::size_t length = 1;
  for (int i = 1; i < info.length && offset + i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[offset + i]);
    const unsigned char low = i == 1 ? info.second_low : 0x80;
    const unsigned char high = i == 1 ? info.second_high : 0xBF;
    if (byte < low || byte > high) break;
    ++length;
  }
  return length;
}

// Offset of the first ill-formed byte, or text.size() when all of `text` is valid UTF-8.
inline std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t offset = 0;
  const std::size_t size = text.size();
  while (offset < size) {
    // ASCII fast path, 8 bytes at a time.
    while (offset + 8 <= size) {
      std::uint64_t word;
      __builtin_memcpy(&word, text.data() + offset, 8);
      if (word & 0x8080808080808080ull) break;
      offset += 8;
    }
    if (offset >= size) break;
    if (static_cast<unsigned char>(text[offset]) < 0x80) {
      ++offset;
      continue;
    }
    const std::size_t length = valid_sequence_length(text, offset);
    if (length == 0) return offset;
    offset += length;
  }
  return size;
}

// Decodes the code point at `offset` and advances it; kInvalidCodePoint (advancing one byte) for
// an ill-formed sequence.
inline char32_t next_code_point(std::string_view text, std::size_t& offset) {
  const std::size_t length = valid_sequence_length(text, offset);
  const auto lead = static_cast<unsigned char>(text[offset]);
  if (length == 0) {
    ++offset;
    return kInvalidCodePoint;
  }
  char32_t code_point = length == 1 ? lead : lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i)
    code_point = (code_point << 6) | (static_cast<unsigned char>(text[offset + i]) & 0x3F);
  offset += length;
  return code_point;
}

inline void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace zero::text::detail
