// The swap folder of a rank: nvme_path checks, the O_DIRECT probe, and removal at exit.
#include "swap_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <system_error>

#include "zero/core/abort_hooks.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"
#include "zero/offload/nvme_swap_store.h"

namespace zero::detail {
namespace {

namespace fs = std::filesystem;

std::string errno_text(int error_number) {
  return std::string(std::strerror(error_number)) + " (errno " + std::to_string(error_number) + ")";
}

// /proc/self/mounts writes space, tab, newline and backslash in names as \040 etc.
std::string unescape_mount_field(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string octal = field.substr(i + 1, 3);
      if (octal.find_first_not_of("01234567") == std::string::npos) {
        out.push_back(static_cast<char>(std::stoi(octal, nullptr, 8)));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

// Live swap folders of this process: path -> number of stores using it.
struct Registry {
  std::mutex mutex;
  std::map<std::string, int> users;
  bool atexit_installed = false;
};

Registry& registry() {
  static auto* instance = new Registry();  // never destroyed: the atexit handler reads it
  return *instance;
}

void remove_swap_files(const fs::path& directory) {
  std::error_code error;
  fs::remove_all(directory, error);
}

void remove_live_directories_at_exit() { remove_swap_directories(); }

// Returns true when this is the first user of `directory` in this process.
bool register_user(const fs::path& directory) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  if (!reg.atexit_installed) {
    add_abort_hook(remove_swap_directories);  // abort_job() ends the process with std::_Exit
    std::atexit(remove_live_directories_at_exit);
    reg.atexit_installed = true;
  }
  return reg.users[directory.string()]++ == 0;
}

// Returns true when this was the last user.
bool unregister_user(const fs::path& directory) {
  Registry& reg = registry();
  std::lock_guard lock(reg.mutex);
  auto it = reg.users.find(directory.string());
  if (it == reg.users.end()) return false;
  if (--it->second > 0) return false;
  reg.users.erase(it);
  return true;
}

std::size_t direct_io_alignment(int fd) {
  std::size_t alignment = 4096;
#ifdef STATX_DIOALIGN
  struct statx info {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &info) == 0 &&
      (info.stx_mask & STATX_DIOALIGN) != 0) {
    alignment = std::max<std::size_t>(alignment, info.stx_dio_mem_align);
    alignment = std::max<std::size_t>(alignment, info.stx_dio_offset_align);
  }
#else
  (void)fd;
#endif
  return alignment;
}

std::string no_direct_io_message(const fs::path& nvme_path, const FilesystemInfo& filesystem,
                                 const std::string& what, int error_number) {
  return concat("nvme_path ", nvme_path, " is on a ", filesystem.type, " filesystem (mounted at ",
                filesystem.mount_point, ") without O_DIRECT support: ", what, " failed with ",
                errno_text(error_number),
                "; NVMe swap needs direct I/O: choose a folder on a local ext4/xfs/btrfs drive");
}

}  // namespace

FilesystemInfo filesystem_of(const fs::path& path) {
  std::error_code error;
  fs::path canonical = fs::weakly_canonical(path, error);
  if (error) canonical = fs::absolute(path);
  FilesystemInfo best{"unknown", "/"};
  std::size_t best_length = 0;
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  const std::string target = canonical.string();
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    if (!(fields >> device >> mount_point >> type)) continue;
    mount_point = unescape_mount_field(mount_point);
    const bool covers = mount_point == "/" || target == mount_point ||
                        (target.size() > mount_point.size() &&
                         target.compare(0, mount_point.size(), mount_point) == 0 &&
                         target[mount_point.size()] == '/');
    // Later lines are mounted over earlier ones at the same point: >= keeps the last.
    if (covers && mount_point.size() >= best_length) {
      best = FilesystemInfo{type, mount_point};
      best_length = mount_point.size();
    }
  }
  return best;
}

}  // namespace zero::detail

namespace zero {

void remove_swap_directories() noexcept {
  detail::Registry& reg = detail::registry();
  std::lock_guard lock(reg.mutex);
  for (const auto& [directory, users] : reg.users) detail::remove_swap_files(directory);
}

}  // namespace zero

