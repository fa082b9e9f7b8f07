// The NVMe SwapStore: round trips of odd sizes under every aio setting, many regions from many
// threads at once, the ledger, the folder's lifetime, and misuse errors.
#include "zero/offload/nvme_swap_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "swap_test_dir.h"
#include "zero/comm/communicator.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"

namespace zero {
namespace {

namespace fs = std::filesystem;
using testing::AlignedBuffer;
using testing::make_aligned;
using testing::SwapTestDir;

void fill_random(unsigned char* data, std::size_t bytes, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>(generator());
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

NvmeSwapOptions options_for(const fs::path& path, AioSettings aio = {}) {
  NvmeSwapOptions options;
  options.nvme_path = path;
  options.aio = aio;
  return options;
}

// Writes each size's random bytes, scribbles over the host buffers, reads them back and compares.
void round_trip(SwapStore& store, const std::vector<std::size_t>& sizes, std::uint64_t seed) {
  const std::size_t alignment = store.io_alignment();
  std::vector<int> regions;
  std::vector<AlignedBuffer> sources, destinations;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    regions.push_back(
        store.add_region("tile " + std::to_string(i), sizes[i], MemoryCategory::kOptimizerState));
    const std::size_t padded = store.padded_bytes(regions.back());
    EXPECT_EQ(padded % alignment, 0u);
    EXPECT_GE(padded, sizes[i]);
    EXPECT_LT(padded, sizes[i] + alignment);
    sources.push_back(make_aligned(alignment, padded));
    destinations.push_back(make_aligned(alignment, padded));
    fill_random(sources.back().get(), padded, seed + i);
  }
  std::vector<SwapTicket> tickets;
  for (std::size_t i = 0; i < sizes.size(); ++i)
    tickets.push_back(store.write(regions[i], sources[i].get()));
  for (auto ticket : tickets) store.wait(ticket);
  tickets.clear();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::memset(destinations[i].get(), 0xee, store.padded_bytes(regions[i]));
    tickets.push_back(store.read(regions[i], destinations[i].get()));
  }
  // Out of order, and the last ones through wait_all.
  for (std::size_t i = tickets.size() / 2; i-- > 0;) store.wait(tickets[i]);
  store.wait_all();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_EQ(std::memcmp(sources[i].get(), destinations[i].get(), sizes[i]), 0)
        << "region " << i << " of " << sizes[i] << " bytes";
  }
  for (auto ticket : tickets) store.wait(ticket);  // already waited: returns
}

TEST(NvmeSwapStore, RoundTripsOddSizesAndRecordsTheLedger) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  MemoryLedger ledger;
  fs::path folder;
  {
    NvmeSwapOptions options = options_for(dir.path());
    options.rank = 3;
    options.ledger = &ledger;
    options.aio.block_size = 64 * 1024;
    options.aio.queue_depth = 4;
    options.aio.intra_op_parallelism = 2;
    auto store = make_nvme_swap_store(options);
    folder = store->directory();
    EXPECT_EQ(folder.parent_path(), dir.path());
    EXPECT_EQ(folder.filename().string(), "zero_swap_rank3_" + std::to_string(getpid()));
    EXPECT_GE(store->io_alignment(), 4096u);
    EXPECT_EQ(store->io_alignment() & (store->io_alignment() - 1), 0u);

    const std::vector<std::size_t> sizes = {
        1, 22, 1023, 4097, 65536 + 3, 1'000'003, 3 * 1048576 + 17};
    round_trip(*store, sizes, 42);
    std::size_t total = 0;
    for (auto size : sizes) total += size;
    EXPECT_EQ(ledger.entry(MemorySpace::kNvme, MemoryCategory::kOptimizerState).current_bytes,
              static_cast<std::int64_t>(total));
    // The file space is reserved: one file per region of its padded size.
    std::size_t files = 0;
    for (const auto& entry : fs::directory_iterator(folder)) {
      ++files;
      EXPECT_EQ(entry.path().extension(), ".swap");
      EXPECT_EQ(entry.file_size() % store->io_alignment(), 0u);
    }
    EXPECT_EQ(files, sizes.size());
    // An empty region is allowed and moves nothing.
    const int empty = store->add_region("empty", 0, MemoryCategory::kParamShard);
    EXPECT_EQ(store->padded_bytes(empty), 0u);
    store->wait(store->write(empty, nullptr));
  }
  EXPECT_FALSE(fs::exists(folder)) << folder << " should be removed with the store";
  EXPECT_EQ(ledger.space_total(MemorySpace::kNvme).current_bytes, 0);
  EXPECT_GT(ledger.space_total(MemorySpace::kNvme).peak_bytes, 0);
}

