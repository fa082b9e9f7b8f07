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
#include <functional>
#include <map>
#include <memory>
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
  // With load_data false only the header is read (checked against the file's size); tensors are
  // then read piece by piece (read_bytes, or read_float through mappings of one chunk at a
  // time), never the whole data section at once.
  explicit SafetensorsReader(const std::filesystem::path& path, bool load_data = true);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const;
  // Throws zero::Error naming the file and the tensor when it is absent.
  const SafetensorsTensor& tensor(const std::string& name) const;
  // The tensor's bytes in memory (a reader that loaded the data; else throws).
  const std::byte* data(const SafetensorsTensor& tensor) const;
  // Copies bytes [offset_bytes, offset_bytes + size_bytes) of the tensor into `out`, from memory
  // or from the file (pread). Throws naming the file and byte range when it cannot.
  void read_bytes(const SafetensorsTensor& tensor, std::size_t offset_bytes, std::size_t size_bytes,
                  void* out) const;

  // Converts a floating-point tensor (F32, F16, BF16, F64) to fp32 into `out` (num_elements).
  void read_float(const std::string& name, float* out) const;
  // Converts values [first, first + count) of a floating-point tensor to fp32 into `out` (count
  // values). A reader without its data maps kStreamChunkBytes of the file at a time, read-only,
  // and unmaps each chunk once converted: the resident size grows by `out` alone, plus at most one
  // chunk while converting (and the address space by one chunk). Throws zero::Error naming the file
  // and tensor when the range is outside it or its dtype is not floating-point. Not thread-safe.
  void read_float(const SafetensorsTensor& tensor, std::size_t first, std::size_t count,
                  float* out) const;
  static constexpr std::size_t kStreamChunkBytes = 8u << 20;
  std::vector<float> read_float(const std::string& name) const;
  // Reads an integer tensor (I32 or I64) as int64.
  std::vector<std::int64_t> read_int(const std::string& name) const;

 private:
  std::filesystem::path path_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  // Calls `use` with the stored bytes [begin, end) of the data section: in memory when loaded,
  // else a read-only mapping of just their pages, unmapped when `use` returns.
  void with_bytes(std::size_t begin, std::size_t end,
                  const std::function<void(const std::byte*)>& use) const;

  std::vector<std::byte> data_;  // the data section, when loaded
  std::size_t data_start_ = 0;   // the data section's offset in the file
  std::size_t file_size_ = 0;    // when opened
  bool loaded_ = false;
};

// A tensor as a header lists it before its bytes exist: name, stored dtype, shape.
struct SafetensorsEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::kF32;
  std::vector<std::int64_t> shape;
  std::size_t size_bytes() const;
};

// The tensors of `entries` back to back in this order (their data_offsets), checked: names
// unique, not empty, not "__metadata__", dimensions non-negative. Throws zero::Error naming the
// bad entry.
std::vector<SafetensorsTensor> safetensors_layout(const std::vector<SafetensorsEntry>& entries);
// The file's first bytes: the u64 little-endian size field and the JSON header ("__metadata__"
// first when not empty, then the tensors in order), padded with spaces to a multiple of 8.
std::string safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                               const std::map<std::string, std::string>& metadata);

// Bytes a SafetensorsStreamWriter holds besides its header, at most: a staging buffer for small
// writes, and while converting, one chunk widened to fp32 and its narrowed copy.
inline constexpr std::size_t kSafetensorsStreamChunkBytes = 1u << 20;
inline constexpr std::size_t kSafetensorsStreamBufferBytes = 3 * kSafetensorsStreamChunkBytes;

// Writes one safetensors file tensor by tensor without holding its data: the header is computed
// up front from the entries, each tensor's bytes are appended as they arrive (whole or in pieces,
// in the header's order), and finish() makes the file durable and visible at once (path.tmp,
// fsync, rename, fsync of the folder). Until finish() the file at `path`, if any, is untouched;
// an unfinished writer's destructor removes path.tmp. Written bytes are flushed and dropped from
// the page cache every kDropCacheBytes, so a large file does not stay resident. Move-only.
class SafetensorsStreamWriter {
 public:
  static constexpr std::size_t kDropCacheBytes = 64u << 20;

  // Creates path.tmp and writes the header. Throws zero::Error naming the file.
  SafetensorsStreamWriter(std::filesystem::path path, const std::vector<SafetensorsEntry>& entries,
                          const std::map<std::string, std::string>& metadata = {});
  SafetensorsStreamWriter(SafetensorsStreamWriter&& other) noexcept;
  SafetensorsStreamWriter& operator=(SafetensorsStreamWriter&&) = delete;
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;
  ~SafetensorsStreamWriter();

  // Appends `size_bytes` of tensor `name`'s bytes. Throws when `name` is not the tensor being
  // written (the first one not complete, in the header's order) or the bytes overrun it.
  void write(const std::string& name, const void* data, std::size_t size_bytes);
  // Appends `count` values of `dtype` (fp32, fp16 or bf16) converted to the tensor's stored
  // dtype (F32, F16 or BF16) through fp32, in chunks (no copy of the whole tensor).
  void write_converted(const std::string& name, const void* data, DType dtype, std::size_t count);
  // Throws unless every tensor is complete; flushes, fsyncs, renames path.tmp to path, fsyncs
  // the folder.
  void finish();

  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  std::size_t header_size_bytes() const { return header_size_; }
  std::size_t file_size_bytes() const;  // header + data, as the finished file will be

 private:
  void append(const void* data, std::size_t size_bytes);
  void flush();
  void write_out(const void* data, std::size_t size_bytes);
  const SafetensorsTensor& expect(const std::string& name, std::size_t size_bytes) const;
  void advance(std::size_t size_bytes);
  std::filesystem::path path_, temporary_;
  std::vector<SafetensorsTensor> tensors_;
  std::size_t header_size_ = 0;
  int fd_ = -1;
  std::size_t current_ = 0;        // the tensor being written
  std::size_t written_ = 0;        // its bytes so far
  std::size_t file_offset_ = 0;    // bytes handed to the file (header included)
  std::size_t dropped_ = 0;        // bytes before this are flushed and dropped from the cache
  std::vector<std::byte> buffer_;  // staged small writes, at most kSafetensorsStreamChunkBytes
  bool finished_ = false;
};

// Builds a whole file in memory, then writes it through SafetensorsStreamWriter (one writing
// mechanism); for small files and tests.
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
  // Writes the file durably (path.tmp, fsync, rename, fsync of the folder).
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
