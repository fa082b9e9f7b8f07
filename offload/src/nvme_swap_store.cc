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

#include "swap_directory.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero {
namespace {

namespace fs = std::filesystem;
using detail::concat;

std::string errno_text(int error_number) {
  return std::string(std::strerror(error_number)) + " (errno " + std::to_string(error_number) + ")";
}

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

struct Region {
  std::string label;
  std::size_t bytes = 0;
  std::size_t padded_bytes = 0;
  MemoryCategory category = MemoryCategory::kWorkspace;
  fs::path path;
  int fd = -1;
  int reads_in_flight = 0;
  int writes_in_flight = 0;
};

struct Transfer {
  std::uint64_t id = 0;
  Region* region = nullptr;
  bool is_write = false;
  char* buffer = nullptr;
  int parts_left = 0;
  bool done = false;
};

// A contiguous run of a transfer handled by one ring: bytes [begin, end) of the region.
struct Part {
  Transfer* transfer = nullptr;
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t next = 0;  // first byte not yet submitted
  int in_flight = 0;
};

class NvmeSwapStore;

// user_data of the cancellation request a stopping ring sends (request slots are small numbers).
constexpr std::uint64_t kCancelTag = ~std::uint64_t{0};

// One io_uring and the thread that drives it.
class RingWorker {
 public:
  RingWorker(NvmeSwapStore& store, int index, const AioSettings& aio);
  ~RingWorker();
  RingWorker(const RingWorker&) = delete;
  RingWorker& operator=(const RingWorker&) = delete;

  void enqueue(const Part& part);
  void stop();

 private:
  struct Slot {
    Part* part = nullptr;
    std::size_t offset = 0;
    std::size_t length = 0;
  };

  void run();
  int submit_pending();
  void reap(io_uring_cqe* cqe);
  bool fill();

  NvmeSwapStore& store_;
  int index_;
  unsigned queue_depth_;
  std::size_t block_size_;
  bool single_submit_;
  bool overlap_events_;
  bool enable_in_thread_ = false;  // the ring was created disabled (SINGLE_ISSUER)
  io_uring ring_{};
  std::vector<Slot> slots_;
  std::vector<unsigned> free_slots_;
  std::list<Part> active_;  // worker thread only
  int in_flight_ = 0;       // worker thread only

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Part> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class NvmeSwapStore final : public SwapStore {
 public:
  explicit NvmeSwapStore(const NvmeSwapOptions& options);
  ~NvmeSwapStore() override;

  int add_region(std::string label, std::size_t bytes, MemoryCategory category) override;
  SwapTicket write(int region, const void* source) override;
  SwapTicket read(int region, void* destination) override;
  void wait(SwapTicket ticket) override;
  void wait_all() override;
  std::size_t io_alignment() const override { return directory_.alignment(); }
  std::size_t padded_bytes(int region) const override;
  const fs::path& directory() const override { return directory_.path(); }

  // Called by the workers.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  void fail(const std::string& message);
  void finish_part(Part& part);
  std::string describe(const Part& part, std::size_t offset, std::size_t length) const;

 private:
  SwapTicket start(int region, char* buffer, bool is_write);
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

  std::vector<std::unique_ptr<RingWorker>> workers_;
};

// ---- RingWorker ----

RingWorker::RingWorker(NvmeSwapStore& store, int index, const AioSettings& aio)
    : store_(store),
      index_(index),
      queue_depth_(static_cast<unsigned>(aio.queue_depth)),
      block_size_(static_cast<std::size_t>(aio.block_size)),
      single_submit_(aio.single_submit),
      overlap_events_(aio.overlap_events) {
  // Completions are run when the ring's own thread waits for them, not by interrupting it:
  // DEFER_TASKRUN (Linux 6.1+; needs SINGLE_ISSUER, so the ring starts disabled and the worker
  // enables it, becoming its one submitter), else COOP_TASKRUN (5.19+), else plain.
  int result = io_uring_queue_init(
      queue_depth_, &ring_,
      IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
  enable_in_thread_ = result == 0;
  if (result == -EINVAL)
    result = io_uring_queue_init(queue_depth_, &ring_, IORING_SETUP_COOP_TASKRUN);
  if (result == -EINVAL) result = io_uring_queue_init(queue_depth_, &ring_, 0);
  ZERO_CHECK(result == 0, "NVMe swap: io_uring_queue_init(", queue_depth_, ") for ring ", index,
             " failed: ", errno_text(-result),
             " (io_uring needs Linux 5.1+ and may be disabled by kernel.io_uring_disabled or a "
             "seccomp profile)");
  slots_.resize(queue_depth_);
  for (unsigned i = queue_depth_; i-- > 0;) free_slots_.push_back(i);
  thread_ = std::thread([this] { run(); });
}

RingWorker::~RingWorker() {
  stop();
  io_uring_queue_exit(&ring_);
}

void RingWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RingWorker::enqueue(const Part& part) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(part);
  }
  wake_.notify_one();
}

// Prepares requests from the active parts while slots are free; returns whether any was prepared.
bool RingWorker::fill() {
  bool prepared = false;
  for (Part& part : active_) {
    while (part.next < part.end && !free_slots_.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) {
        if (submit_pending() < 0) return prepared;
        sqe = io_uring_get_sqe(&ring_);
        if (sqe == nullptr) return prepared;
      }
      const unsigned slot_index = free_slots_.back();
      free_slots_.pop_back();
      Slot& slot = slots_[slot_index];
      slot.part = &part;
      slot.offset = part.next;
      slot.length = std::min(block_size_, part.end - part.next);
      Transfer& transfer = *part.transfer;
      char* address = transfer.buffer + slot.offset;
      if (transfer.is_write) {
        io_uring_prep_write(sqe, transfer.region->fd, address, static_cast<unsigned>(slot.length),
                            slot.offset);
      } else {
        io_uring_prep_read(sqe, transfer.region->fd, address, static_cast<unsigned>(slot.length),
                           slot.offset);
      }
      io_uring_sqe_set_data64(sqe, slot_index);
      part.next += slot.length;
      ++part.in_flight;
      ++in_flight_;
      prepared = true;
      if (single_submit_ && submit_pending() < 0) return prepared;
    }
    if (free_slots_.empty()) break;
  }
  return prepared;
}

