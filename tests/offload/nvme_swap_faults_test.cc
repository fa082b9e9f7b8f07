// NVMe swap faults: each is a zero::Error naming the path; I/O errors are sticky; nothing hangs.
// Read-only, full and no-O_DIRECT filesystems are real mounts (a read-only bind, a 1 MiB tmpfs,
// a ramfs) in a private mount namespace of this process (root, or a user namespace); EIO is
// injected at the completion (detail::inject_swap_fault), as no device can be made to fail here.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "swap_directory.h"
#include "swap_test_dir.h"
#include "zero/core/error.h"
#include "zero/offload/nvme_swap_store.h"

namespace zero {
namespace {

namespace fs = std::filesystem;
using testing::AlignedBuffer;
using testing::make_aligned;
using testing::SwapTestDir;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

NvmeSwapOptions options_for(const fs::path& path) {
  NvmeSwapOptions options;
  options.nvme_path = path;
  options.aio.block_size = 64 * 1024;
  options.aio.queue_depth = 4;
  options.aio.intra_op_parallelism = 2;
  return options;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE((text).find(part), std::string::npos) << "expected \"" << (part) << "\" in: " << (text)

// The one .swap file of a store with one region.
fs::path only_swap_file(const SwapStore& store) {
  fs::path found;
  for (const auto& entry : fs::directory_iterator(store.directory()))
    if (entry.path().extension() == ".swap") found = entry.path();
  return found;
}

TEST(NvmeSwapFaults, MissingPath) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const fs::path missing = dir.path() / "no_such_folder";
  const std::string error = error_of([&] { make_nvme_swap_store(options_for(missing)); });
  EXPECT_HAS(error, missing.string());
  EXPECT_HAS(error, "does not exist");
  EXPECT_HAS(error_of([&] { make_nvme_swap_store(options_for("")); }), "nvme_path is empty");
}

TEST(NvmeSwapFaults, NotADirectory) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const fs::path file = dir.path() / "a_file";
  std::ofstream(file) << "x";
  const std::string error = error_of([&] { make_nvme_swap_store(options_for(file)); });
  EXPECT_HAS(error, file.string());
  EXPECT_HAS(error, "is not a directory");
}

TEST(NvmeSwapFaults, ReadOnlyDirectory) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const fs::path target = dir.path() / "read_only";
  if (geteuid() != 0) {
    // Permission bits stop a non-root process.
    fs::create_directories(target);
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string error = error_of([&] { make_nvme_swap_store(options_for(target)); });
    fs::permissions(target, fs::perms::owner_all);
    EXPECT_HAS(error, target.string());
    EXPECT_HAS(error, "not writable");
    return;
  }
  // Root ignores permission bits: a read-only bind mount.
  if (std::string why = testing::mount_read_only(dir.path() / "source", target); !why.empty())
    GTEST_SKIP() << "read-only case needs a mount: " << why;
  const std::string error = error_of([&] { make_nvme_swap_store(options_for(target)); });
  umount2(target.c_str(), MNT_DETACH);
  EXPECT_HAS(error, target.string());
  EXPECT_HAS(error, "read-only filesystem");
}

TEST(NvmeSwapFaults, FilesystemWithoutDirectIo) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const fs::path target = dir.path() / "ramfs";
  fs::path folder = target;
  if (std::string why = testing::mount_filesystem(target, "ramfs", "mode=0700"); !why.empty()) {
    // Without mounts: /dev/shm where its tmpfs lacks O_DIRECT (Linux < 6.6).
    if (fs::is_directory("/dev/shm") && !testing::supports_direct_io("/dev/shm")) {
      folder = "/dev/shm";
    } else {
      GTEST_SKIP() << "no filesystem without O_DIRECT at hand: " << why
                   << "; /dev/shm supports O_DIRECT on this kernel";
    }
  }
  const std::string error = error_of([&] { make_nvme_swap_store(options_for(folder)); });
  if (folder == target) umount2(target.c_str(), MNT_DETACH);
  EXPECT_HAS(error, folder.string());
  EXPECT_HAS(error, folder == target ? "on a ramfs filesystem" : "on a tmpfs filesystem");
  EXPECT_HAS(error, "without O_DIRECT support");
  // Nothing is left behind on it.
  if (folder != target) {
    EXPECT_FALSE(fs::exists(folder / ("zero_swap_rank0_" + std::to_string(getpid()))));
  }
}

TEST(NvmeSwapFaults, FullFilesystemFailsAtAddRegionAndSticks) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const fs::path target = dir.path() / "small";
  if (std::string why = testing::mount_filesystem(target, "tmpfs", "size=1m,mode=0700");
      !why.empty())
    GTEST_SKIP() << "full-filesystem case needs a small tmpfs mount: " << why;
  if (!testing::supports_direct_io(target)) {
    umount2(target.c_str(), MNT_DETACH);
    GTEST_SKIP() << "tmpfs has no O_DIRECT on this kernel (Linux < 6.6): no small filesystem "
                    "with O_DIRECT at hand";
  }
  std::string first, later;
  {
    auto store = make_nvme_swap_store(options_for(target));
    const int fits = store->add_region("fits", 256 * 1024, MemoryCategory::kOptimizerState);
    first = error_of([&] {
      store->add_region("optimizer_state tile 1", 4 << 20, MemoryCategory::kOptimizerState);
    });
    AlignedBuffer buffer = make_aligned(store->io_alignment(), store->padded_bytes(fits));
    later = error_of([&] { store->write(fits, buffer.get()); });
  }
  umount2(target.c_str(), MNT_DETACH);
  EXPECT_HAS(first, target.string());
  EXPECT_HAS(first, "optimizer_state tile 1");
  EXPECT_HAS(first, "filesystem full");
  EXPECT_EQ(later, first) << "errors are sticky";
}

