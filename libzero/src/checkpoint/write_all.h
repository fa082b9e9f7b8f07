// Writing every byte of a buffer to a file descriptor, for the checkpoint's durable writes.
// Private to libzero/src/checkpoint.
#pragma once

#include <cstddef>
#include <filesystem>

namespace zero::checkpoint {

// Writes `size` bytes from `data` to `fd`, retrying after EINTR and short writes; throws
// zero::Error naming `path` on failure. Does not fsync or close `fd`.
void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& path);

}  // namespace zero::checkpoint
