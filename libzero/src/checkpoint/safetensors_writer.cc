// Safetensors writing: the header from the tensors' names, dtypes and shapes, the data streamed
// tensor by tensor into path.tmp, then fsync and rename (SafetensorsStreamWriter); the in-memory
// SafetensorsWriter writes through it.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "write_all.h"
#include "zero/checkpoint/durable_write.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/core/error.h"

namespace zero {

namespace fs = std::filesystem;

namespace {

DType float_dtype_of(SafetensorsDType dtype, const std::string& name) {
  switch (dtype) {
    case SafetensorsDType::kF32: return DType::kFloat32;
    case SafetensorsDType::kF16: return DType::kFloat16;
    case SafetensorsDType::kBF16: return DType::kBFloat16;
    default:
      ZERO_THROW("safetensors: tensor '", name, "' is stored as ", name_of(dtype),
                 ", which converted writes do not produce (F32, F16, BF16)");
  }
}

}  // namespace

std::size_t SafetensorsEntry::size_bytes() const {
  std::size_t count = 1;
  for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
  return count * size_of(dtype);
}

std::vector<SafetensorsTensor> safetensors_layout(const std::vector<SafetensorsEntry>& entries) {
  std::vector<SafetensorsTensor> tensors;
  std::set<std::string> names;
  std::size_t offset = 0;
  for (const SafetensorsEntry& entry : entries) {
    ZERO_CHECK(entry.name != "__metadata__" && !entry.name.empty(),
               "safetensors: bad tensor name '", entry.name, "'");
    ZERO_CHECK(names.insert(entry.name).second, "safetensors: tensor '", entry.name,
               "' added twice");
    for (std::int64_t dimension : entry.shape)
      ZERO_CHECK(dimension >= 0, "safetensors: tensor '", entry.name, "' has dimension ",
                 dimension);
    const std::size_t size = entry.size_bytes();
    tensors.push_back({entry.name, entry.dtype, entry.shape, offset, offset + size});
    offset += size;
  }
  return tensors;
}

std::string safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json values = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) values[key] = value;
    header["__metadata__"] = values;
  }
  for (const SafetensorsTensor& tensor : tensors)
    header[tensor.name] = {{"dtype", name_of(tensor.dtype)},
                           {"shape", tensor.shape},
                           {"data_offsets", {tensor.begin, tensor.end}}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  return bytes + text;
}

SafetensorsStreamWriter::SafetensorsStreamWriter(fs::path path,
                                                 const std::vector<SafetensorsEntry>& entries,
                                                 const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tensors_(safetensors_layout(entries)) {
  temporary_ = path_.string() + ".tmp";
  const std::string header = safetensors_header(tensors_, metadata);
  header_size_ = header.size();
  fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd_ >= 0, "cannot create safetensors file ", temporary_.string(), ": ",
             std::strerror(errno));
  buffer_.reserve(kSafetensorsStreamChunkBytes);
  try {
    append(header.data(), header.size());
  } catch (...) {
    ::close(std::exchange(fd_, -1));
    std::error_code ignored;
    fs::remove(temporary_, ignored);
    throw;
  }
  while (current_ < tensors_.size() && tensors_[current_].begin == tensors_[current_].end)
    ++current_;  // empty tensors are complete from the start
}

SafetensorsStreamWriter::SafetensorsStreamWriter(SafetensorsStreamWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temporary_(std::move(other.temporary_)),
      tensors_(std::move(other.tensors_)),
      header_size_(other.header_size_),
      fd_(std::exchange(other.fd_, -1)),
      current_(other.current_),
      written_(other.written_),
      file_offset_(other.file_offset_),
      dropped_(other.dropped_),
      buffer_(std::move(other.buffer_)),
      finished_(std::exchange(other.finished_, true)) {}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_ && !temporary_.empty()) {
    std::error_code ignored;
    fs::remove(temporary_, ignored);
  }
}

