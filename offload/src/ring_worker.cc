// The io_uring ring workers of the NVMe swap store: each drives one ring from its own thread,
// splitting its parts into block_size requests, at most queue_depth in flight, submitted one by
// one or in batches as the aio settings say (nvme_swap_store.cc explains the mapping).
#include "ring_worker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "swap_directory.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero::detail {

std::string errno_text(int error_number) {
  return std::string(std::strerror(error_number)) + " (errno " + std::to_string(error_number) + ")";
}

RingWorker::RingWorker(RingOwner& store, int index, const AioSettings& aio)
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
      char* address = transfer.buffer + (slot.offset - transfer.begin);
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

}  // namespace zero::detail
