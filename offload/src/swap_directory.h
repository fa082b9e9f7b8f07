// The folder a rank's swap files live in: checks on nvme_path, the direct-I/O probe and alignment,
// and removal at destruction, exit or abort. Private to zero::offload (the store and its tests).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace zero::detail {

// The filesystem holding `path`: its type ("ext4", "tmpfs", ...) and mount point, from
// /proc/self/mounts (type "unknown" when that cannot be read).
struct FilesystemInfo {
  std::string type;
  std::filesystem::path mount_point;
};
FilesystemInfo filesystem_of(const std::filesystem::path& path);

// One rank's swap folder, <nvme_path>/zero_swap_rank<rank>_<pid>/. Every store of the process
// for that rank shares it (files are named per store); it is removed when the last one goes, and
// by an atexit handler when the process exits without destroying its stores.
class SwapDirectory {
 public:
  // Throws zero::Error naming the path when nvme_path is empty, missing, not a directory,
  // read-only or not writable, or on a filesystem without O_DIRECT (probed with one aligned write
  // and read).
  SwapDirectory(const std::filesystem::path& nvme_path, int rank);
  ~SwapDirectory();
  SwapDirectory(const SwapDirectory&) = delete;
  SwapDirectory& operator=(const SwapDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const FilesystemInfo& filesystem() const { return filesystem_; }
  // Alignment of buffers, offsets and lengths for O_DIRECT: the filesystem's reported direct-I/O
  // alignment (statx STATX_DIOALIGN), at least 4096.
  std::size_t alignment() const { return alignment_; }

 private:
  std::filesystem::path path_;
  FilesystemInfo filesystem_;
  std::size_t alignment_ = 4096;
};

// Test hook: the `after_requests`-th I/O completion from now (1 = the next) reports -error_number
// instead of its result, as a failing device would (EIO cannot be produced on demand without
// device-mapper). 0 disarms.
void inject_swap_fault(int error_number, int after_requests);
// Returns the errno to report for this completion, or 0 (called once per completion).
int take_injected_swap_fault();

}  // namespace zero::detail
