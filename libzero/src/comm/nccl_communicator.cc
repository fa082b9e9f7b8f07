// The NCCL communicator: collectives on device buffers, enqueued as NCCL kernels on a CUDA stream
// of the device layer (the CUDA DeviceContext's make_stream), from the calling thread; nothing
// waits on the host.
//
// Call check: before each data collective the ranks all-gather the call's 64-byte description
// (call_check.h's WireCall) through NCCL itself, and a host function on the same stream checks it
// with call_check's check_calls_agree, the code MPI and Gloo run. NCCL carries it because it is
// the one transport every NCCL launch has (a torchrun launch has no MPI, and its store is not on
// the stream): one mechanism, in stream order, no host round trip. A disagreement makes that host
// function record the error and hold the stream until the watchdog has aborted the communicator,
// so the mismatched data collective never hangs.
//
// Watchdog: a thread polls each collective's completion event, ncclCommGetAsyncError and the call
// check; on a timeout, an asynchronous NCCL error or a disagreement it calls ncclCommAbort (which
// makes NCCL's kernels return) and keeps the report, which synchronize() throws from then on.
#include <cuda_runtime.h>
#include <nccl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "../cuda/cuda_stream.h"
#include "call_check.h"
#include "nccl_backend.h"
#include "tcp_store.h"
#include "zero/comm/communicator.h"
#include "zero/core/cuda_check.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"

namespace zero {
namespace {

using Clock = std::chrono::steady_clock;

#define ZERO_NCCL_CHECK(call)                                                                      \
  do {                                                                                             \
    const ncclResult_t zero_nccl_status = (call);                                                  \
    ZERO_CHECK(zero_nccl_status == ncclSuccess, "NCCL call ", #call,                               \
               " failed: ", ncclGetErrorString(zero_nccl_status), " (", ncclGetLastError(nullptr), \
               ")");                                                                               \
  } while (false)

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return ncclFloat32;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat16: return ncclFloat16;
  }
  ZERO_THROW("dtype ", static_cast<int>(dtype), " has no NCCL type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAvg: return ncclAvg;
    case ReduceOp::kMax: return ncclMax;
  }
  ZERO_THROW("reduce op ", static_cast<int>(op), " has no NCCL op");
}

// The communicator's failure, once there is one: the watchdog's report.
struct Failure {
  std::mutex mutex;
  std::string report;
  std::atomic<bool> failed{false};
  std::atomic<bool> aborted{false};
  void set(std::string text) {
    std::lock_guard lock(mutex);
    if (failed) return;
    report = std::move(text);
    failed = true;
  }
  std::string get() {
    std::lock_guard lock(mutex);
    return report;
  }
};

// The communication stream: a CUDA stream of the device context whose synchronize() also throws
// the communicator's failure (an aborted NCCL collective returns without a CUDA error).
class NcclStream final : public Stream {
 public:
  NcclStream(std::unique_ptr<Stream> inner, std::shared_ptr<Failure> failure)
      : inner_(std::move(inner)), failure_(std::move(failure)) {}
  void submit(std::function<void()> task) override { inner_->submit(std::move(task)); }
  Event record() override { return inner_->record(); }
  void wait(const Event& event) override { inner_->wait(event); }
  void synchronize() override {
    if (failure_->failed) ZERO_THROW(failure_->get());
    inner_->synchronize();
    if (failure_->failed) ZERO_THROW(failure_->get());
  }
  const std::string& name() const override { return inner_->name(); }
  Stream& underlying() override { return inner_->underlying(); }

 private:
  std::unique_ptr<Stream> inner_;
  std::shared_ptr<Failure> failure_;
};

