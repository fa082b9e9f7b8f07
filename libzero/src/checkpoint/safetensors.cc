// Safetensors reader: the header validated against the file before any tensor is read.
#include "zero/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "zero/core/error.h"

namespace zero {
namespace {

struct DTypeName {
  SafetensorsDType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr DTypeName kDTypes[] = {
    {SafetensorsDType::kF32, "F32", 4},   {SafetensorsDType::kF16, "F16", 2},
    {SafetensorsDType::kBF16, "BF16", 2}, {SafetensorsDType::kI32, "I32", 4},
    {SafetensorsDType::kI64, "I64", 8},   {SafetensorsDType::kF64, "F64", 8},
};

std::uint64_t read_u64_le(const unsigned char* bytes) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

}  // namespace

std::string_view name_of(SafetensorsDType dtype) {
  for (const DTypeName& entry : kDTypes)
    if (entry.dtype == dtype) return entry.name;
  return "?";
}

std::size_t size_of(SafetensorsDType dtype) {
  for (const DTypeName& entry : kDTypes)
    if (entry.dtype == dtype) return entry.size;
  return 0;
}

std::size_t SafetensorsTensor::num_elements() const {
  std::size_t count = 1;
  for (std::int64_t dimension : shape) count *= static_cast<std::size_t>(dimension);
  return count;
}

SafetensorsDType safetensors_dtype(zero::DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return SafetensorsDType::kF32;
    case DType::kFloat16: return SafetensorsDType::kF16;
    case DType::kBFloat16: return SafetensorsDType::kBF16;
  }
  return SafetensorsDType::kF32;
}

SafetensorsReader::SafetensorsReader(const std::filesystem::path& path, bool load_data)
    : path_(path) {
  const std::string file = path.string();
  std::ifstream stream(path, std::ios::binary);
  ZERO_CHECK(stream.good(), "cannot open safetensors file ", file);
  std::error_code error;
  const std::uintmax_t file_size = std::filesystem::file_size(path, error);
  ZERO_CHECK(!error, "cannot stat safetensors file ", file, ": ", error.message());
  ZERO_CHECK(file_size >= 8, "safetensors file ", file, " is truncated: ", file_size,
             " bytes, less than the 8-byte header size field");
  unsigned char size_field[8];
  stream.read(reinterpret_cast<char*>(size_field), 8);
  const std::uint64_t header_size = read_u64_le(size_field);
  ZERO_CHECK(header_size <= kMaxSafetensorsHeaderBytes, "safetensors file ", file, ": header size ",
             header_size, " exceeds the ", kMaxSafetensorsHeaderBytes,
             "-byte limit (corrupt or not safetensors)");
  ZERO_CHECK(header_size <= file_size - 8, "safetensors file ", file, " is truncated: header of ",
             header_size, " bytes but only ", file_size - 8, " bytes follow the size field");
  std::string header(header_size, '\0');
  stream.read(header.data(), static_cast<std::streamsize>(header_size));
  ZERO_CHECK(stream.good(), "reading the header of ", file, " failed");

  nlohmann::json json;
  try {
    json = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& parse_error) {
    ZERO_THROW("safetensors file ", file, ": header is not valid JSON: ", parse_error.what());
  }
  ZERO_CHECK(json.is_object(), "safetensors file ", file, ": header is not a JSON object");
  const std::size_t data_size = file_size - 8 - header_size;
  for (auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      ZERO_CHECK(entry.is_object(), "safetensors file ", file, ": __metadata__ is not an object");
      for (auto& [key, value] : entry.items()) {
        ZERO_CHECK(value.is_string(), "safetensors file ", file, ": metadata '", key,
                   "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = "safetensors file " + file + ": tensor '" + name + "'";
    ZERO_CHECK(entry.is_object() && entry.contains("dtype") && entry.contains("shape") &&
                   entry.contains("data_offsets"),
               where, " needs dtype, shape and data_offsets");
    SafetensorsTensor tensor;
    tensor.name = name;
    ZERO_CHECK(entry["dtype"].is_string(), where, ": dtype is not a string");
    const std::string dtype = entry["dtype"].get<std::string>();
    const DTypeName* known = nullptr;
    for (const DTypeName& candidate : kDTypes)
      if (candidate.name == dtype) known = &candidate;
    ZERO_CHECK(known != nullptr, where, ": unsupported dtype '", dtype,
               "' (F32, F16, BF16, F64, I32, I64)");
    tensor.dtype = known->dtype;
    ZERO_CHECK(entry["shape"].is_array(), where, ": shape is not an array");
    for (const auto& dimension : entry["shape"]) {
      ZERO_CHECK(dimension.is_number_integer() && dimension.get<std::int64_t>() >= 0, where,
                 ": bad dimension ", dimension.dump());
      tensor.shape.push_back(dimension.get<std::int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    ZERO_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                   offsets[1].is_number_unsigned(),
               where, ": data_offsets must be two non-negative integers, got ", offsets.dump());
    tensor.begin = offsets[0].get<std::size_t>();
    tensor.end = offsets[1].get<std::size_t>();
    ZERO_CHECK(tensor.begin <= tensor.end, where, ": data_offsets [", tensor.begin, ", ",
               tensor.end, "] are inconsistent (begin after end)");
    ZERO_CHECK(tensor.end <= data_size, where, ": data_offsets end ", tensor.end,
               " is past the data section of ", data_size, " bytes (file truncated?)");
    const std::size_t expected = tensor.num_elements() * known->size;
    ZERO_CHECK(tensor.end - tensor.begin == expected, where, ": data_offsets span ",
               tensor.end - tensor.begin, " bytes but dtype ", dtype, " and its shape need ",
               expected);
    tensors_.push_back(std::move(tensor));
  }
  std::vector<const SafetensorsTensor*> sorted;
  for (const SafetensorsTensor& tensor : tensors_) sorted.push_back(&tensor);
  std::sort(
      sorted.begin(), sorted.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < sorted.size(); ++i)
    ZERO_CHECK(sorted[i]->begin >= sorted[i - 1]->end, "safetensors file ", file,
               ": inconsistent data_offsets: tensors '", sorted[i - 1]->name, "' and '",
               sorted[i]->name, "' overlap");
  data_start_ = 8 + header_size;
  file_size_ = file_size;
  if (!load_data) return;
  data_.resize(data_size);
  stream.read(reinterpret_cast<char*>(data_.data()), static_cast<std::streamsize>(data_size));
  ZERO_CHECK(stream.good() || data_size == 0, "reading the data of ", file, " failed");
  loaded_ = true;
}

const std::byte* SafetensorsReader::data(const SafetensorsTensor& tensor) const {
  ZERO_CHECK(loaded_, "safetensors file ", path_.string(),
             " was opened without its data: read tensor '", tensor.name, "' with read_bytes");
  return data_.data() + tensor.begin;
}

void SafetensorsReader::read_bytes(const SafetensorsTensor& tensor, std::size_t offset_bytes,
                                   std::size_t size_bytes, void* out) const {
  ZERO_CHECK(offset_bytes <= tensor.end - tensor.begin &&
                 size_bytes <= tensor.end - tensor.begin - offset_bytes,
             "safetensors file ", path_.string(), ": bytes [", offset_bytes, ", ",
             offset_bytes + size_bytes, ") are outside tensor '", tensor.name, "' of ",
             tensor.end - tensor.begin, " bytes");
  if (loaded_) {
    if (size_bytes > 0) std::memcpy(out, data_.data() + tensor.begin + offset_bytes, size_bytes);
    return;
  }
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "cannot open safetensors file ", path_.string(), ": ", std::strerror(errno));
  const std::size_t begin = data_start_ + tensor.begin + offset_bytes;
  std::size_t done = 0;
  while (done < size_bytes) {
    const ssize_t got = ::pread(fd, static_cast<char*>(out) + done, size_bytes - done,
                                static_cast<off_t>(begin + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int saved = errno;
      ::close(fd);
      ZERO_THROW("reading bytes [", begin + done, ", ", begin + size_bytes, ") of ", path_.string(),
                 " failed: ", got == 0 ? "unexpected end of file" : std::strerror(saved));
    }
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
}

bool SafetensorsReader::contains(const std::string& name) const {
  return std::any_of(tensors_.begin(), tensors_.end(),
                     [&](const SafetensorsTensor& tensor) { return tensor.name == name; });
}

const SafetensorsTensor& SafetensorsReader::tensor(const std::string& name) const {
  for (const SafetensorsTensor& tensor : tensors_)
    if (tensor.name == name) return tensor;
  ZERO_THROW("safetensors file ", path_.string(), " has no tensor '", name, "' (it has ",
             tensors_.size(), " tensors)");
}

void SafetensorsReader::with_bytes(std::size_t begin, std::size_t end,
                                   const std::function<void(const std::byte*)>& use) const {
  if (loaded_ || begin == end) {
    use(loaded_ ? data_.data() + begin : nullptr);
    return;
  }
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "cannot open safetensors file ", path_.string(), ": ", std::strerror(errno));
  // The header was checked against the file's size at opening; touching a mapped page past the
  // end of a file that shrank since would fault (SIGBUS), so check it is still whole.
  struct stat status {};
  if (::fstat(fd, &status) != 0 || static_cast<std::size_t>(status.st_size) < data_start_ + end) {
    const long long now = ::fstat(fd, &status) == 0 ? static_cast<long long>(status.st_size) : -1;
    ::close(fd);
    ZERO_THROW("safetensors file ", path_.string(), " is truncated: it had ", file_size_,
               " bytes when opened, now ", now);
  }
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  const std::size_t first = (data_start_ + begin) / page * page;
  const std::size_t length = data_start_ + end - first;
  void* address = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(first));
  const int saved = errno;
  ::close(fd);  // the mapping keeps the file
  ZERO_CHECK(address != MAP_FAILED, "cannot map bytes [", first, ", ", first + length, ") of ",
             path_.string(), ": ", std::strerror(saved));
  try {
    use(static_cast<const std::byte*>(address) + (data_start_ + begin - first));
  } catch (...) {
    ::munmap(address, length);
    throw;
  }
  ::munmap(address, length);
}

void SafetensorsReader::read_float(const SafetensorsTensor& tensor, std::size_t first,
                                   std::size_t count, float* out) const {
  const std::size_t width = size_of(tensor.dtype);
  ZERO_CHECK(first <= tensor.num_elements() && count <= tensor.num_elements() - first,
             "safetensors file ", path_.string(), ": values [", first, ", ", first + count,
             ") are outside tensor '", tensor.name, "' of ", tensor.num_elements(), " values");
  const bool floating =
      tensor.dtype == SafetensorsDType::kF32 || tensor.dtype == SafetensorsDType::kF16 ||
      tensor.dtype == SafetensorsDType::kBF16 || tensor.dtype == SafetensorsDType::kF64;
  ZERO_CHECK(floating, "safetensors file ", path_.string(), ": tensor '", tensor.name,
             "' has dtype ", name_of(tensor.dtype), ", not a floating-point type");
  const std::size_t chunk = kStreamChunkBytes / width;
  for (std::size_t done = 0; done < count;) {
    const std::size_t n = std::min(chunk, count - done);
    const std::size_t begin = tensor.begin + (first + done) * width;
    float* destination = out + done;
    with_bytes(begin, begin + n * width, [&](const std::byte* bytes) {
      switch (tensor.dtype) {
        case SafetensorsDType::kF32: std::memcpy(destination, bytes, n * 4); return;
        case SafetensorsDType::kF16:
          convert(bytes, DType::kFloat16, destination, DType::kFloat32, n);
          return;
        case SafetensorsDType::kBF16:
          convert(bytes, DType::kBFloat16, destination, DType::kFloat32, n);
          return;
        default:
          for (std::size_t i = 0; i < n; ++i) {
            double value;
            std::memcpy(&value, bytes + 8 * i, 8);
            destination[i] = static_cast<float>(value);
          }
      }
    });
    done += n;
  }
}

void SafetensorsReader::read_float(const std::string& name, float* out) const {
  const SafetensorsTensor& entry = tensor(name);
  read_float(entry, 0, entry.num_elements(), out);
}

std::vector<float> SafetensorsReader::read_float(const std::string& name) const {
  std::vector<float> out(tensor(name).num_elements());
  read_float(name, out.data());
  return out;
}

std::vector<std::int64_t> SafetensorsReader::read_int(const std::string& name) const {
  const SafetensorsTensor& entry = tensor(name);
  std::vector<std::int64_t> out(entry.num_elements());
  if (out.empty()) return out;
  ZERO_CHECK(entry.dtype == SafetensorsDType::kI64 || entry.dtype == SafetensorsDType::kI32,
             "safetensors file ", path_.string(), ": tensor '", name, "' has dtype ",
             name_of(entry.dtype), ", not I32 or I64");
  with_bytes(entry.begin, entry.end, [&](const std::byte* bytes) {
    if (entry.dtype == SafetensorsDType::kI64) {
      std::memcpy(out.data(), bytes, out.size() * 8);
      return;
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::int32_t value;
      std::memcpy(&value, bytes + 4 * i, 4);
      out[i] = value;
    }
  });
  return out;
}

}  // namespace zero
