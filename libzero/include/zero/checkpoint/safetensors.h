// Safetensors files: a reader that validates the whole header against the file before any
// tensor is touched, and a writer. In libzero, so Hugging Face checkpoints (model/gpt2) and the
// engine's own sharded checkpoints use the one implementation. Format: u64 little-endian header
// size N, N bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data; offsets are relative to the data start.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "zero/core/dtype.h"

namespace zero {

// Stored element types understood here (names as in the format).
enum class SafetensorsDType : std::uint8_t { kF32, kF16, kBF16, kI32, kI64, kF64 };
std::string_view name_of(SafetensorsDType dtype);  // "F32", ...
std::size_t size_of(SafetensorsDType dtype);

struct SafetensorsTensor {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<std::int64_t> shape;
  std::size_t begin = 0;  // byte offsets into the data section
  std::size_t end = 0;
  std::size_t num_elements() const;
};

// Largest header accepted (the reference implementation's limit).
inline constexpr std::size_t kMaxSafetensorsHeaderBytes = 100u << 20;

class SafetensorsReader {
 public:
  // Reads and validates the file: size field present and within the file and the limit, JSON
  // object, known dtypes, non-negative shapes, each tensor's byte range matching dtype × shape,
  // ranges inside the data section and not overlapping. Any failure throws zero::Error naming
  // the file and what is wrong.
  explicit SafetensorsReader(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  // Throws zero::Error naming the file and the tensor when it is absent.
  const SafetensorsTensor& tensor(const std::string& name) const;
  const std::byte* data(const SafetensorsTensor& tensor) const {
    return data_.data() + tensor.begin;
  }

  // Converts a floating-point tensor (F32, F16, BF16, F64) to fp32 into `out` (num_elements).
  void read_float(const std::string& name, float* out) const;
  std::vector<float> read_float(const std::string& name) const;
  // Reads an integer tensor (I32 or I64) as int64.
  std::vector<std::int64_t> read_int(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::byte> data_;  // the data section
};

class SafetensorsWriter {
 public:
  // Copies `size_bytes` of `data`; size must equal dtype × shape. Names must be unique.
  void add(const std::string& name, SafetensorsDType dtype, std::vector<std::int64_t> shape,
           const void* data, std::size_t size_bytes);
  // Converts fp32 `data` to `dtype` (F32, F16 or BF16).
  void add_float(const std::string& name, zero::DType dtype, std::vector<std::int64_t> shape,
                 const float* data);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  std::size_t data_size_bytes() const { return data_.size(); }
  // Writes the file (to a temporary name, then renamed). Header padded with spaces to 8 bytes.
  void write(const std::filesystem::path& path) const;
  // The file's bytes in two pieces, for callers that write it themselves (fsync, checksums):
  // the size field + header JSON, then the data section.
  std::string header_bytes() const;
  const std::vector<std::byte>& data_bytes() const { return data_; }

 private:
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::byte> data_;
};

SafetensorsDType safetensors_dtype(zero::DType dtype);

}  // namespace zero
