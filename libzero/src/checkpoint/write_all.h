// Writing every byte of a buffer to a file descriptor, for the checkpoint's durable writes.
// Private to libzero/src/checkpoint.
#pragma once

#include <cstddef>
#include <filesystem>

namespace zero::checkpoint {

// Writes `size` bytes from `data` to `fd`, retrying after EINTR and short writes; throws
// zero::Error naming `path` on failure. Does not fsync or close `fd`.
void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& path);

// Throws zero::Error for a failed write of bytes [begin, end) of `path` with `error` (an errno, 0:
// the write made no progress). A full file system (ENOSPC, EDQUOT) also names the free and total
// bytes of the file system that holds `path`, so the job's last line says what ran out and where.
[[noreturn]] void write_failed(const std::filesystem::path& path, std::size_t begin,
                               std::size_t end, int error);

}  // namespace zero::checkpoint
