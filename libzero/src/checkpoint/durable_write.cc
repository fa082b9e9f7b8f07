// Durable writes: every byte to a descriptor, fsync of a file or folder, atomic replacement.
#include "zero/checkpoint/durable_write.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "write_all.h"
#include "zero/core/error.h"

namespace zero::checkpoint {

namespace fs = std::filesystem;

void write_failed(const fs::path& path, std::size_t begin, std::size_t end, int error) {
  const std::string reason = error == 0 ? "no progress" : std::strerror(error);
  if (error != ENOSPC && error != EDQUOT)
    ZERO_THROW("writing bytes [", begin, ", ", end, ") of ", path.string(), " failed: ", reason);
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  struct statvfs device {};
  if (::statvfs(folder.c_str(), &device) != 0)
    ZERO_THROW("writing bytes [", begin, ", ", end, ") of ", path.string(), " failed: ", reason);
  const auto block = static_cast<unsigned long long>(device.f_frsize);
  ZERO_THROW("writing bytes [", begin, ", ", end, ") of ", path.string(), " failed: ", reason,
             " (the file system of ", folder.string(), " has ",
             static_cast<unsigned long long>(device.f_bavail) * block, " bytes free of ",
             static_cast<unsigned long long>(device.f_blocks) * block,
             "); free space there or save elsewhere");
}

void write_all(int fd, const void* data, std::size_t size, const fs::path& path) {
  const char* bytes = static_cast<const char*>(data);
  for (std::size_t done = 0; done < size;) {
    const ssize_t written = ::write(fd, bytes + done, size - done);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) write_failed(path, done, size, written == 0 ? 0 : errno);
    done += static_cast<std::size_t>(written);
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
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "cannot create ", temporary.string(), ": ", std::strerror(errno));
  try {
    write_all(fd, text.data(), text.size(), temporary);
    ZERO_CHECK(::fsync(fd) == 0, "fsync of ", temporary.string(),
               " failed: ", std::strerror(errno));
    ZERO_CHECK(::close(std::exchange(fd, -1)) == 0, "closing ", temporary.string(),
               " failed: ", std::strerror(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    std::error_code ignored;
    fs::remove(temporary, ignored);  // the old file stays whole, and no partial temporary
    throw;
  }
  fs::rename(temporary, path);
  fsync_path(path.parent_path().empty() ? fs::path(".") : path.parent_path());
}

}  // namespace zero::checkpoint