std::size_t SafetensorsStreamWriter::file_size_bytes() const {
  return header_size_ + (tensors_.empty() ? 0 : tensors_.back().end);
}

const SafetensorsTensor& SafetensorsStreamWriter::expect(const std::string& name,
                                                         std::size_t size_bytes) const {
  ZERO_CHECK(!finished_, "safetensors file ", path_.string(), " is finished: tensor '", name,
             "' comes too late");
  ZERO_CHECK(current_ < tensors_.size(), "safetensors file ", path_.string(),
             ": every tensor is written, tensor '", name, "' is not in the header");
  const SafetensorsTensor& tensor = tensors_[current_];
  ZERO_CHECK(tensor.name == name, "safetensors file ", path_.string(), ": tensor '", name,
             "' written while '", tensor.name, "' (header position ", current_,
             ") is incomplete; tensors must come in the header's order");
  ZERO_CHECK(written_ + size_bytes <= tensor.end - tensor.begin, "safetensors file ",
             path_.string(), ": tensor '", name, "' given ", written_ + size_bytes,
             " bytes, its dtype and shape hold ", tensor.end - tensor.begin);
  return tensor;
}

void SafetensorsStreamWriter::advance(std::size_t size_bytes) {
  written_ += size_bytes;
  while (current_ < tensors_.size() &&
         written_ == tensors_[current_].end - tensors_[current_].begin) {
    ++current_;
    written_ = 0;
  }
}

void SafetensorsStreamWriter::write(const std::string& name, const void* data,
                                    std::size_t size_bytes) {
  if (size_bytes == 0) return;  // an empty tensor is complete from the start
  expect(name, size_bytes);
  append(data, size_bytes);
  advance(size_bytes);
}

void SafetensorsStreamWriter::write_converted(const std::string& name, const void* data,
                                              DType dtype, std::size_t count) {
  if (count == 0) return;
  const SafetensorsTensor& tensor = expect(name, 0);
  const DType stored = float_dtype_of(tensor.dtype, name);
  const std::size_t stored_size = zero::size_of(stored);
  expect(name, count * stored_size);
  if (dtype == stored) {
    write(name, data, count * stored_size);
    return;
  }
  constexpr std::size_t kChunk = kSafetensorsStreamChunkBytes / sizeof(float);
  std::vector<float> wide(std::min(count, kChunk));
  std::vector<std::byte> narrow(stored == DType::kFloat32 ? 0 : wide.size() * stored_size);
  const std::byte* source = static_cast<const std::byte*>(data);
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(kChunk, count - done);
    convert(source + done * zero::size_of(dtype), dtype, wide.data(), DType::kFloat32, n);
    const void* out = wide.data();
    if (stored != DType::kFloat32) {
      convert(wide.data(), DType::kFloat32, narrow.data(), stored, n);
      out = narrow.data();
    }
    write(name, out, n * stored_size);
    done += n;
  }
}

void SafetensorsStreamWriter::append(const void* data, std::size_t size_bytes) {
  if (buffer_.size() + size_bytes <= kSafetensorsStreamChunkBytes) {
    const std::byte* bytes = static_cast<const std::byte*>(data);
    buffer_.insert(buffer_.end(), bytes, bytes + size_bytes);
    return;
  }
  flush();
  if (size_bytes < kSafetensorsStreamChunkBytes) {
    append(data, size_bytes);
    return;
  }
  write_out(data, size_bytes);
}

