// In-process communicator over threads: rendezvous per collective, rank-order reductions.
#include "zero/comm/thread_communicator.h"

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "reduce.h"
#include "zero/core/error.h"

namespace zero {

namespace {
class ThreadCommunicator;
}

struct ThreadCommGroup::Shared {
  struct Slot {
    CollectiveInfo info;
    const void* send = nullptr;
    std::uint64_t arrived = 0;   // sequence number this rank has arrived at
    std::uint64_t departed = 0;  // sequence number this rank has finished reading for
  };

  Shared(int world, CommOptions comm_options)
      : world_size(world), options(comm_options), slots(world) {}

  int world_size;
  CommOptions options;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<Slot> slots;
  bool aborted = false;
  std::string abort_reason;
  std::vector<std::unique_ptr<Communicator>> communicators;

  void abort(const std::string& reason) {
    std::lock_guard lock(mutex);
    if (!aborted) {
      aborted = true;
      abort_reason = reason;
    }
    changed.notify_all();
  }

  // Waits until every rank's `field` reaches `sequence`; throws on abort or timeout.
  void wait_for_all(std::unique_lock<std::mutex>& lock, int rank, const CollectiveInfo& info,
                    std::uint64_t Slot::*field, const char* phase) {
    const bool ok = changed.wait_for(lock, options.timeout, [&] {
      if (aborted) return true;
      for (const Slot& slot : slots)
        if (slot.*field < info.sequence) return false;
      return true;
    });
    if (aborted)
      ZERO_THROW("thread communicator aborted (", abort_reason, ") while rank ", rank,
                 " waited in collective ", info.to_string());
    if (!ok) {
      std::ostringstream behind;
      for (int r = 0; r < world_size; ++r) {
        const Slot& slot = slots[r];
        if (slot.*field >= info.sequence) continue;
        behind << "\n  rank " << r << ": ";
        if (slot.arrived == 0)
          behind << "has issued no collective";
        else
          behind << "last arrived at " << slot.info.to_string();
      }
      ZERO_THROW("collective ", info.to_string(), " timed out after ", options.timeout.count(),
                 " ms on rank ", rank, " (", phase, "); ranks behind:", behind.str());
    }
  }
};

namespace {

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadCommGroup::Shared* shared, int rank)
      : Communicator(shared->options), shared_(shared), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return shared_->world_size; }
  std::string_view backend() const override { return "thread"; }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    auto& shared = *shared_;
    const int world = shared.world_size;
    const std::size_t element = size_of(info.dtype);
    std::unique_lock lock(shared.mutex);
    auto& own = shared.slots[rank_];
    own.info = info;
    own.send = send;
    own.arrived = info.sequence;
    shared.changed.notify_all();
    shared.wait_for_all(lock, rank_, info, &ThreadCommGroup::Shared::Slot::arrived,
                        "waiting for peers");
    for (int r = 0; r < world; ++r) {
      if (shared.slots[r].info.same_call(info)) continue;
      std::vector<CollectiveInfo> calls;
      for (int q = 0; q < world; ++q) calls.push_back(shared.slots[q].info);
      ZERO_THROW(describe_disagreement(rank_, calls));
    }
    lock.unlock();

    // Read the peers' send buffers into a private result; nobody writes a receive buffer until
    // every rank has finished reading (the departure rendezvous), so in-place calls are safe.
    std::vector<char> result;
    auto source = [&](int r) { return shared.slots[r].send; };
    switch (info.op) {
      case CollectiveOp::kAllReduce:
      case CollectiveOp::kReduceScatter: {
        const std::size_t offset =
            info.op == CollectiveOp::kReduceScatter ? rank_ * info.count * element : 0;
        std::vector<float> accumulator(info.count, 0.0f);
        for (int r = 0; r < world; ++r) {
          const void* block = static_cast<const char*>(source(r)) + offset;
          if (r == 0)
            convert(block, info.dtype, accumulator.data(), DType::kFloat32, info.count);
          else
            detail::accumulate(accumulator.data(), block, info.dtype, info.reduce_op, info.count);
        }
        result.resize(info.count * element);
        detail::finish_reduction(accumulator.data(), result.data(), info.dtype, info.reduce_op,
                                 world, info.count);
        break;
      }
      case CollectiveOp::kAllGather:
        result.resize(world * info.count * element);
        for (int r = 0; r < world; ++r)
          if (info.count > 0)
            std::memcpy(result.data() + r * info.count * element, source(r), info.count * element);
        break;
      case CollectiveOp::kBroadcast:
        result.resize(info.count * element);
        if (info.count > 0) std::memcpy(result.data(), source(info.root), info.count * element);
        break;
      case CollectiveOp::kBarrier: break;
    }

    lock.lock();
    own.departed = info.sequence;
    shared.changed.notify_all();
    shared.wait_for_all(lock, rank_, info, &ThreadCommGroup::Shared::Slot::departed, "finishing");
    lock.unlock();
    if (!result.empty()) std::memcpy(recv, result.data(), result.size());
  }

 private:
  ThreadCommGroup::Shared* shared_;
  int rank_;
};

}  // namespace

ThreadCommGroup::ThreadCommGroup(int world_size, CommOptions options) {
  ZERO_CHECK(world_size >= 1, "thread communicator world size must be at least 1, got ",
             world_size);
  shared_ = std::make_shared<Shared>(world_size, options);
  for (int rank = 0; rank < world_size; ++rank)
    shared_->communicators.push_back(std::make_unique<ThreadCommunicator>(shared_.get(), rank));
}

ThreadCommGroup::~ThreadCommGroup() {
  // Communicators' streams must stop before the shared state they point into goes away.
  shared_->abort("group destroyed");
  shared_->communicators.clear();
}

void ThreadCommGroup::abort(const std::string& reason) { shared_->abort(reason); }

int ThreadCommGroup::world_size() const { return shared_->world_size; }

Communicator& ThreadCommGroup::communicator(int rank) {
  ZERO_CHECK(rank >= 0 && rank < shared_->world_size, "rank ", rank, " is outside thread group of ",
             shared_->world_size);
  return *shared_->communicators[rank];
}

void run_ranks(int world_size, const std::function<void(Communicator&)>& body,
               CommOptions options) {
  ThreadCommGroup group(world_size, options);
  std::mutex error_mutex;
  std::exception_ptr first_error;
  int first_rank = -1;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Communicator& communicator = group.communicator(rank);
        body(communicator);
        communicator.synchronize();
      } catch (const std::exception& error) {
        {
          std::lock_guard lock(error_mutex);
          if (!first_error) {
            first_error = std::current_exception();
            first_rank = rank;
          }
        }
        group.abort("rank " + std::to_string(rank) + " failed: " + error.what());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (first_error) {
    try {
      std::rethrow_exception(first_error);
    } catch (const std::exception& error) {
      throw Error("[rank " + std::to_string(first_rank) + "/" + std::to_string(world_size) + "] " +
                  error.what());
    }
  }
}

}  // namespace zero