// Submits what is prepared; returns the submitted count or a negative errno (the store has failed
// then).
int RingWorker::submit_pending() {
  for (;;) {
    const int result = io_uring_submit(&ring_);
    if (result >= 0) return result;
    if (result == -EINTR) continue;
    if ((result == -EAGAIN || result == -EBUSY) && in_flight_ > 0) return 0;  // reap first
    store_.fail(concat("io_uring_submit on ring ", index_, " failed: ", errno_text(-result)));
    return result;
  }
}

void RingWorker::reap(io_uring_cqe* cqe) {
  if (io_uring_cqe_get_data64(cqe) == kCancelTag) {
    io_uring_cqe_seen(&ring_, cqe);
    return;
  }
  const auto slot_index = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
  int result = cqe->res;
  io_uring_cqe_seen(&ring_, cqe);
  Slot slot = slots_[slot_index];
  free_slots_.push_back(slot_index);
  --in_flight_;
  --slot.part->in_flight;
  if (const int injected = detail::take_injected_swap_fault(); injected != 0) result = -injected;
  const bool is_write = slot.part->transfer->is_write;
  if (result < 0) {
    store_.fail(concat(is_write ? "write" : "read", " failed: ", errno_text(-result),
                       -result == ENOSPC ? " (filesystem full)" : "", "; ",
                       store_.describe(*slot.part, slot.offset, slot.length)));
  } else if (static_cast<std::size_t>(result) != slot.length) {
    struct stat info {};
    const int fd = slot.part->transfer->region->fd;
    const std::string now = fstat(fd, &info) == 0
                                ? concat("; the file is now ", info.st_size, " bytes",
                                         info.st_nlink == 0 ? " and removed" : "")
                                : std::string();
    store_.fail(concat("short ", is_write ? "write" : "read", ": ", result, " of ", slot.length,
                       " bytes", is_write ? " (filesystem full?)" : " (file truncated?)", "; ",
                       store_.describe(*slot.part, slot.offset, slot.length), now));
  }
}

