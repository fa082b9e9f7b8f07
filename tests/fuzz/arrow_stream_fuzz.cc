// Fuzzes the Arrow IPC stream reader of datasets' cache files (text::for_each_arrow_text): the
// input is the whole stream, read over its bytes and as a file.
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/text/arrow_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = zero::fuzz::as_text(data, size);
  std::size_t total_bytes = 0;
  const auto count = [&](std::string_view text) { total_bytes += text.size(); };
  try {
    zero::text::for_each_arrow_text(bytes, "input.arrow", count);
  } catch (const zero::Error&) {
  }
  const std::filesystem::path path = zero::fuzz::fresh_folder() / "train.arrow";
  zero::fuzz::write_bytes(path, bytes);
  try {
    zero::text::for_each_arrow_text(path, count);
  } catch (const zero::Error&) {
  }
  return 0;
}
