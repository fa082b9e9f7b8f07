// The NVMe SwapStore: one file per region, read and written with aligned O_DIRECT requests through
// liburing rings, one ring and thread per intra_op_parallelism.
//
// How the DeepSpeed "aio" section maps:
// - block_size: the request size. A transfer of a region (its padded size) is split into
//   block_size requests (the last one shorter); must be a multiple of io_alignment().
// - queue_depth: each ring's depth: at most queue_depth requests in flight per ring.
// - intra_op_parallelism (thread_count): the number of rings, each with its own thread. A transfer
//   is split into that many contiguous runs of blocks, one per ring, as DeepSpeed splits a tensor
//   over its I/O threads; concurrent transfers share the rings.
// - single_submit: true submits each request with its own io_uring_submit call; false prepares up
//   to queue_depth requests and submits them with one call, which also waits for the first
//   completion (io_uring_submit_and_wait_timeout: one io_uring_enter).
// - overlap_events: true refills a ring as soon as any request completes (submission overlaps
//   completion); false submits a batch, waits for all of it, then submits the next.
// - use_gds: GPUDirect Storage is not supported (no GPU path): ignored with a warning.
#include "zero/offload/nvme_swap_store.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ring_worker.h"
#include "swap_directory.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero {
namespace {

namespace fs = std::filesystem;
using detail::concat;
using detail::errno_text;
using detail::Part;
using detail::Region;
using detail::RingOwner;
using detail::RingWorker;
using detail::Transfer;

// ZERO_SWAP_TIMEOUT_S (default 600): the longest wait() or wait_all() waits for a transfer before
// it throws (a device that stops answering must not hang training).
std::chrono::milliseconds timeout_from_environment() {
  if (const char* text = std::getenv("ZERO_SWAP_TIMEOUT_S"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    ZERO_CHECK(end != text && *end == '\0' && seconds > 0, "ZERO_SWAP_TIMEOUT_S=\"", text,
               "\" is not a positive number of seconds");
    return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
  }
  return std::chrono::seconds(600);
}

std::atomic<int> g_store_counter{0};

class NvmeSwapStore final : public SwapStore, public RingOwner {
 public:
  explicit NvmeSwapStore(const NvmeSwapOptions& options);
  ~NvmeSwapStore() override;

  int add_region(std::string label, std::size_t bytes, MemoryCategory category) override;
  SwapTicket write(int region, const void* source) override;
  SwapTicket read(int region, void* destination) override;
  SwapTicket read_range(int region, std::size_t offset, std::size_t bytes,
                        void* destination) override;
  void wait(SwapTicket ticket) override;
  void wait_all() override;
  std::size_t io_alignment() const override { return directory_.alignment(); }
  std::size_t padded_bytes(int region) const override;
  const fs::path& directory() const override { return directory_.path(); }
  SwapTraffic traffic() const override;

  // RingOwner: called by the workers.
  bool failed() const override { return failed_.load(std::memory_order_acquire); }
  void fail(const std::string& message) override;
  void finish_part(Part& part) override;
  std::string describe(const Part& part, std::size_t offset, std::size_t length) const override;

 private:
  // A transfer of `bytes` bytes of the region from `begin` (nullopt: the whole padded region).
  SwapTicket start(int region, char* buffer, bool is_write, std::size_t begin = 0,
                   std::optional<std::size_t> bytes = std::nullopt);
  Region& region_locked(int region, const char* operation) const;
  [[noreturn]] void rethrow_locked() const;
  void check_file_locked(const Region& region, bool is_write);

  NvmeSwapOptions options_;
  detail::SwapDirectory directory_;
  int store_index_;
  std::chrono::milliseconds timeout_;

  mutable std::mutex mutex_;
  std::condition_variable done_;
  std::vector<std::unique_ptr<Region>> regions_;
  std::map<std::uint64_t, Transfer> transfers_;
  std::uint64_t next_ticket_ = 1;
  std::atomic<bool> failed_{false};
  std::string error_;  // the first failure, rethrown by every later call

  // Traffic per direction (0 read, 1 write): transfers in flight, since when the direction has
  // been busy, and the bytes and busy seconds of the finished transfers.
  void begin_traffic_locked(bool is_write);
  void end_traffic_locked(const Transfer& transfer);
  int in_flight_[2] = {0, 0};
  std::chrono::steady_clock::time_point busy_since_[2];
  SwapTraffic traffic_;

  std::vector<std::unique_ptr<RingWorker>> workers_;
};

// ---- NvmeSwapStore ----

NvmeSwapStore::NvmeSwapStore(const NvmeSwapOptions& options)
    : options_(options),
      directory_(options.nvme_path, options.rank),
      store_index_(g_store_counter.fetch_add(1)),
      timeout_(timeout_from_environment()) {
  const AioSettings& aio = options.aio;
  const std::size_t alignment = directory_.alignment();
  ZERO_CHECK(aio.block_size > 0 && aio.block_size <= (std::int64_t{1} << 30) &&
                 static_cast<std::size_t>(aio.block_size) % alignment == 0,
             "NVMe swap: aio.block_size ", aio.block_size,
             " must be a positive multiple of the direct-I/O alignment ", alignment, " of ",
             directory_.path(), " and at most 1 GiB");
  ZERO_CHECK(aio.queue_depth >= 1 && aio.queue_depth <= 4096, "NVMe swap: aio.queue_depth ",
             aio.queue_depth, " must be in [1, 4096]");
  ZERO_CHECK(aio.intra_op_parallelism >= 1 && aio.intra_op_parallelism <= 256,
             "NVMe swap: aio.intra_op_parallelism ", aio.intra_op_parallelism,
             " must be in [1, 256]");
  if (aio.use_gds)
    log_warning("NVMe swap: aio.use_gds (GPUDirect Storage) is not supported; ignored");
  for (std::int64_t i = 0; i < aio.intra_op_parallelism; ++i) {
    workers_.push_back(std::make_unique<RingWorker>(*this, static_cast<int>(i), aio));
  }
  log_debug("NVMe swap: ", directory_.path(), " on ", directory_.filesystem().type, ", alignment ",
            alignment, ", block_size ", aio.block_size, ", queue_depth ", aio.queue_depth,
            ", rings ", aio.intra_op_parallelism);
}

NvmeSwapStore::~NvmeSwapStore() {
  {
    // Every transfer must be done before its buffer and file go away; bounded by the timeout.
    std::unique_lock lock(mutex_);
    const bool all_done = done_.wait_for(lock, timeout_, [&] {
      return std::all_of(transfers_.begin(), transfers_.end(),
                         [](const auto& entry) { return entry.second.done; });
    });
    if (!all_done && !failed_) {
      error_ = "destroyed with transfers in flight past ZERO_SWAP_TIMEOUT_S";
      failed_.store(true, std::memory_order_release);  // the rings submit nothing more
    }
  }
  for (auto& worker : workers_) worker->stop();
  workers_.clear();
  for (auto& region : regions_) {
    if (region->fd >= 0) close(region->fd);
    std::error_code ignored;
    fs::remove(region->path, ignored);
    if (options_.ledger != nullptr) {
      try {
        options_.ledger->record_free(MemorySpace::kNvme, region->category, region->bytes);
      } catch (...) {  // destructors never throw
      }
    }
  }
}

void NvmeSwapStore::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (!failed_) {
      error_ = concat("NVMe swap (", directory_.path().string(), "): ", message);
      failed_.store(true, std::memory_order_release);
    }
  }
  done_.notify_all();
}

