// In-process communicator over threads: a host rendezvous per call to exchange pointers and
// events, then the collective as stream work of one DeviceContext on each rank's stream.
#include "zero/comm/thread_communicator.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "reduce.h"
#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"

namespace zero {

struct ThreadCommGroup::Shared {
  // What a rank posts when it calls collective `arrived`, and when it has issued its reads of it.
  struct Slot {
    CollectiveInfo info;
    const void* send = nullptr;
    Event ready;                 // on the rank's stream at the call: its send buffer is written
    Event read;                  // after the rank's reads of every peer's buffers
    std::uint64_t arrived = 0;   // sequence number this rank has called
    std::uint64_t departed = 0;  // sequence number whose reads this rank has issued
  };

  Shared(int world, CommOptions comm_options, DeviceContext* given)
      : world_size(world), options(comm_options), slots(world) {
    if (given == nullptr) owned_context = make_cpu_context();
    context = given != nullptr ? given : owned_context.get();
  }

  int world_size;
  CommOptions options;
  std::unique_ptr<DeviceContext> owned_context;
  DeviceContext* context = nullptr;
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

// One rank. A collective, issued from the calling thread: (1) post the send pointer and an event
// of this rank's stream, wait on the host until every rank has posted the same call; (2) on the
// stream, wait for every peer's event and read the peers' buffers (copies straight into recv,
// which no peer reads, or a reduction into a workspace); (3) post an event after those reads and
// meet again on the host; (4) on the stream, wait for every peer's reads, then write what was
// reduced into recv. Nothing after the collective on this stream can overwrite a buffer a peer
// still reads, and in-place calls are safe. Step (1) and (3) are host waits for the peers'
// calling threads only, never for device work.
class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadCommGroup::Shared* shared, int rank)
      : Communicator(shared->options,
                     shared->context->make_stream("communication " + std::to_string(rank))),
        shared_(shared),
        context_(*shared->context),
        rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return shared_->world_size; }
  std::string_view backend() const override { return "thread"; }
  DeviceKind buffers() const override { return context_.device().kind; }

 protected:
  void run(const CollectiveInfo& info, const void*, void*) override {
    ZERO_THROW("thread communicator: ", info.to_string(),
               " reached run(); collectives are enqueued");
  }

  // A failed rendezvous (calls that disagree, a peer past the timeout, an aborted group) fails
  // the stream, as a collective that fails on it would: the error reaches whoever waits for the
  // collective (with what it was for), and every later collective of this rank fails the same.
  void enqueue(const CollectiveInfo& info, const void* send, void* recv) override {
    Stream& own = stream();
    if (!failure_) {
      try {
        const std::vector<const void*> sends = arrive(info, send, own.record());
        const std::function<void()> write = read_peers(info, sends, recv);
        depart(info, own.record());
        write();
        return;
      } catch (const Error&) {
        failure_ = std::current_exception();
      }
    }
    own.submit([failure = failure_] { std::rethrow_exception(failure); });
  }

 private:
  using Slot = ThreadCommGroup::Shared::Slot;

  // Step (1): every rank's send pointer; this stream waits for every peer's `ready`.
  std::vector<const void*> arrive(const CollectiveInfo& info, const void* send, Event ready) {
    auto& shared = *shared_;
    std::vector<const void*> sends(shared.world_size);
    std::vector<Event> peers_ready;
    {
      std::unique_lock lock(shared.mutex);
      Slot& slot = shared.slots[rank_];
      slot.info = info;
      slot.send = send;
      slot.ready = std::move(ready);
      slot.arrived = info.sequence;
      shared.changed.notify_all();
      shared.wait_for_all(lock, rank_, info, &Slot::arrived, "waiting for peers");
      std::vector<CollectiveInfo> calls;
      for (const Slot& peer : shared.slots) calls.push_back(peer.info);
      for (const CollectiveInfo& call : calls)
        if (!call.same_call(info)) ZERO_THROW(describe_disagreement(rank_, calls));
      for (int r = 0; r < shared.world_size; ++r) {
        sends[r] = shared.slots[r].send;
        if (r != rank_) peers_ready.push_back(shared.slots[r].ready);
      }
    }
    for (const Event& event : peers_ready) stream().wait(event);
    return sends;
  }

  // Step (3): posts `read` and waits on the host for every peer's; this stream waits for them.
  void depart(const CollectiveInfo& info, Event read) {
    auto& shared = *shared_;
    std::vector<Event> peers_read;
    {
      std::unique_lock lock(shared.mutex);
      Slot& slot = shared.slots[rank_];
      slot.read = std::move(read);
      slot.departed = info.sequence;
      shared.changed.notify_all();
      shared.wait_for_all(lock, rank_, info, &Slot::departed, "finishing");
      for (int r = 0; r < shared.world_size; ++r)
        if (r != rank_) peers_read.push_back(shared.slots[r].read);
    }
    for (const Event& event : peers_read) stream().wait(event);
  }

  // Step (2): enqueues the reads of the peers' buffers; returns step (4), the writes into recv
  // that must wait until every peer has read this rank's buffers.
  std::function<void()> read_peers(const CollectiveInfo& info,
                                   const std::vector<const void*>& sends, void* recv) {
    const std::size_t bytes = info.count * size_of(info.dtype);
    Stream& own = stream();
    auto* out = static_cast<char*>(recv);
    if (bytes == 0) return [] {};
    switch (info.op) {
      case CollectiveOp::kAllGather:
        for (int r = 0; r < world_size(); ++r)
          if (sends[r] != out + r * bytes) context_.copy(own, sends[r], out + r * bytes, bytes);
        return [] {};
      case CollectiveOp::kBroadcast:
        if (sends[info.root] != recv) context_.copy(own, sends[info.root], recv, bytes);
        return [] {};
      case CollectiveOp::kBarrier: return [] {};
      case CollectiveOp::kAllReduce:
      case CollectiveOp::kReduceScatter: break;
    }
    // One rank: every reduction of one block is that block (a sum's fp32 round trip and an
    // average's divide by 1 are exact), so no workspace: a world-1 trainer's unit-sized
    // reductions would otherwise hold a workspace the engine's ledger does not see.
    if (world_size() == 1) {
      if (sends[0] != recv) context_.copy(own, sends[0], recv, bytes);
      return [] {};
    }
    std::vector<const void*> blocks(sends);
    if (info.op == CollectiveOp::kReduceScatter)
      for (const void*& block : blocks) block = static_cast<const char*>(block) + rank_ * bytes;
    return info.reduce_op == ReduceOp::kSum ? sum_on_device(info, blocks, recv)
                                            : reduce_on_host(info, blocks, recv);
  }

  // Σ blocks in rank order, in fp32 on the context's stream (its convert and axpy: acc += 1·x),
  // rounded once into recv: the bits of detail::accumulate's host loop.
  std::function<void()> sum_on_device(const CollectiveInfo& info,
                                      const std::vector<const void*>& blocks, void* recv) {
    Stream& own = stream();
    auto sum = std::make_shared<Buffer>(
        context_.allocator(MemorySpace::kDevice)
            .allocate(info.count * sizeof(float), MemoryCategory::kCommBuffers));
    convert_or_copy(blocks[0], info.dtype, sum->data(), DType::kFloat32, info.count);
    for (std::size_t r = 1; r < blocks.size(); ++r)
      context_.axpy(own, blocks[r], info.dtype, sum->data(), DType::kFloat32, info.count, 1.0f);
    return [this, info, sum, recv] {
      convert_or_copy(sum->data(), DType::kFloat32, recv, info.dtype, info.count);
      context_.release_after(stream(), sum);
    };
  }

  // Average and maximum (the engine's and trainer's scalars): the blocks copied into pinned host
  // memory and reduced there by a host task of the stream (detail::accumulate, the divide of the
  // other CPU communicators), then copied into recv.
  std::function<void()> reduce_on_host(const CollectiveInfo& info,
                                       const std::vector<const void*>& blocks, void* recv) {
    Stream& own = stream();
    const std::size_t bytes = info.count * size_of(info.dtype);
    const int world = world_size();
    Allocator& pinned = context_.allocator(MemorySpace::kHostPinned);
    auto staged = std::make_shared<Buffer>(pinned.allocate(
        (static_cast<std::size_t>(world) + 1) * bytes, MemoryCategory::kCommBuffers));
    auto* base = static_cast<char*>(staged->data());
    for (int r = 0; r < world; ++r) context_.copy(own, blocks[r], base + r * bytes, bytes);
    own.submit([info, base, bytes, world] {
      std::vector<float> accumulator(info.count);
      convert(base, info.dtype, accumulator.data(), DType::kFloat32, info.count);
      for (int r = 1; r < world; ++r)
        detail::accumulate(accumulator.data(), base + r * bytes, info.dtype, info.reduce_op,
                           info.count);
      detail::finish_reduction(accumulator.data(), base + world * bytes, info.dtype, info.reduce_op,
                               world, info.count);
    });
    return [this, staged, base, bytes, world, recv] {
      context_.copy(stream(), base + world * bytes, recv, bytes);
      context_.release_after(stream(), staged);
    };
  }

  void convert_or_copy(const void* source, DType source_dtype, void* destination,
                       DType destination_dtype, std::size_t count) {
    if (source_dtype == destination_dtype)
      context_.copy(stream(), source, destination, count * size_of(source_dtype));
    else
      context_.convert(stream(), source, source_dtype, destination, destination_dtype, count);
  }

  ThreadCommGroup::Shared* shared_;
  DeviceContext& context_;
  int rank_;
  std::exception_ptr failure_;  // the first failed rendezvous
};

}  // namespace

ThreadCommGroup::ThreadCommGroup(int world_size, CommOptions options, DeviceContext* context) {
  ZERO_CHECK(world_size >= 1, "thread communicator world size must be at least 1, got ",
             world_size);
  shared_ = std::make_shared<Shared>(world_size, options, context);
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

void run_ranks(int world_size, const std::function<void(Communicator&)>& body, CommOptions options,
               DeviceContext* context) {
  ThreadCommGroup group(world_size, options, context);
  std::mutex error_mutex;
  std::exception_ptr first_error;
  int first_rank = -1;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        if (context != nullptr) context->use_on_this_thread();  // cuda:N's rank threads on N
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