namespace zero::detail {

SwapDirectory::SwapDirectory(const fs::path& nvme_path, int rank) {
  ZERO_CHECK(!nvme_path.empty(),
             "NVMe swap: nvme_path is empty; set zero_optimization.offload_*.nvme_path");
  ZERO_CHECK(rank >= 0, "NVMe swap: rank ", rank, " is negative");
  std::error_code error;
  const fs::file_status status = fs::status(nvme_path, error);
  if (!fs::exists(status)) {
    ZERO_THROW("NVMe swap: nvme_path ", nvme_path, " does not exist (create it, on a local NVMe ",
               "drive, before training)");
  }
  ZERO_CHECK(fs::is_directory(status), "NVMe swap: nvme_path ", nvme_path, " is not a directory");
  filesystem_ = filesystem_of(nvme_path);

  struct statvfs volume {};
  if (statvfs(nvme_path.c_str(), &volume) == 0 && (volume.f_flag & ST_RDONLY) != 0) {
    ZERO_THROW("NVMe swap: nvme_path ", nvme_path, " is on a read-only filesystem (",
               filesystem_.type, " mounted read-only at ", filesystem_.mount_point, ")");
  }
  if (access(nvme_path.c_str(), W_OK | X_OK) != 0) {
    const int saved = errno;
    ZERO_THROW("NVMe swap: nvme_path ", nvme_path, " is not writable by this process (uid ",
               getuid(), "): ", errno_text(saved));
  }

  path_ = nvme_path / concat("zero_swap_rank", rank, "_", getpid());
  const bool first = register_user(path_);
  try {
    if (first && fs::exists(path_, error)) {
      // A folder with our rank and pid that no live store of ours holds was left by a dead
      // process whose pid we now have (containers reuse pids): its files are stale.
      log_warning("NVMe swap: removing stale swap folder ", path_);
      remove_swap_files(path_);
    }
    if (mkdir(path_.c_str(), 0700) != 0 && errno != EEXIST) {
      const int saved = errno;
      ZERO_THROW("NVMe swap: cannot create the swap folder ", path_, ": ", errno_text(saved),
                 saved == EROFS ? " (read-only filesystem)" : "");
    }

    // Probe direct I/O with one aligned block, written and read back.
    const fs::path probe = path_ / concat("probe_", reinterpret_cast<std::uintptr_t>(this));
    const int fd = open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int saved = errno;
      if (saved == EINVAL) {
        ZERO_THROW("NVMe swap: ",
                   no_direct_io_message(nvme_path, filesystem_,
                                        concat("open(", probe, ", O_DIRECT)"), saved));
      }
      ZERO_THROW("NVMe swap: cannot create a file in the swap folder ", path_, ": ",
                 errno_text(saved));
    }
    alignment_ = direct_io_alignment(fd);
    void* block = nullptr;
    if (posix_memalign(&block, alignment_, alignment_) != 0) {
      close(fd);
      ZERO_THROW("NVMe swap: cannot allocate a ", alignment_, "-byte aligned probe buffer");
    }
    std::unique_ptr<void, decltype(&std::free)> owned(block, &std::free);
    std::memset(block, 0x5a, alignment_);
    const ssize_t written = pwrite(fd, block, alignment_, 0);
    const int write_errno = errno;
    const ssize_t read_back =
        written == static_cast<ssize_t>(alignment_) ? pread(fd, block, alignment_, 0) : -1;
    const int read_errno = errno;
    close(fd);
    unlink(probe.c_str());
    if (written != static_cast<ssize_t>(alignment_)) {
      if (written < 0 && write_errno == EINVAL) {
        ZERO_THROW("NVMe swap: ",
                   no_direct_io_message(nvme_path, filesystem_,
                                        concat("an O_DIRECT write to ", probe), write_errno));
      }
      ZERO_THROW("NVMe swap: probe write of ", alignment_, " bytes to ", probe, " failed: ",
                 written < 0 ? errno_text(write_errno) : concat("wrote ", written, " bytes"),
                 write_errno == ENOSPC ? " (filesystem full)" : "");
    }
    if (read_back != static_cast<ssize_t>(alignment_)) {
      if (read_back < 0 && read_errno == EINVAL) {
        ZERO_THROW("NVMe swap: ",
                   no_direct_io_message(nvme_path, filesystem_,
                                        concat("an O_DIRECT read from ", probe), read_errno));
      }
      ZERO_THROW("NVMe swap: probe read of ", alignment_, " bytes from ", probe, " failed: ",
                 read_back < 0 ? errno_text(read_errno) : concat("read ", read_back, " bytes"));
    }
  } catch (...) {
    if (unregister_user(path_)) remove_swap_files(path_);
    throw;
  }
}

SwapDirectory::~SwapDirectory() {
  if (unregister_user(path_)) remove_swap_files(path_);
}

namespace {
std::atomic<int> g_fault_errno{0};
std::atomic<int> g_fault_countdown{0};
}  // namespace

void inject_swap_fault(int error_number, int after_requests) {
  g_fault_errno = error_number;
  g_fault_countdown = error_number == 0 ? 0 : after_requests;
}

int take_injected_swap_fault() {
  if (g_fault_countdown.load(std::memory_order_relaxed) <= 0) return 0;
  if (g_fault_countdown.fetch_sub(1) == 1) return g_fault_errno.load();
  return 0;
}

}  // namespace zero::detail