class NvmeSwapInUse : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dir_.path().empty()) GTEST_SKIP() << dir_.why_not();
    store_ = make_nvme_swap_store(options_for(dir_.path()));
    region_ = store_->add_region("param_shard unit 4", 1'000'003, MemoryCategory::kParamShard);
    buffer_ = make_aligned(store_->io_alignment(), store_->padded_bytes(region_));
    std::memset(buffer_.get(), 0x3c, store_->padded_bytes(region_));
    store_->wait(store_->write(region_, buffer_.get()));
    file_ = only_swap_file(*store_);
    ASSERT_FALSE(file_.empty());
  }
  void TearDown() override { detail::inject_swap_fault(0, 0); }

  // Every later call throws the first error.
  void expect_sticky(const std::string& first) {
    EXPECT_EQ(error_of([&] { store_->read(region_, buffer_.get()); }), first);
    EXPECT_EQ(error_of([&] { store_->write(region_, buffer_.get()); }), first);
    EXPECT_EQ(error_of([&] { store_->wait_all(); }), first);
    EXPECT_EQ(error_of([&] { store_->add_region("x", 10, MemoryCategory::kWorkspace); }), first);
  }

  SwapTestDir dir_;
  std::unique_ptr<SwapStore> store_;
  int region_ = -1;
  AlignedBuffer buffer_;
  fs::path file_;
};

TEST_F(NvmeSwapInUse, TruncatedFileIsAShortRead) {
  ASSERT_EQ(truncate(file_.c_str(), 4096), 0);
  const std::string error = error_of([&] { store_->wait(store_->read(region_, buffer_.get())); });
  EXPECT_HAS(error, file_.string());
  EXPECT_HAS(error, "param_shard unit 4");
  EXPECT_HAS(error, "short read");
  EXPECT_HAS(error, "the file is now 4096 bytes");
  expect_sticky(error);
}

TEST_F(NvmeSwapInUse, DeletedFileIsDetected) {
  ASSERT_TRUE(fs::remove(file_));
  const std::string error = error_of([&] { store_->wait(store_->read(region_, buffer_.get())); });
  EXPECT_HAS(error, file_.string());
  EXPECT_HAS(error, "deleted while in use");
  expect_sticky(error);
}

TEST_F(NvmeSwapInUse, DeletedFolderIsDetectedOnWrite) {
  fs::remove_all(store_->directory());
  const std::string error = error_of([&] { store_->wait(store_->write(region_, buffer_.get())); });
  EXPECT_HAS(error, file_.string());
  EXPECT_HAS(error, "deleted while in use");
}

TEST_F(NvmeSwapInUse, DeviceErrorIsStickyAndNothingHangs) {
  // The 3rd request completion from now reports EIO; the transfer has 16 requests on 2 rings.
  detail::inject_swap_fault(EIO, 3);
  const SwapTicket write = store_->write(region_, buffer_.get());
  const std::string error = error_of([&] { store_->wait(write); });
  EXPECT_HAS(error, file_.string());
  EXPECT_HAS(error, "write failed: Input/output error");
  EXPECT_HAS(error, "param_shard unit 4");
  expect_sticky(error);
  EXPECT_EQ(error_of([&] { store_->wait(write); }), error);
}

TEST_F(NvmeSwapInUse, DiskFullDuringWriteNamesIt) {
  detail::inject_swap_fault(ENOSPC, 1);
  const std::string error = error_of([&] { store_->wait(store_->write(region_, buffer_.get())); });
  EXPECT_HAS(error, file_.string());
  EXPECT_HAS(error, "filesystem full");
}

// A transfer slower than ZERO_SWAP_TIMEOUT_S: wait() throws naming the region instead of
// waiting on, and the store's destruction still returns (the rings cancel what is in flight).
TEST(NvmeSwapFaults, WaitIsBoundedByTheTimeout) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  setenv("ZERO_SWAP_TIMEOUT_S", "0.001", 1);
  NvmeSwapOptions options = options_for(dir.path());
  options.aio.block_size = 4096;
  options.aio.queue_depth = 1;  // 2048 requests one after another: far more than 1 ms
  options.aio.intra_op_parallelism = 1;
  std::unique_ptr<SwapStore> store;
  const std::string made = error_of([&] { store = make_nvme_swap_store(options); });
  unsetenv("ZERO_SWAP_TIMEOUT_S");
  ASSERT_EQ(made, "(no error)");
  const int region =
      store->add_region("optimizer_state tile 9", 8 << 20, MemoryCategory::kOptimizerState);
  AlignedBuffer buffer = make_aligned(store->io_alignment(), store->padded_bytes(region));
  std::memset(buffer.get(), 1, store->padded_bytes(region));
  const std::string error = error_of([&] { store->wait(store->write(region, buffer.get())); });
  EXPECT_HAS(error, "did not complete within 0.001 s (ZERO_SWAP_TIMEOUT_S)");
  EXPECT_HAS(error, "optimizer_state tile 9");
  EXPECT_EQ(error_of([&] { store->wait_all(); }), error);
  store.reset();  // returns; the buffer outlives it
}

}  // namespace
}  // namespace zero
