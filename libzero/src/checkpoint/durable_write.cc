// Durable writes: every byte to a descriptor, fsync of a file or folder, atomic replacement.
#include "zero/checkpoint/durable_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "write_all.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

void write_all(int fd, const void* data, std::size_t size, const fs::path& path) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    ZERO_CHECK(written > 0, "writing ", path.string(), " failed: ", std::strerror(errno));
    bytes += written;
    size -= static_cast<std::size_t>(written);
  }
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZERO_CHECK(fd >= 0, "cannot open ", path.string(), " to fsync it: ", std::strerror(errno));
  const int status = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  ZERO_CHECK(status == 0, "fsync of ", path.string(), " failed: ", std::strerror(saved));
}

void write_file_atomically(const fs::path& path, const std::string& text) {
  const fs::path temporary = path.string() + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "cannot create ", temporary.string(), ": ", std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), temporary);
    ZERO_CHECK(::fsync(fd) == 0, "fsync of ", temporary.string(),
               " failed: ", std::strerror(errno));
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  fs::rename(temporary, path);
  fsync_path(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

}  // namespace zero::checkpoint