void NvmeSwapStore::rethrow_locked() const { throw Error(error_); }

std::string NvmeSwapStore::describe(const Part& part, std::size_t offset,
                                    std::size_t length) const {
  const Region& region = *part.transfer->region;
  return concat("region \"", region.label, "\" (", region.bytes, " bytes), file ",
                region.path.string(), ", bytes [", offset, ", ", offset + length, ")");
}

// Checks, once a transfer is done, that the file is still there and whole: a file removed while
// in use still reads and writes through the open descriptor, so only its link count tells.
void NvmeSwapStore::check_file_locked(const Region& region, bool is_write) {
  if (failed_) return;
  struct stat info {};
  std::string problem;
  if (fstat(region.fd, &info) != 0) {
    problem = concat("fstat failed: ", errno_text(errno));
  } else if (info.st_nlink == 0) {
    problem = "the swap file was deleted while in use";
  } else if (static_cast<std::size_t>(info.st_size) < region.padded_bytes) {
    problem = concat("the swap file was truncated while in use (", info.st_size,
                     " bytes, expected ", region.padded_bytes, ")");
  }
  if (problem.empty()) return;
  error_ = concat("NVMe swap (", directory_.path().string(), "): ", problem, "; ",
                  is_write ? "write" : "read", " of region \"", region.label, "\", file ",
                  region.path.string());
  failed_.store(true, std::memory_order_release);
}