void SafetensorsStreamWriter::flush() {
  write_out(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void SafetensorsStreamWriter::write_out(const void* data, std::size_t size_bytes) {
  const char* bytes = static_cast<const char*>(data);
  for (std::size_t done = 0; done < size_bytes;) {
    const ssize_t written = ::write(fd_, bytes + done, size_bytes - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0)
      checkpoint::write_failed(temporary_, file_offset_ + done, file_offset_ + size_bytes,
                               written == 0 ? 0 : errno);
    done += static_cast<std::size_t>(written);
  }
  file_offset_ += size_bytes;
  if (file_offset_ - dropped_ >= kDropCacheBytes) {
    // Written back and out of the page cache (a v1 memory cgroup charges cached pages to us).
    // Advisory: a filesystem without these calls keeps its pages, and fsync still follows.
    ::sync_file_range(
        fd_, static_cast<off_t>(dropped_), static_cast<off_t>(file_offset_ - dropped_),
        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    ::posix_fadvise(fd_, static_cast<off_t>(dropped_), static_cast<off_t>(file_offset_ - dropped_),
                    POSIX_FADV_DONTNEED);
    dropped_ = file_offset_;
  }
}

void SafetensorsStreamWriter::finish() {
  ZERO_CHECK(!finished_, "safetensors file ", path_.string(), " finished twice");
  ZERO_CHECK(
      current_ == tensors_.size(), "safetensors file ", path_.string(), ": finished with tensor '",
      current_ < tensors_.size() ? tensors_[current_].name : std::string(), "' at ", written_,
      " of ", current_ < tensors_.size() ? tensors_[current_].end - tensors_[current_].begin : 0,
      " bytes (", tensors_.size() - current_, " of ", tensors_.size(), " tensors incomplete)");
  flush();
  ZERO_CHECK(::fsync(fd_) == 0, "fsync of ", temporary_.string(),
             " failed: ", std::strerror(errno));
  const int status = ::close(std::exchange(fd_, -1));
  ZERO_CHECK(status == 0, "closing ", temporary_.string(), " failed: ", std::strerror(errno));
  std::error_code error;
  fs::rename(temporary_, path_, error);
  ZERO_CHECK(!error, "renaming ", temporary_.string(), " to ", path_.string(),
             " failed: ", error.message());
  finished_ = true;
  checkpoint::fsync_path(path_.parent_path().empty() ? fs::path(".") : path_.parent_path());
}

void SafetensorsWriter::add(const std::string& name, SafetensorsDType dtype,
                            std::vector<std::int64_t> shape, const void* data,
                            std::size_t size_bytes) {
  ZERO_CHECK(name != "__metadata__" && !name.empty(), "safetensors: bad tensor name '", name, "'");
  for (const SafetensorsTensor& tensor : tensors_)
    ZERO_CHECK(tensor.name != name, "safetensors: tensor '", name, "' added twice");
  SafetensorsTensor tensor{name, dtype, std::move(shape), data_.size(), data_.size() + size_bytes};
  ZERO_CHECK(tensor.num_elements() * size_of(dtype) == size_bytes, "safetensors: tensor '", name,
             "' has ", size_bytes, " bytes, its dtype and shape need ",
             tensor.num_elements() * size_of(dtype));
  data_.resize(tensor.end);
  if (size_bytes > 0) std::memcpy(data_.data() + tensor.begin, data, size_bytes);
  tensors_.push_back(std::move(tensor));
}

void SafetensorsWriter::add_float(const std::string& name, zero::DType dtype,
                                  std::vector<std::int64_t> shape, const float* data) {
  std::size_t count = 1;
  for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
  std::vector<std::byte> converted(count * zero::size_of(dtype));
  convert(data, DType::kFloat32, converted.data(), dtype, count);
  add(name, safetensors_dtype(dtype), std::move(shape), converted.data(), converted.size());
}

std::string SafetensorsWriter::header_bytes() const {
  return safetensors_header(tensors_, metadata_);
}

void SafetensorsWriter::write(const fs::path& path) const {
  std::vector<SafetensorsEntry> entries;
  for (const SafetensorsTensor& tensor : tensors_)
    entries.push_back({tensor.name, tensor.dtype, tensor.shape});
  SafetensorsStreamWriter stream(path, entries, metadata_);
  for (const SafetensorsTensor& tensor : tensors_)
    stream.write(tensor.name, data_.data() + tensor.begin, tensor.end - tensor.begin);
  stream.finish();
}

}  // namespace zero
