// Test doubles that check where collective buffers live: a device allocator that knows its live
// blocks, a CPU context whose device space is that allocator, and a communicator wrapper that
// checks every buffer handed to a collective against it, when the call is made and again on the
// communication stream just before the collective runs (a buffer freed before its collective ran
// fails the second check). On CUDA a host pointer handed to NCCL is an error or silent garbage;
// on the CPU backend, where every space is host memory, only this check tells the two apart.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../common/forwarding_context.h"
#include "zero/comm/communicator.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/cpu_stream.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"

namespace zero::testing {

// Device memory that records its live blocks (no cache: a freed Buffer's block is gone at once,
// so holds() is false for it).
class TrackingDeviceAllocator final : public Allocator {
 public:
  explicit TrackingDeviceAllocator(MemoryLedger& ledger)
      : Allocator(MemorySpace::kDevice, ledger, /*caching=*/false) {}
  ~TrackingDeviceAllocator() override { release_cached(); }

  // True when [data, data + size_bytes) lies inside one live block of this allocator.
  bool holds(const void* data, std::size_t size_bytes) const {
    const auto address = reinterpret_cast<std::uintptr_t>(data);
    std::lock_guard lock(mutex_);
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) return false;
    --it;
    return address + size_bytes <= it->first + it->second;
  }

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    void* data = std::aligned_alloc(64, size_bytes);
    if (data == nullptr) return nullptr;
    std::lock_guard lock(mutex_);
    blocks_[reinterpret_cast<std::uintptr_t>(data)] = size_bytes;
    return data;
  }
  void raw_free(void* data) noexcept override {
    {
      std::lock_guard lock(mutex_);
      blocks_.erase(reinterpret_cast<std::uintptr_t>(data));
    }
    std::free(data);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> blocks_;  // start -> size in bytes
};

// The CPU backend (its mode and stress as given) with a TrackingDeviceAllocator as device space.
class TrackingDeviceContext final : public ForwardingContext {
 public:
  explicit TrackingDeviceContext(CpuContextOptions options)
      : ForwardingContext(make_cpu_context(options)), device_(inner().ledger()) {}
  ~TrackingDeviceContext() override {
    // Queued work may still free device buffers: drain before the allocator goes.
    try {
      compute_stream().synchronize();
      copy_stream().synchronize();
    } catch (...) {
    }
  }
  Allocator& allocator(MemorySpace space) override {
    return space == MemorySpace::kDevice ? device_ : ForwardingContext::allocator(space);
  }
  const TrackingDeviceAllocator& device_allocator() const { return device_; }

 private:
  TrackingDeviceAllocator device_;
};

// Wraps `inner` (same rank, world and call order): each collective runs as inner's, to completion,
// on this communicator's stream, after its buffers were checked against `device`. Buffers that are
// not the device allocator's are recorded, with the collective's label, in violations().
// `buffers` is the memory kind it says it takes (kCuda: as NCCL, so callers that stage host values
// by buffers() stage them).
class CheckingCommunicator final : public Communicator {
 public:
  CheckingCommunicator(Communicator& inner, const TrackingDeviceAllocator& device,
                       DeviceKind buffers = DeviceKind::kCpu)
      : CheckingCommunicator(
            inner,
            [&device](const void* data, std::size_t size_bytes) {
              return device.holds(data, size_bytes);
            },
            buffers) {}
  // `holds(data, size_bytes)`: whether the bytes lie in one live block of the device allocator.
  CheckingCommunicator(Communicator& inner, std::function<bool(const void*, std::size_t)> holds,
                       DeviceKind buffers = DeviceKind::kCpu)
      : Communicator(CommOptions{inner.timeout()}),
        inner_(inner),
        holds_(std::move(holds)),
        buffers_(buffers) {}

  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  std::string_view backend() const override { return "checking"; }
  DeviceKind buffers() const override { return buffers_; }

  std::vector<std::string> violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }
  std::int64_t buffers_checked() const {
    std::lock_guard lock(mutex_);
    return checked_;
  }
  // Collectives issued by the calling thread's rank that have not run to completion yet (a caller
  // that returns with one queued leaves its buffers, and the communicator, to a later run).
  std::uint64_t collectives_pending() const {
    std::lock_guard lock(mutex_);
    return sequence() - completed_;
  }

 protected:
  void enqueue(const CollectiveInfo& info, const void* send, void* recv) override {
    check(info, send, recv, "when called");
    Communicator::enqueue(info, send, recv);
  }
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    check(info, send, recv, "when run");
    const std::size_t n = info.count;
    switch (info.op) {
      case CollectiveOp::kAllReduce:
        inner_.all_reduce(send, recv, n, info.dtype, info.reduce_op, info.label);
        break;
      case CollectiveOp::kReduceScatter:
        inner_.reduce_scatter(send, recv, n, info.dtype, info.reduce_op, info.label);
        break;
      case CollectiveOp::kAllGather:
        inner_.all_gather(send, recv, n, info.dtype, info.label);
        break;
      case CollectiveOp::kBroadcast:
        inner_.broadcast(send, recv, n, info.dtype, info.root, info.label);
        break;
      case CollectiveOp::kBarrier: inner_.barrier(info.label); break;
    }
    inner_.synchronize();
    std::lock_guard lock(mutex_);
    ++completed_;
  }

 private:
  // Bytes of send and recv per the collective contracts (communicator.h).
  void check(const CollectiveInfo& info, const void* send, const void* recv, const char* when) {
    const std::size_t element = size_of(info.dtype);
    const std::size_t world = static_cast<std::size_t>(world_size());
    std::size_t send_bytes = info.count * element, recv_bytes = info.count * element;
    if (info.op == CollectiveOp::kReduceScatter) send_bytes *= world;
    if (info.op == CollectiveOp::kAllGather) recv_bytes *= world;
    if (info.op == CollectiveOp::kBarrier) return;
    // broadcast reads send on the root only; a null pointer is a buffer on no rank.
    const bool reads_send = info.op != CollectiveOp::kBroadcast || rank() == info.root;
    std::lock_guard lock(mutex_);
    auto expect_device = [&](const void* data, std::size_t bytes, const char* which) {
      ++checked_;
      if (bytes == 0 || holds_(data, bytes)) return;
      violations_.push_back(info.to_string() + ": " + which + " buffer (" + std::to_string(bytes) +
                            " bytes) is not the device allocator's " + when);
    };
    if (reads_send) expect_device(send, send_bytes, "send");
    expect_device(recv, recv_bytes, "recv");
  }

  Communicator& inner_;
  std::function<bool(const void*, std::size_t)> holds_;
  DeviceKind buffers_;
  mutable std::mutex mutex_;
  std::vector<std::string> violations_;
  std::int64_t checked_ = 0;
  std::uint64_t completed_ = 0;
};

}  // namespace zero::testing