// Collectives in flight at once before enqueue waits for the oldest (each has a slot: its call
// check buffers and its completion event).
constexpr std::size_t kSlots = 64;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<DeviceContext> context, int device, ncclUniqueId id, int rank,
                   int world_size, CommOptions options, std::shared_ptr<Failure> failure)
      : Communicator(options,
                     std::make_unique<NcclStream>(context->make_stream("communication"), failure)),
        context_(std::move(context)),
        failure_(std::move(failure)),
        device_(device),
        rank_(rank),
        world_size_(world_size) {
    ZERO_CUDA_CHECK(cudaSetDevice(device_));
    native_ = detail::native_cuda_stream(stream());
    ZERO_NCCL_CHECK(ncclCommInitRank(&comm_, world_size_, id, rank_));
    const char* check = std::getenv("ZERO_COMM_CHECK");
    check_calls_ = check == nullptr || std::string(check) != "0";
    const std::size_t wire = sizeof(detail::WireCall);
    ZERO_CUDA_CHECK(cudaMalloc(&device_calls_, kSlots * (world_size_ + 1) * wire + 64));
    ZERO_CUDA_CHECK(
        cudaHostAlloc(&host_calls_, kSlots * (world_size_ + 1) * wire, cudaHostAllocDefault));
    barrier_scratch_ = static_cast<char*>(device_calls_) + kSlots * (world_size_ + 1) * wire;
    for (auto& event : events_)
      ZERO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclCommunicator() override {
    if (!failure_->failed) {
      try {
        synchronize();
      } catch (...) {
        // Reported to whoever synchronized; a destructor cannot rethrow it.
      }
    }
    stop_ = true;
    watchdog_.join();
    if (failure_->failed && !failure_->aborted) {
      // Failed before the watchdog got to abort (or it stopped first): a collective may still
      // wait for peers, which ncclCommDestroy would wait for too.
      ncclCommAbort(comm_);
      failure_->aborted = true;
    } else if (!failure_->aborted) {
      ncclCommDestroy(comm_);
    }  // else ncclCommAbort freed it
    for (auto& event : events_) cudaEventDestroy(event);
    cudaFree(device_calls_);
    cudaFreeHost(host_calls_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "nccl"; }
  DeviceKind buffers() const override { return DeviceKind::kCuda; }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    enqueue(info, send, recv);
  }

  void enqueue(const CollectiveInfo& info, const void* send, void* recv) override {
    if (failure_->failed) ZERO_THROW(failure_->get());
    ZERO_CUDA_CHECK(cudaSetDevice(device_));
    const std::size_t slot = info.sequence % kSlots;
    // The slot's previous collective (kSlots calls ago) must be done before its buffers change
    // (if the stream is stuck, the watchdog's abort ends this wait).
    ZERO_CUDA_CHECK(cudaEventSynchronize(events_[slot]));
    // No NCCL call while the watchdog aborts the communicator, none after.
    std::lock_guard abort_lock(abort_mutex_);
    if (failure_->failed) ZERO_THROW(failure_->get());
    if (check_calls_) enqueue_check(info, slot);
    enqueue_data(info, send, recv);
    std::lock_guard lock(mutex_);
    retire_finished();  // drops the slot's previous collective, finished in stream order
    ZERO_CUDA_CHECK(cudaEventRecord(events_[slot], native_));
    in_flight_.push_back({info, slot, Clock::now()});
  }

 private:
  struct InFlight {
    CollectiveInfo info;
    std::size_t slot;
    Clock::time_point issued;
  };

  void enqueue_check(const CollectiveInfo& info, std::size_t slot) {
    const std::size_t wire = sizeof(detail::WireCall);
    char* host = static_cast<char*>(host_calls_) + slot * (world_size_ + 1) * wire;
    char* device = static_cast<char*>(device_calls_) + slot * (world_size_ + 1) * wire;
    const detail::WireCall mine = detail::to_wire(info);
    std::memcpy(host + world_size_ * wire, &mine, wire);  // this rank's call, after the others
    ZERO_CUDA_CHECK(cudaMemcpyAsync(device + world_size_ * wire, host + world_size_ * wire, wire,
                                    cudaMemcpyHostToDevice, native_));
    ZERO_NCCL_CHECK(
        ncclAllGather(device + world_size_ * wire, device, wire, ncclUint8, comm_, native_));
    ZERO_CUDA_CHECK(
        cudaMemcpyAsync(host, device, world_size_ * wire, cudaMemcpyDeviceToHost, native_));
    // Checked in stream order by the shared call check; a disagreement holds the stream until the
    // watchdog has aborted NCCL (so the mismatched data collective returns at once).
    std::shared_ptr<Failure> failure = failure_;
    const int rank = rank_, world = world_size_;
    stream().underlying().submit([failure, info, host, rank, world] {
      std::vector<detail::WireCall> calls(world);
      std::memcpy(calls.data(), host, world * sizeof(detail::WireCall));
      try {
        detail::check_calls_agree(rank, info, calls);
      } catch (const std::exception& error) {
        failure->set(error.what());
        const auto deadline = Clock::now() + std::chrono::seconds(30);
        while (!failure->aborted && Clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        throw;
      }
    });
  }

  void enqueue_data(const CollectiveInfo& info, const void* send, void* recv) {
    const ncclDataType_t type = nccl_type(info.dtype);
    const std::size_t bytes = info.count * size_of(info.dtype);
    switch (info.op) {
      case CollectiveOp::kAllReduce:
        ZERO_NCCL_CHECK(
            ncclAllReduce(send, recv, info.count, type, nccl_op(info.reduce_op), comm_, native_));
        break;
      case CollectiveOp::kReduceScatter: {
        // NCCL's in place is recv == send + rank·count; the contract's send == recv goes through
        // that form and a copy of the block to the front.
        char* own = static_cast<char*>(const_cast<void*>(send)) + rank_ * bytes;
        const bool front = send == recv && rank_ != 0;
        ZERO_NCCL_CHECK(ncclReduceScatter(send, front ? own : recv, info.count, type,
                                          nccl_op(info.reduce_op), comm_, native_));
        if (front && bytes > 0)
          ZERO_CUDA_CHECK(cudaMemcpyAsync(recv, own, bytes, cudaMemcpyDeviceToDevice, native_));
        break;
      }
      case CollectiveOp::kAllGather:
        ZERO_NCCL_CHECK(ncclAllGather(send, recv, info.count, type, comm_, native_));
        break;
      case CollectiveOp::kBroadcast:
        ZERO_NCCL_CHECK(ncclBroadcast(send, recv, info.count, type, info.root, comm_, native_));
        break;
      case CollectiveOp::kBarrier:
        // NCCL has no barrier: a one-element all-reduce every rank must join.
        ZERO_NCCL_CHECK(ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclUint8, ncclMax,
                                      comm_, native_));
        break;
    }
  }

  // Called with mutex_ held: drops the collectives that finished (in stream order, from the front).
  void retire_finished() {
    while (!in_flight_.empty() && cudaEventQuery(events_[in_flight_.front().slot]) == cudaSuccess) {
      last_done_ = in_flight_.front().info;
      in_flight_.pop_front();
    }
  }

  // Watchdog thread: retires finished collectives; on a timeout, an asynchronous NCCL error or a
  // failed call check, records the report and aborts the communicator.
  void watch() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (failure_->aborted) continue;
      std::string report;
      {
        std::lock_guard lock(mutex_);
        retire_finished();
        ncclResult_t async = ncclSuccess;
        const ncclResult_t status = ncclCommGetAsyncError(comm_, &async);
        if (failure_->failed) {
          report = failure_->get();
        } else if (status != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
          report = describe_failure(std::string("NCCL reported ") +
                                    ncclGetErrorString(status != ncclSuccess ? status : async));
        } else if (!in_flight_.empty() && Clock::now() - in_flight_.front().issued > timeout()) {
          report = describe_failure({});
        }
      }
      if (report.empty()) continue;
      failure_->set(report);
      std::lock_guard abort_lock(abort_mutex_);
      ncclCommAbort(comm_);
      failure_->aborted = true;
    }
  }

  // Called with mutex_ held. NCCL offers no side channel to ask the peers what they are doing
  // while a collective is stuck, so the report says what this rank knows.
  std::string describe_failure(const std::string& failure) const {
    std::ostringstream out;
    const CollectiveInfo& stuck = in_flight_.empty() ? last_done_ : in_flight_.front().info;
    out << "watchdog: NCCL collective " << stuck.to_string();
    if (failure.empty()) {
      out << " timed out after " << std::chrono::duration<double>(timeout()).count() << " s";
    } else {
      out << " failed (" << failure << ")";
    }
    out << " on rank " << rank_ << " of " << world_size_ << "; last finished here: "
        << (last_done_.sequence == 0 ? std::string("none") : last_done_.to_string())
        << "; the NCCL communicator was aborted (ncclCommAbort). A rank that never reached it is "
           "behind (its own watchdog reports where it is); a call check failure names the "
           "disagreeing ranks.\n(The timeout is set by ZERO_COMM_TIMEOUT_S.)";
    return out.str();
  }

  std::unique_ptr<DeviceContext> context_;
  std::shared_ptr<Failure> failure_;
  int device_ = 0;
  int rank_ = 0;
  int world_size_ = 1;
  bool check_calls_ = true;
  ncclComm_t comm_ = nullptr;
  cudaStream_t native_ = nullptr;
  void* device_calls_ = nullptr;
  void* host_calls_ = nullptr;
  void* barrier_scratch_ = nullptr;
  std::array<cudaEvent_t, kSlots> events_{};

  std::mutex abort_mutex_;  // held by enqueue's NCCL calls and by the watchdog's ncclCommAbort
  std::mutex mutex_;        // guards in_flight_, last_done_ and event records against the watchdog
  std::deque<InFlight> in_flight_;
  CollectiveInfo last_done_;
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> detail::make_nccl_runtime_communicator(
    int device, NcclBootstrap bootstrap, const GlooRendezvous& rendezvous, CommOptions options) {
  std::unique_ptr<DeviceContext> context = make_cuda_context(device);  // checks the index
  ZERO_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId id{};
  int rank = 0, world_size = 1;
  if (bootstrap == NcclBootstrap::kMpi) {
    // The MPI communicator (which initialises MPI as the MPI backend does) carries the id.
    std::unique_ptr<Communicator> mpi = make_mpi_communicator(options);
    rank = mpi->rank();
    world_size = mpi->world_size();
    if (rank == 0) ZERO_NCCL_CHECK(ncclGetUniqueId(&id));
    static_assert(sizeof id.internal % sizeof(float) == 0);
    mpi->broadcast(id.internal, id.internal, sizeof id.internal / sizeof(float), DType::kFloat32, 0,
                   "nccl unique id");
    mpi->synchronize();
  } else {
    rank = rendezvous.rank;
    world_size = rendezvous.world_size;
    ZERO_CHECK(rank >= 0 && rank < world_size, "NCCL bootstrap: rank ", rank,
               " is outside world of size ", world_size);
    if (rank == 0) ZERO_NCCL_CHECK(ncclGetUniqueId(&id));
    if (world_size > 1) {
      // The key counts this process's NCCL communicators (the same on every rank).
      static std::atomic<int> generation{0};
      const std::vector<char> shared = detail::share_from_rank0(
          rendezvous, "zero/nccl/" + std::to_string(generation++) + "/",
          std::vector<char>(id.internal, id.internal + sizeof id.internal), options.timeout);
      ZERO_CHECK(shared.size() == sizeof id.internal, "the NCCL unique id from the store has ",
                 shared.size(), " bytes, expected ", sizeof id.internal);
      std::memcpy(id.internal, shared.data(), shared.size());
    }
  }
  return std::make_unique<NcclCommunicator>(std::move(context), device, id, rank, world_size,
                                            options, std::make_shared<Failure>());
}

}  // namespace zero