// traffic(): the padded bytes of each finished transfer per direction, and the busy time of each
// direction (two writes in flight together count their common time once).
TEST(NvmeSwapStore, CountsTrafficPerDirection) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  auto store = make_nvme_swap_store(options_for(dir.path()));
  EXPECT_EQ(store->traffic().bytes_read + store->traffic().bytes_written, 0);
  const std::size_t size = 3 * 1048576 + 17;
  const int first = store->add_region("first", size, MemoryCategory::kGradShard);
  const int second = store->add_region("second", size, MemoryCategory::kGradShard);
  const std::size_t padded = store->padded_bytes(first);
  AlignedBuffer a = make_aligned(store->io_alignment(), padded);
  AlignedBuffer b = make_aligned(store->io_alignment(), padded);
  fill_random(a.get(), padded, 1);
  fill_random(b.get(), padded, 2);
  const auto before_writes = std::chrono::steady_clock::now();
  const SwapTicket w1 = store->write(first, a.get());
  const SwapTicket w2 = store->write(second, b.get());
  store->wait(w1);
  store->wait(w2);
  const double write_wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before_writes).count();
  SwapTraffic traffic = store->traffic();
  EXPECT_EQ(traffic.bytes_written, static_cast<std::int64_t>(2 * padded));
  EXPECT_EQ(traffic.bytes_read, 0);
  EXPECT_GT(traffic.write_seconds, 0.0);
  EXPECT_LE(traffic.write_seconds, write_wall);  // the overlap counted once
  EXPECT_EQ(traffic.read_seconds, 0.0);
  store->wait(store->read(first, b.get()));
  const SwapTraffic after = store->traffic();
  const SwapTraffic read = after - traffic;
  EXPECT_EQ(read.bytes_read, static_cast<std::int64_t>(padded));
  EXPECT_EQ(read.bytes_written, 0);
  EXPECT_GT(read.read_seconds, 0.0);
  EXPECT_GT(read.read_gb_per_s(), 0.0);
  EXPECT_EQ(read.write_gb_per_s(), 0.0);
}

// read_range(): whole blocks of a region land at the buffer's start, split over the rings as a
// whole region's are; only they are read and counted; a range not of whole blocks inside the
// padded region is refused naming the region, and the store still works after.
TEST(NvmeSwapStore, ReadsAnAlignedRangeOfARegion) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  AioSettings aio;
  aio.block_size = 4096;
  aio.intra_op_parallelism = 3;
  auto store = make_nvme_swap_store(options_for(dir.path(), aio));
  const std::size_t a = store->io_alignment();
  if (static_cast<std::size_t>(aio.block_size) % a != 0) GTEST_SKIP() << "alignment " << a;
  const int region =
      store->add_region("optimizer_state tile 2", 9 * a + 123, MemoryCategory::kOptimizerState);
  const std::size_t padded = store->padded_bytes(region);
  AlignedBuffer source = make_aligned(a, padded);
  fill_random(source.get(), padded, 11);
  store->wait(store->write(region, source.get()));
  const SwapTraffic before = store->traffic();
  AlignedBuffer part = make_aligned(a, padded);
  std::memset(part.get(), 0xee, padded);
  store->wait(store->read_range(region, 2 * a, 5 * a, part.get()));
  EXPECT_EQ(std::memcmp(part.get(), source.get() + 2 * a, 5 * a), 0);
  EXPECT_EQ(part.get()[5 * a], 0xee) << "read past the range";
  store->wait(store->read_range(region, 8 * a, 2 * a, part.get()));  // to the padded end
  EXPECT_EQ(std::memcmp(part.get(), source.get() + 8 * a, a + 123), 0);
  store->wait(store->read_range(region, padded, 0, part.get()));  // empty: nothing moves
  EXPECT_EQ((store->traffic() - before).bytes_read, static_cast<std::int64_t>(7 * a));
  for (const auto& [offset, bytes] : {std::pair{a + 8, a}, {a, a - 8}, {8 * a, 3 * a}}) {
    const std::string error =
        error_of([&] { store->read_range(region, offset, bytes, part.get()); });
    EXPECT_NE(error.find("of region \"optimizer_state tile 2\""), std::string::npos) << error;
    EXPECT_NE(error.find("not whole"), std::string::npos) << error;
  }
  EXPECT_NE(error_of([&] { store->read_range(4, 0, a, part.get()); }).find("no such region"),
            std::string::npos);
  store->wait(store->read(region, part.get()));  // not sticky: the store still works
  EXPECT_EQ(std::memcmp(part.get(), source.get(), padded), 0);
}