void NvmeSwapStore::finish_part(Part& part) {
  {
    std::lock_guard lock(mutex_);
    Transfer& transfer = *part.transfer;
    if (--transfer.parts_left == 0) {
      check_file_locked(*transfer.region, transfer.is_write);
      (transfer.is_write ? transfer.region->writes_in_flight : transfer.region->reads_in_flight)--;
      end_traffic_locked(transfer);
      transfer.done = true;
    }
  }
  done_.notify_all();
}

void NvmeSwapStore::begin_traffic_locked(bool is_write) {
  if (in_flight_[is_write]++ == 0) busy_since_[is_write] = std::chrono::steady_clock::now();
}

void NvmeSwapStore::end_traffic_locked(const Transfer& transfer) {
  const bool is_write = transfer.is_write;
  const auto bytes = static_cast<std::int64_t>(transfer.end - transfer.begin);
  (is_write ? traffic_.bytes_written : traffic_.bytes_read) += bytes;
  if (--in_flight_[is_write] > 0) return;
  const std::chrono::duration<double> busy =
      std::chrono::steady_clock::now() - busy_since_[is_write];
  (is_write ? traffic_.write_seconds : traffic_.read_seconds) += busy.count();
}

SwapTraffic NvmeSwapStore::traffic() const {
  std::lock_guard lock(mutex_);
  SwapTraffic traffic = traffic_;
  const auto now = std::chrono::steady_clock::now();
  for (const bool is_write : {false, true})
    if (in_flight_[is_write] > 0)  // the busy time so far of the transfers in flight
      (is_write ? traffic.write_seconds : traffic.read_seconds) +=
          std::chrono::duration<double>(now - busy_since_[is_write]).count();
  return traffic;
}

Region& NvmeSwapStore::region_locked(int region, const char* operation) const {
  ZERO_CHECK(region >= 0 && static_cast<std::size_t>(region) < regions_.size(),
             "NVMe swap: ", operation, " of region ", region, ": no such region (", regions_.size(),
             " declared)");
  return *regions_[static_cast<std::size_t>(region)];
}

std::size_t NvmeSwapStore::padded_bytes(int region) const {
  std::lock_guard lock(mutex_);
  return region_locked(region, "padded_bytes").padded_bytes;
}