void RingWorker::run() {
  if (enable_in_thread_) {
    // io_uring_enable_rings, which Debian 12's liburing 2.3 declares but does not export.
    if (syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) !=
        0) {
      store_.fail(concat("enabling ring ", index_, " failed: ", errno_text(errno)));
    }
  }
  bool cancel_sent = false;
  std::chrono::steady_clock::time_point give_up_at;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock lock(mutex_);
      if (in_flight_ == 0 && active_.empty()) {
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      }
      if (stopping_ && in_flight_ == 0 && queue_.empty() && active_.empty()) return;
      stopping = stopping_;
      while (!queue_.empty()) {
        active_.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    // Stopping with requests still in flight happens only after the store's wait timed out: ask
    // the kernel to cancel them, and give up on a device that does not answer even that (the
    // ring's exit cancels what is left).
    if (stopping && in_flight_ > 0) {
      if (!cancel_sent) {
        if (io_uring_sqe* sqe = io_uring_get_sqe(&ring_); sqe != nullptr) {
          io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
          io_uring_sqe_set_data64(sqe, kCancelTag);
          io_uring_submit(&ring_);
        }
        cancel_sent = true;
        give_up_at = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      } else if (std::chrono::steady_clock::now() > give_up_at) {
        return;
      }
    }
    // After a failure nothing more is submitted; what is in flight is reaped before its
    // transfer counts as done (the kernel may still write into the caller's buffer until then).
    bool submit_now = false;  // prepared requests to submit together with the wait below
    if (store_.failed()) {
      for (Part& part : active_) part.next = part.end;
    } else if (overlap_events_ || in_flight_ == 0) {
      submit_now = fill() && !single_submit_;
    }
    for (auto it = active_.begin(); it != active_.end();) {
      if (it->next == it->end && it->in_flight == 0) {
        store_.finish_part(*it);
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    if (in_flight_ == 0) continue;

    // One io_uring_enter submits the batch and waits for the first completion.
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec wait_limit{0, 100'000'000};  // wake now and then to see stop and new work
    const int result = submit_now
                           ? io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &wait_limit, nullptr)
                           : io_uring_wait_cqe_timeout(&ring_, &cqe, &wait_limit);
    if (result < 0 && io_uring_sq_ready(&ring_) > 0 && submit_pending() < 0) continue;
    if (result == -ETIME || result == -EINTR || result == -EAGAIN || result == -EBUSY) continue;
    if (result < 0) {
      store_.fail(concat("io_uring_wait_cqe on ring ", index_, " failed: ", errno_text(-result)));
      continue;
    }
    if (cqe != nullptr) reap(cqe);
    io_uring_cqe* more = nullptr;
    while (io_uring_peek_cqe(&ring_, &more) == 0 && more != nullptr) reap(more);
  }
}

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
      transfer.done = true;
    }
  }
  done_.notify_all();
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

SwapTicket NvmeSwapStore::start(int region_index, char* buffer, bool is_write) {
  const char* operation = is_write ? "write" : "read";
  std::unique_lock lock(mutex_);
  if (failed_) rethrow_locked();
  Region& region = region_locked(region_index, operation);
  const std::size_t alignment = directory_.alignment();
  ZERO_CHECK(buffer != nullptr || region.padded_bytes == 0, "NVMe swap: ", operation,
             " of region \"", region.label, "\": null host buffer");
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
  if (region.padded_bytes == 0) {
    transfer.done = true;
    return SwapTicket{id};
  }
  (is_write ? region.writes_in_flight : region.reads_in_flight)++;

  // Contiguous runs of whole blocks, one per ring (fewer when there are fewer blocks).
  const std::size_t block = static_cast<std::size_t>(options_.aio.block_size);
  const std::size_t num_blocks = (region.padded_bytes + block - 1) / block;
  const std::size_t num_parts = std::min(num_blocks, workers_.size());
  transfer.parts_left = static_cast<int>(num_parts);
  // Offsets are taken modulo rings so concurrent small transfers spread over the rings.
  const std::size_t first_worker = id % workers_.size();
  lock.unlock();
  for (std::size_t p = 0; p < num_parts; ++p) {
    Part part;
    part.transfer = &transfer;
    part.begin = std::min(region.padded_bytes, p * num_blocks / num_parts * block);
    part.end = std::min(region.padded_bytes, (p + 1) * num_blocks / num_parts * block);
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