struct AioCase {
  std::int64_t block_size;
  std::int64_t queue_depth;
  std::int64_t threads;
  bool single_submit;
  bool overlap_events;
};

class NvmeSwapAio : public ::testing::TestWithParam<AioCase> {};

TEST_P(NvmeSwapAio, RoundTripsUnderEverySetting) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  const AioCase& c = GetParam();
  AioSettings aio;
  aio.block_size = c.block_size;
  aio.queue_depth = c.queue_depth;
  aio.intra_op_parallelism = c.threads;
  aio.single_submit = c.single_submit;
  aio.overlap_events = c.overlap_events;
  auto store = make_nvme_swap_store(options_for(dir.path(), aio));
  std::mt19937 generator(static_cast<unsigned>(c.block_size + c.queue_depth * 7 + c.threads));
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 6; ++i) sizes.push_back(1 + generator() % (700 * 1024));
  round_trip(*store, sizes, 7);
}

INSTANTIATE_TEST_SUITE_P(
    Settings, NvmeSwapAio,
    ::testing::Values(AioCase{4096, 1, 1, false, true}, AioCase{4096, 8, 3, true, true},
                      AioCase{65536, 2, 1, false, false}, AioCase{65536, 8, 4, true, false},
                      AioCase{1048576, 8, 1, false, true}, AioCase{1048576, 32, 2, false, true}));

TEST(NvmeSwapStore, ManyThreadsManyRegionsConcurrently) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  AioSettings aio;
  aio.block_size = 32 * 1024;
  aio.queue_depth = 8;
  aio.intra_op_parallelism = 3;
  auto store = make_nvme_swap_store(options_for(dir.path(), aio));
  constexpr int kThreads = 8;
  constexpr int kRegionsPerThread = 4;
  constexpr int kRounds = 12;
  const std::size_t alignment = store->io_alignment();
  std::atomic<int> mismatches{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::mt19937_64 generator(1000 + t);
        std::vector<int> regions;
        std::vector<std::size_t> sizes;
        std::vector<AlignedBuffer> sources, destinations;
        for (int r = 0; r < kRegionsPerThread; ++r) {
          sizes.push_back(1 + generator() % (300 * 1024));
          regions.push_back(
              store->add_region("thread " + std::to_string(t) + " region " + std::to_string(r),
                                sizes.back(), MemoryCategory::kParamShard));
          sources.push_back(make_aligned(alignment, store->padded_bytes(regions.back())));
          destinations.push_back(make_aligned(alignment, store->padded_bytes(regions.back())));
        }
        for (int round = 0; round < kRounds; ++round) {
          std::vector<SwapTicket> tickets;
          for (int r = 0; r < kRegionsPerThread; ++r) {
            fill_random(sources[r].get(), sizes[r], generator());
            tickets.push_back(store->write(regions[r], sources[r].get()));
          }
          for (auto ticket : tickets) store->wait(ticket);
          tickets.clear();
          for (int r = 0; r < kRegionsPerThread; ++r)
            tickets.push_back(store->read(regions[r], destinations[r].get()));
          for (int r = kRegionsPerThread; r-- > 0;) store->wait(tickets[r]);
          for (int r = 0; r < kRegionsPerThread; ++r)
            if (std::memcmp(sources[r].get(), destinations[r].get(), sizes[r]) != 0) ++mismatches;
        }
      } catch (const std::exception& error) {
        failures[t] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(mismatches.load(), 0);
}

// Several threads waiting on one ticket while another waits for everything: each returns once.
TEST(NvmeSwapStore, OneTicketWaitedByManyThreads) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  AioSettings aio;
  aio.block_size = 4096;
  aio.queue_depth = 2;
  auto store = make_nvme_swap_store(options_for(dir.path(), aio));
  const int region = store->add_region("shared", 256 * 1024, MemoryCategory::kWorkspace);
  AlignedBuffer buffer = make_aligned(store->io_alignment(), store->padded_bytes(region));
  fill_random(buffer.get(), store->padded_bytes(region), 5);
  for (int round = 0; round < 20; ++round) {
    const SwapTicket ticket = store->write(region, buffer.get());
    std::vector<std::string> failures(4);
    std::vector<std::thread> waiters;
    for (int t = 0; t < 4; ++t) {
      waiters.emplace_back([&, t] {
        failures[t] = error_of([&] {
          if (t == 3) {
            store->wait_all();
          } else {
            store->wait(ticket);
          }
        });
      });
    }
    for (auto& waiter : waiters) waiter.join();
    for (const auto& failure : failures) ASSERT_EQ(failure, "(no error)");
  }
}

