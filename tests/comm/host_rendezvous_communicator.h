// A test oracle for the thread communicator: ranks as threads that meet on the host inside every
// collective (on each rank's CPU worker stream), read every rank's send buffer, and reduce with
// plain loops in rank order, in fp32, rounded once (avg divides the fp32 sum by the world size).
// It shares no code with the thread communicator's stream-ordered path (libzero/src/comm/
// thread_communicator.cc), so a run through both at one world must agree bit for bit.
#pragma once

#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/error.h"

namespace zero::testing {

class HostRendezvousGroup {
 public:
  explicit HostRendezvousGroup(int world) : world_(world), sends_(world) {
    for (int rank = 0; rank < world; ++rank) ranks_.push_back(std::make_unique<Rank>(*this, rank));
  }
  ~HostRendezvousGroup() {
    fail("group destroyed");
    ranks_.clear();
  }

  Communicator& communicator(int rank) { return *ranks_[rank]; }
  void fail(const std::string& reason) {
    std::lock_guard lock(mutex_);
    failure_ = reason;
    changed_.notify_all();
  }

  // body(communicator) on one thread per rank; the first error is rethrown.
  void run(const std::function<void(Communicator&)>& body) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(world_);
    for (int rank = 0; rank < world_; ++rank)
      threads.emplace_back([&, rank] {
        try {
          body(communicator(rank));
          communicator(rank).synchronize();
        } catch (...) {
          errors[rank] = std::current_exception();
          fail("rank " + std::to_string(rank) + " failed");
        }
      });
    for (std::thread& thread : threads) thread.join();
    for (const std::exception_ptr& error : errors)
      if (error) std::rethrow_exception(error);
  }

 private:
  class Rank final : public Communicator {
   public:
    Rank(HostRendezvousGroup& group, int rank)
        : Communicator(CommOptions{}), group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int world_size() const override { return group_.world_; }
    std::string_view backend() const override { return "host rendezvous"; }

   protected:
    void run(const CollectiveInfo& info, const void* send, void* recv) override {
      group_.collective(rank_, info, send, recv);
    }

   private:
    HostRendezvousGroup& group_;
    int rank_;
  };

  // Counts this rank in at `ticket` (two per collective) and waits until every rank is.
  void meet(std::unique_lock<std::mutex>& lock, std::uint64_t ticket) {
    ++arrived_[ticket];
    changed_.notify_all();
    changed_.wait(lock, [&] { return !failure_.empty() || arrived_[ticket] == world_; });
    ZERO_CHECK(failure_.empty(), "host rendezvous: ", failure_);
  }

  void collective(int rank, const CollectiveInfo& info, const void* send, void* recv) {
    const std::size_t element = size_of(info.dtype);
    const std::size_t bytes = info.count * element;
    std::unique_lock lock(mutex_);
    sends_[rank] = send;
    meet(lock, 2 * info.sequence);
    std::vector<const void*> sends = sends_;
    lock.unlock();
    std::vector<char> result;
    if (info.op == CollectiveOp::kAllGather) {
      result.resize(world_ * bytes);
      for (int r = 0; r < world_; ++r)
        if (bytes > 0) std::memcpy(result.data() + r * bytes, sends[r], bytes);
    } else if (info.op == CollectiveOp::kBroadcast) {
      result.assign(static_cast<const char*>(sends[info.root]),
                    static_cast<const char*>(sends[info.root]) + bytes);
    } else if (info.op != CollectiveOp::kBarrier) {
      const std::size_t offset = info.op == CollectiveOp::kReduceScatter ? rank * bytes : 0;
      std::vector<float> total(info.count), value(info.count);
      for (int r = 0; r < world_; ++r) {
        convert(static_cast<const char*>(sends[r]) + offset, info.dtype, value.data(),
                DType::kFloat32, info.count);
        for (std::size_t i = 0; i < info.count; ++i) {
          if (r == 0)
            total[i] = value[i];
          else if (info.reduce_op == ReduceOp::kMax)
            total[i] = value[i] > total[i] ? value[i] : total[i];
          else
            total[i] = total[i] + value[i];
        }
      }
      if (info.reduce_op == ReduceOp::kAvg)
        for (float& x : total) x = x / static_cast<float>(world_);
      result.resize(bytes);
      convert(total.data(), DType::kFloat32, result.data(), info.dtype, info.count);
    }
    lock.lock();
    meet(lock, 2 * info.sequence + 1);  // every rank has read: receive buffers may be written
    lock.unlock();
    if (!result.empty()) std::memcpy(recv, result.data(), result.size());
  }

  int world_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<const void*> sends_;
  std::map<std::uint64_t, int> arrived_;
  std::string failure_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace zero::testing
