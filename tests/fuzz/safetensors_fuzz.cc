// Fuzzes the safetensors reader (zero::SafetensorsReader, public API only): the input is a whole
// file, opened with and without loading its data; every tensor it lists is then read as the
// checkpoint loaders read it (converted to fp32 or int64, and piecewise with read_bytes).
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"

namespace {

void read_every_tensor(const zero::SafetensorsReader& reader) {
  for (const zero::SafetensorsTensor& tensor : reader.tensors()) {
    const bool is_int = tensor.dtype == zero::SafetensorsDType::kI32 ||
                        tensor.dtype == zero::SafetensorsDType::kI64;
    try {
      if (is_int)
        reader.read_int(tensor.name);
      else
        reader.read_float(tensor.name);
    } catch (const zero::Error&) {
    }
    const std::size_t size_bytes = tensor.end - tensor.begin;
    std::vector<char> bytes(size_bytes);
    try {
      reader.read_bytes(tensor, 0, size_bytes, bytes.data());
      if (size_bytes > 1) reader.read_bytes(tensor, 1, size_bytes - 1, bytes.data());
      reader.read_bytes(tensor, size_bytes, 1, bytes.data());  // past the end: must throw
    } catch (const zero::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path path = zero::fuzz::fresh_folder() / "model.safetensors";
  zero::fuzz::write_bytes(path, zero::fuzz::as_text(data, size));
  for (const bool load_data : {true, false}) {
    try {
      const zero::SafetensorsReader reader(path, load_data);
      read_every_tensor(reader);
    } catch (const zero::Error&) {
    }
  }
  return 0;
}
