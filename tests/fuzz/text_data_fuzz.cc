// Fuzzes run_clm's data readers: the input is a corpus file, opened as text (the binary check)
// and split into examples as lines of text and as JSON Lines, as the data pipeline reads .txt and
// .jsonl files.
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/text/text_files.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = zero::fuzz::as_text(data, size);
  const std::filesystem::path folder = zero::fuzz::fresh_folder();
  for (const char* name : {"train.txt", "train.jsonl"}) {
    const std::filesystem::path path = folder / name;
    zero::fuzz::write_bytes(path, bytes);
    try {
      const zero::text::MappedFile file = zero::text::open_text_file(path);
      std::size_t total_bytes = 0;
      zero::text::for_each_example(
          file.bytes(), zero::text::format_of(path), path,
          [&](std::string_view example) { total_bytes += example.size(); });
    } catch (const zero::Error&) {
    }
  }
  try {
    zero::text::for_each_json_object(
        bytes, folder / "labels.jsonl", [](const nlohmann::json&, std::size_t) {}, 7);
  } catch (const zero::Error&) {
  }
  return 0;
}
