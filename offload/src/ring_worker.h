// One rank's NVMe swap store, inside: its regions, transfers and their parts, and the io_uring
// ring worker that runs a part's aligned O_DIRECT requests on its own thread (nvme_swap_store.cc
// is the store; ring_worker.cc the rings). Private to zero::offload.
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zero/core/memory_ledger.h"
#include "zero/core/swap_store.h"

namespace zero::detail {

struct Region {
  std::string label;
  std::size_t bytes = 0;
  std::size_t padded_bytes = 0;
  MemoryCategory category = MemoryCategory::kWorkspace;
  std::filesystem::path path;
  int fd = -1;
  int reads_in_flight = 0;
  int writes_in_flight = 0;
};

struct Transfer {
  std::uint64_t id = 0;
  Region* region = nullptr;
  bool is_write = false;
  char* buffer = nullptr;  // holds bytes [begin, end) of the region
  std::size_t begin = 0;
  std::size_t end = 0;
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

// What a ring's thread needs from the store that owns it (NvmeSwapStore): the store's sticky
// failure, a failure to record, a finished part, and a description of a request for messages.
class RingOwner {
 public:
  virtual bool failed() const = 0;
  virtual void fail(const std::string& message) = 0;
  virtual void finish_part(Part& part) = 0;
  virtual std::string describe(const Part& part, std::size_t offset, std::size_t length) const = 0;

 protected:
  ~RingOwner() = default;
};

// user_data of the cancellation request a stopping ring sends (request slots are small numbers).
constexpr std::uint64_t kCancelTag = ~std::uint64_t{0};

// One io_uring and the thread that drives it.
class RingWorker {
 public:
  RingWorker(RingOwner& store, int index, const AioSettings& aio);
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

  RingOwner& store_;
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

// "No such file or directory (errno 2)".
std::string errno_text(int error_number);

}  // namespace zero::detail
