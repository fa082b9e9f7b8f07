// Test folders for the NVMe swap tests: on a filesystem with O_DIRECT (found by probing), removed
// at the end; aligned host buffers; helpers for private mounts (read-only, full, no O_DIRECT).
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zero::testing {

// Whether a file in `folder` can be opened and written with O_DIRECT.
inline bool supports_direct_io(const std::filesystem::path& folder) {
  const std::filesystem::path probe = folder / ("odirect_probe_" + std::to_string(getpid()));
  const int fd = open(probe.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  void* block = nullptr;
  bool ok = posix_memalign(&block, 4096, 4096) == 0;
  if (ok) {
    std::memset(block, 0, 4096);
    ok = pwrite(fd, block, 4096, 0) == 4096;
    std::free(block);
  }
  close(fd);
  unlink(probe.c_str());
  return ok;
}

// A fresh folder on a filesystem with O_DIRECT: under ZERO_SWAP_TEST_DIR when set, else the
// working directory (ctest runs in the build tree), /var/tmp or /tmp, the first that has it.
class SwapTestDir {
 public:
  SwapTestDir() {
    std::vector<std::filesystem::path> candidates;
    if (const char* chosen = std::getenv("ZERO_SWAP_TEST_DIR"); chosen != nullptr && *chosen)
      candidates.emplace_back(chosen);
    candidates.push_back(std::filesystem::current_path());
    candidates.emplace_back("/var/tmp");
    candidates.emplace_back("/tmp");
    for (const auto& candidate : candidates) {
      std::error_code error;
      if (!std::filesystem::is_directory(candidate, error)) continue;
      std::string pattern = (candidate / "zero_swap_test_XXXXXX").string();
      if (mkdtemp(pattern.data()) == nullptr) continue;
      path_ = pattern;
      if (supports_direct_io(path_)) return;
      tried_ += " " + candidate.string();
      std::filesystem::remove_all(path_, error);
      path_.clear();
    }
  }
  ~SwapTestDir() {
    if (path_.empty()) return;
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  SwapTestDir(const SwapTestDir&) = delete;
  SwapTestDir& operator=(const SwapTestDir&) = delete;

  // Empty when no candidate folder supports O_DIRECT (then why_not() says which were tried).
  const std::filesystem::path& path() const { return path_; }
  std::string why_not() const { return "no folder with O_DIRECT among:" + tried_; }

 private:
  std::filesystem::path path_;
  std::string tried_;
};

struct FreeDeleter {
  void operator()(void* pointer) const { std::free(pointer); }
};
using AlignedBuffer = std::unique_ptr<unsigned char[], FreeDeleter>;

inline AlignedBuffer make_aligned(std::size_t alignment, std::size_t bytes) {
  void* pointer = nullptr;
  if (posix_memalign(&pointer, alignment, bytes == 0 ? alignment : bytes) != 0) std::abort();
  return AlignedBuffer(static_cast<unsigned char*>(pointer));
}

// Moves this process (and the threads it starts later) into a private mount namespace, so the
// tests can mount a small tmpfs, a ramfs or a read-only bind without touching the machine's
// mounts; they vanish with the process. Root: unshare(CLONE_NEWNS); others: a user namespace
// too. Returns an empty string on success, else why it is not possible.
inline std::string enter_private_mount_namespace() {
  static std::optional<std::string> result;
  if (result) return *result;
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWNS) != 0) {
    const int first = errno;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
      result = std::string("cannot create a private mount namespace: unshare(CLONE_NEWNS): ") +
               std::strerror(first) + ", with CLONE_NEWUSER: " + std::strerror(errno);
      return *result;
    }
    std::ofstream("/proc/self/setgroups") << "deny";
    std::ofstream("/proc/self/uid_map") << "0 " << uid << " 1";
    std::ofstream("/proc/self/gid_map") << "0 " << gid << " 1";
  }
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    result =
        std::string("cannot make / private in the new mount namespace: ") + std::strerror(errno);
    return *result;
  }
  result = std::string();
  return *result;
}

// Mounts `type` (tmpfs, ramfs) with `options` at `target` (created) in the private namespace.
inline std::string mount_filesystem(const std::filesystem::path& target, const char* type,
                                    const char* options) {
  if (std::string why = enter_private_mount_namespace(); !why.empty()) return why;
  std::filesystem::create_directories(target);
  if (mount(type, target.c_str(), type, 0, options) != 0)
    return std::string("mount -t ") + type + " at " + target.string() + ": " + std::strerror(errno);
  return {};
}

// Makes `target` a read-only view of `source` (a bind mount, remounted read-only).
inline std::string mount_read_only(const std::filesystem::path& source,
                                   const std::filesystem::path& target) {
  if (std::string why = enter_private_mount_namespace(); !why.empty()) return why;
  std::filesystem::create_directories(source);
  std::filesystem::create_directories(target);
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return std::string("bind mount at ") + target.string() + ": " + std::strerror(errno);
  if (mount(nullptr, target.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0)
    return std::string("remount read-only at ") + target.string() + ": " + std::strerror(errno);
  return {};
}

}  // namespace zero::testing

// Skips the test (saying why) when no folder with O_DIRECT was found.
#define REQUIRE_DIRECT_IO_DIR(dir) \
  if ((dir).path().empty()) GTEST_SKIP() << (dir).why_not()