TEST(NvmeSwapStore, MisuseIsAClearErrorAndNotSticky) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  AioSettings aio;
  aio.block_size = 4096;
  aio.queue_depth = 1;
  auto store = make_nvme_swap_store(options_for(dir.path(), aio));
  const std::size_t alignment = store->io_alignment();
  const int region = store->add_region("optimizer_state tile 0", 3 * alignment + 5,
                                       MemoryCategory::kOptimizerState);
  AlignedBuffer buffer = make_aligned(alignment, store->padded_bytes(region) + alignment);
  EXPECT_NE(error_of([&] { store->write(7, buffer.get()); }).find("region 7: no such region"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store->write(region, buffer.get() + 1); }).find("is not aligned"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store->read(region, nullptr); }).find("null host buffer"),
            std::string::npos);
  EXPECT_NE(error_of([&] { store->wait(SwapTicket{999}); }).find("never issued"),
            std::string::npos);
  // A second transfer of a region being written is refused (queue depth 1 and 4 requests: the
  // first write is still in flight or just done; wait, then it is accepted).
  const SwapTicket first = store->write(region, buffer.get());
  const std::string busy = error_of([&] { store->write(region, buffer.get()); });
  store->wait(first);
  if (busy != "(no error)") {
    EXPECT_NE(busy.find("optimizer_state tile 0\" while a transfer of it is in flight"),
              std::string::npos)
        << busy;
  }
  store->wait(store->read(region, buffer.get()));  // the store still works

  AioSettings odd;
  odd.block_size = 1000;
  EXPECT_NE(error_of([&] {
              make_nvme_swap_store(options_for(dir.path(), odd));
            }).find("aio.block_size 1000 must be a positive multiple of the direct-I/O alignment"),
            std::string::npos);
  AioSettings no_depth;
  no_depth.queue_depth = 0;
  EXPECT_NE(error_of([&] {
              make_nvme_swap_store(options_for(dir.path(), no_depth));
            }).find("aio.queue_depth 0"),
            std::string::npos);
}

TEST(NvmeSwapStore, TwoStoresShareTheRankFolder) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  auto optimizer = make_nvme_swap_store(options_for(dir.path()));
  fs::path folder = optimizer->directory();
  {
    auto params = make_nvme_swap_store(options_for(dir.path()));
    EXPECT_EQ(params->directory(), folder);
    round_trip(*params, {5000}, 1);
    round_trip(*optimizer, {7000}, 2);
  }
  EXPECT_TRUE(fs::exists(folder));
  round_trip(*optimizer, {9000}, 3);
  optimizer.reset();
  EXPECT_FALSE(fs::exists(folder));
}

// A process that ends without destroying its store leaves no swap folder behind: exit() runs an
// atexit handler; a process ending through std::_Exit calls remove_swap_directories() first, and
// abort_job() does so through the abort hook the first store registered (zero/core/abort_hooks.h).
enum class ChildExit { kExit, kQuickExit, kAbortJob };

int run_child_that_leaks_a_store(const fs::path& nvme_path, ChildExit how, pid_t& child) {
  child = fork();
  if (child == 0) {
    try {
      auto* leaked = make_nvme_swap_store(options_for(nvme_path)).release();
      leaked->add_region("leaked", 100000, MemoryCategory::kWorkspace);
      const int code = fs::exists(leaked->directory()) ? 3 : 4;
      switch (how) {
        case ChildExit::kExit: std::exit(code);
        case ChildExit::kQuickExit: remove_swap_directories(); std::_Exit(code);
        case ChildExit::kAbortJob: abort_job(code);
      }
    } catch (...) {
      std::_Exit(5);
    }
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(NvmeSwapStore, FolderIsRemovedWhenTheProcessExitsWithoutDestroyingTheStore) {
  SwapTestDir dir;
  REQUIRE_DIRECT_IO_DIR(dir);
  for (const ChildExit how : {ChildExit::kExit, ChildExit::kQuickExit, ChildExit::kAbortJob}) {
    pid_t child = 0;
    EXPECT_EQ(run_child_that_leaks_a_store(dir.path(), how, child), 3);
    EXPECT_FALSE(fs::exists(dir.path() / ("zero_swap_rank0_" + std::to_string(child))))
        << (how == ChildExit::kExit        ? "exit()"
            : how == ChildExit::kQuickExit ? "_Exit after remove_swap_directories()"
                                           : "abort_job()");
  }
}

}  // namespace
}  // namespace zero
