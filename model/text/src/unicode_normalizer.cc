// Unicode normalization form C by ICU's Normalizer2 on UTF-8.
#include "unicode_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "zero/core/error.h"

namespace zero::text::detail {
namespace {

const icu::Normalizer2& nfc() {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  ZERO_CHECK(U_SUCCESS(status) && normalizer != nullptr,
             "ICU has no NFC normalizer: ", u_errorName(status));
  return *normalizer;
}

}  // namespace

bool below_combining_marks(std::string_view text) {
  for (unsigned char byte : text)
    if (byte >= 0xCC) return false;  // the lead bytes of U+0300 and above
  return true;
}

std::string to_nfc(std::string_view text) {
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  UErrorCode status = U_ZERO_ERROR;
  nfc().normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                      nullptr, status);
  ZERO_CHECK(U_SUCCESS(status), "ICU NFC normalization failed: ", u_errorName(status));
  return out;
}

}  // namespace zero::text::detail
