// Fuzzes the labelled-data readers of text classification (run_classification's --train_file):
// the input is a file read as CSV (read_csv_table, then as labelled rows) and as JSON Lines
// labelled rows, with the text columns "sentence1" and "sentence2" and the label column "label".
#include "fuzz_input.h"
#include "zero/core/error.h"
#include "zero/train/classification_data.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes = zero::fuzz::as_text(data, size);
  const std::filesystem::path folder = zero::fuzz::fresh_folder();
  const std::filesystem::path csv = folder / "train.csv", jsonl = folder / "train.jsonl";
  zero::fuzz::write_bytes(csv, bytes);
  zero::fuzz::write_bytes(jsonl, bytes);
  try {
    zero::train::read_csv_table(csv);
  } catch (const zero::Error&) {
  }
  for (const std::filesystem::path& path : {csv, jsonl}) {
    try {
      const std::vector<zero::train::LabelledText> examples =
          zero::train::read_labelled_file(path, {"sentence1", "sentence2"}, " ", "label");
      zero::train::label_list(examples);
    } catch (const zero::Error&) {
    }
  }
  return 0;
}