int NvmeSwapStore::add_region(std::string label, std::size_t bytes, MemoryCategory category) {
  std::unique_lock lock(mutex_);
  if (failed_) rethrow_locked();
  const std::size_t alignment = directory_.alignment();
  auto region = std::make_unique<Region>();
  region->label = std::move(label);
  region->bytes = bytes;
  region->padded_bytes = (bytes + alignment - 1) / alignment * alignment;
  region->category = category;
  const int index = static_cast<int>(regions_.size());
  region->path = directory_.path() / concat("store", store_index_, "_region", index, ".swap");
  region->fd = open(region->path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  if (region->fd < 0) {
    const int saved = errno;
    ZERO_THROW(
        "NVMe swap: cannot create swap file ", region->path, " for region \"", region->label,
        "\": ", errno_text(saved),
        saved == EMFILE ? " (too many open files: raise `ulimit -n` or use fewer regions)" : "");
  }
  if (region->padded_bytes > 0) {
    const int result = fallocate(region->fd, 0, 0, static_cast<off_t>(region->padded_bytes));
    int saved = result == 0 ? 0 : errno;
    if (saved == EOPNOTSUPP) {  // no reservation on this filesystem: set the size, fail at write
      saved = ftruncate(region->fd, static_cast<off_t>(region->padded_bytes)) == 0 ? 0 : errno;
    }
    if (saved != 0) {
      struct statvfs volume {};
      const std::string free_space =
          statvfs(directory_.path().c_str(), &volume) == 0
              ? concat("; ", static_cast<std::uint64_t>(volume.f_bavail) * volume.f_frsize,
                       " bytes free on the filesystem")
              : std::string();
      close(region->fd);
      std::error_code ignored;
      fs::remove(region->path, ignored);
      error_ = concat("NVMe swap (", directory_.path().string(), "): cannot reserve ",
                      region->padded_bytes, " bytes for region \"", region->label, "\" in ",
                      region->path.string(), ": ", errno_text(saved),
                      saved == ENOSPC ? " (filesystem full)" : "", free_space);
      failed_.store(true, std::memory_order_release);
      rethrow_locked();
    }
  }
  if (options_.ledger != nullptr) {
    options_.ledger->record_allocation(MemorySpace::kNvme, category, bytes);
  }
  regions_.push_back(std::move(region));
  return index;
}

SwapTicket NvmeSwapStore::start(int region_index, char* buffer, bool is_write, std::size_t begin,
                                std::optional<std::size_t> bytes) {
  const char* operation = is_write ? "write" : "read";
  std::unique_lock lock(mutex_);
  if (failed_) rethrow_locked();
  Region& region = region_locked(region_index, operation);
  const std::size_t alignment = directory_.alignment();
  ZERO_CHECK(begin <= region.padded_bytes && bytes.value_or(0) <= region.padded_bytes - begin &&
                 begin % alignment == 0 && bytes.value_or(0) % alignment == 0,
             "NVMe swap: ", operation, " of ", bytes.value_or(0), " bytes at ", begin,
             " of region \"", region.label, "\" (", region.padded_bytes,
             " bytes padded): not whole ", alignment, "-byte blocks inside it");
  const std::size_t end = bytes ? begin + *bytes : region.padded_bytes;
  ZERO_CHECK(buffer != nullptr || begin == end, "NVMe swap: ", operation, " of region \"",
             region.label, "\": null host buffer");
  ZERO_CHECK(reinterpret_cast<std::uintptr_t>(buffer) % alignment == 0, "NVMe swap: ", operation,
             " of region \"", region.label, "\": host buffer ", static_cast<void*>(buffer),
             " is not aligned to io_alignment() = ", alignment);
  ZERO_CHECK(region.writes_in_flight == 0 && (!is_write || region.reads_in_flight == 0),
             "NVMe swap: ", operation, " of region \"", region.label,
             "\" while a transfer of it is in flight (", region.writes_in_flight, " writes, ",
             region.reads_in_flight, " reads); wait for it first");

  const std::uint64_t id = next_ticket_++;
  Transfer& transfer = transfers_[id];
  transfer.id = id;
  transfer.region = &region;
  transfer.is_write = is_write;
  transfer.buffer = buffer;
  transfer.begin = begin;
  transfer.end = end;
  if (begin == end) {
    transfer.done = true;
    return SwapTicket{id};
  }
  (is_write ? region.writes_in_flight : region.reads_in_flight)++;
  begin_traffic_locked(is_write);

  // Contiguous runs of whole blocks, one per ring (fewer when there are fewer blocks).
  const std::size_t block = static_cast<std::size_t>(options_.aio.block_size);
  const std::size_t num_blocks = (end - begin + block - 1) / block;
  const std::size_t num_parts = std::min(num_blocks, workers_.size());
  transfer.parts_left = static_cast<int>(num_parts);
  // Offsets are taken modulo rings so concurrent small transfers spread over the rings.
  const std::size_t first_worker = id % workers_.size();
  lock.unlock();
  for (std::size_t p = 0; p < num_parts; ++p) {
    Part part;
    part.transfer = &transfer;
    part.begin = std::min(end, begin + p * num_blocks / num_parts * block);
    part.end = std::min(end, begin + (p + 1) * num_blocks / num_parts * block);
    part.next = part.begin;
    workers_[(first_worker + p) % workers_.size()]->enqueue(part);
  }
  return SwapTicket{id};
}

SwapTicket NvmeSwapStore::write(int region, const void* source) {
  // The source is only read (O_DIRECT write from it); the const_cast never writes through it.
  return start(region, const_cast<char*>(static_cast<const char*>(source)), true);
}

SwapTicket NvmeSwapStore::read(int region, void* destination) {
  return start(region, static_cast<char*>(destination), false);
}

SwapTicket NvmeSwapStore::read_range(int region, std::size_t offset, std::size_t bytes,
                                     void* destination) {
  return start(region, static_cast<char*>(destination), false, offset, bytes);
}

void NvmeSwapStore::wait(SwapTicket ticket) {
  if (ticket.id == 0) return;
  std::unique_lock lock(mutex_);
  if (!transfers_.contains(ticket.id)) {
    ZERO_CHECK(ticket.id < next_ticket_, "NVMe swap: wait on ticket ", ticket.id,
               ", which this store never issued");
    if (failed_) rethrow_locked();
    return;  // already waited for (e.g. by wait_all)
  }
  // Found again after each wake-up: another thread's wait() or wait_all() may have erased it.
  const auto finished = [&] {
    auto found = transfers_.find(ticket.id);
    return found == transfers_.end() || found->second.done;
  };
  if (!done_.wait_for(lock, timeout_, finished)) {
    const Transfer& transfer = transfers_.at(ticket.id);  // present: not finished
    if (!failed_) {
      error_ = concat("NVMe swap (", directory_.path().string(),
                      "): ", transfer.is_write ? "write" : "read", " of region \"",
                      transfer.region->label, "\" (file ", transfer.region->path.string(),
                      ") did not complete within ", timeout_.count() / 1000.0,
                      " s (ZERO_SWAP_TIMEOUT_S); the device is not answering");
      failed_.store(true, std::memory_order_release);
    }
    done_.notify_all();
    rethrow_locked();
  }
  transfers_.erase(ticket.id);
  if (failed_) rethrow_locked();
}

void NvmeSwapStore::wait_all() {
  std::unique_lock lock(mutex_);
  const bool all_done = done_.wait_for(lock, timeout_, [&] {
    return std::all_of(transfers_.begin(), transfers_.end(),
                       [](const auto& entry) { return entry.second.done; });
  });
  if (!all_done && !failed_) {
    error_ =
        concat("NVMe swap (", directory_.path().string(), "): transfers did not complete within ",
               timeout_.count() / 1000.0, " s (ZERO_SWAP_TIMEOUT_S); the device is not answering");
    failed_.store(true, std::memory_order_release);
  }
  if (all_done) transfers_.clear();
  if (failed_) rethrow_locked();
}

}  // namespace

std::unique_ptr<SwapStore> make_nvme_swap_store(const NvmeSwapOptions& options) {
  return std::make_unique<NvmeSwapStore>(options);
}

}  // namespace zero
