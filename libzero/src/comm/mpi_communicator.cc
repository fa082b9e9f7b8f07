// The MPI communicator: nonblocking MPI collectives polled on the communication stream, a call
// check before each collective, and a watchdog that explains a stalled collective.
//
// Every collective runs in two parts. First the ranks all-gather a 64-byte description
// (call_check.h) of the call (sequence number, op, dtype, count, reduce op, root) on a separate
// communicator, so ranks that called different collectives are told so at once, by name, instead of
// matching each other's messages. Then the data collective runs. Either part that waits longer than
// the timeout asks every other rank's status thread what it is doing and throws an error listing
// who is behind.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "call_check.h"
#include "reduce.h"
#include "zero/comm/communicator.h"
#include "zero/core/abort_hooks.h"
#include "zero/core/error.h"

namespace zero {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTagStatusRequest = 1;
constexpr int kTagStatusReply = 2;

bool g_zero_initialized_mpi = false;

void check_mpi(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  ZERO_THROW("MPI call ", what, " failed: ", std::string(text, length));
}
#define ZERO_MPI_CHECK(call) check_mpi((call), #call)

// bf16 and fp16 travel as 2-byte opaque types with user-defined sum and max.
MPI_Datatype g_bf16_type = MPI_DATATYPE_NULL;
MPI_Datatype g_fp16_type = MPI_DATATYPE_NULL;
MPI_Op g_half_sum = MPI_OP_NULL;
MPI_Op g_half_max = MPI_OP_NULL;

template <bool kMax>
void half_reduce(void* in, void* inout, int* length, MPI_Datatype* type) {
  const bool bf16 = *type == g_bf16_type;
  auto* a = static_cast<std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *length; ++i) {
    const float x = bf16 ? to_float(BFloat16{a[i]}) : to_float(Float16{a[i]});
    const float y = bf16 ? to_float(BFloat16{b[i]}) : to_float(Float16{b[i]});
    const float r = kMax ? std::max(x, y) : x + y;
    b[i] = bf16 ? to_bf16(r).bits : to_fp16(r).bits;
  }
}

void create_half_types() {
  if (g_bf16_type != MPI_DATATYPE_NULL) return;
  ZERO_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &g_bf16_type));
  ZERO_MPI_CHECK(MPI_Type_commit(&g_bf16_type));
  ZERO_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &g_fp16_type));
  ZERO_MPI_CHECK(MPI_Type_commit(&g_fp16_type));
  ZERO_MPI_CHECK(MPI_Op_create(&half_reduce<false>, /*commute=*/1, &g_half_sum));
  ZERO_MPI_CHECK(MPI_Op_create(&half_reduce<true>, /*commute=*/1, &g_half_max));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kBFloat16: return g_bf16_type;
    case DType::kFloat16: return g_fp16_type;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(DType dtype, ReduceOp op) {
  const bool max = op == ReduceOp::kMax;
  if (dtype == DType::kFloat32) return max ? MPI_MAX : MPI_SUM;
  return max ? g_half_max : g_half_sum;
}

using detail::CallState;
using detail::WireCall;
using detail::WireStatus;

class MpiCommunicator;

// Communicators still alive when MPI_Finalize runs are shut down by it (an attribute delete
// callback on MPI_COMM_SELF, which MPI runs first thing in MPI_Finalize), so a communicator that
// outlives MPI (a static, say) never calls MPI afterwards.
std::mutex g_live_mutex;
std::vector<MpiCommunicator*> g_live;
void register_finalize_hook();

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(CommOptions options) : Communicator(options) {
    ZERO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &data_comm_));
    ZERO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &check_comm_));
    ZERO_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &status_comm_));
    ZERO_MPI_CHECK(MPI_Comm_rank(data_comm_, &rank_));
    ZERO_MPI_CHECK(MPI_Comm_size(data_comm_, &world_size_));
    create_half_types();
    const char* check = std::getenv("ZERO_COMM_CHECK");
    check_calls_ = check == nullptr || std::string(check) != "0";
    status_thread_ = std::thread([this] { answer_status_requests(); });
    register_finalize_hook();
    std::lock_guard lock(g_live_mutex);
    g_live.push_back(this);
  }

  ~MpiCommunicator() override {
    {
      std::lock_guard lock(g_live_mutex);
      std::erase(g_live, this);
    }
    if (!shut_down_) {
      try {
        synchronize();
      } catch (...) {
        // The failure was reported to whoever synchronized; a destructor cannot rethrow it.
      }
    }
    shut_down();
  }

  // Stops the status thread and frees the MPI communicators; idempotent.
  void shut_down() noexcept {
    if (shut_down_) return;
    shut_down_ = true;
    stop_ = true;
    status_thread_.join();
    MPI_Comm_free(&status_comm_);
    MPI_Comm_free(&check_comm_);
    MPI_Comm_free(&data_comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "mpi"; }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    state_.begin(info);
    if (check_calls_) check_same_call(info);
    run_data(info, send, recv);
    state_.end();
  }

 private:
  void check_same_call(const CollectiveInfo& info) {
    const WireCall mine = detail::to_wire(info);
    std::vector<WireCall> calls(world_size_);
    MPI_Request request;
    ZERO_MPI_CHECK(MPI_Iallgather(&mine, sizeof mine, MPI_BYTE, calls.data(), sizeof mine, MPI_BYTE,
                                  check_comm_, &request));
    wait(request, info, "waiting for every rank to reach it");
    detail::check_calls_agree(rank_, info, calls);
  }

  void run_data(const CollectiveInfo& info, const void* send, void* recv) {
    ZERO_CHECK(info.count <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
               "collective ", info.to_string(),
               ": MPI counts are limited to 2^31-1 elements per "
               "call; split the buffer into buckets");
    const int count = static_cast<int>(info.count);
    const std::size_t bytes = info.count * size_of(info.dtype);
    const MPI_Datatype type = mpi_type(info.dtype);
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<char> staging;
    switch (info.op) {
      case CollectiveOp::kAllReduce:
        ZERO_MPI_CHECK(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, count, type,
                                      mpi_op(info.dtype, info.reduce_op), data_comm_, &request));
        break;
      case CollectiveOp::kReduceScatter: {
        // MPI's in-place form reads the whole input from recv; NCCL's (recv inside send) does not
        // fit it, so in-place calls go through a staging copy of the input.
        const void* input = send;
        if (static_cast<const char*>(recv) >= static_cast<const char*>(send) &&
            static_cast<const char*>(recv) < static_cast<const char*>(send) + bytes * world_size_) {
          staging.assign(static_cast<const char*>(send),
                         static_cast<const char*>(send) + bytes * world_size_);
          input = staging.data();
        }
        ZERO_MPI_CHECK(MPI_Ireduce_scatter_block(
            input, recv, count, type, mpi_op(info.dtype, info.reduce_op), data_comm_, &request));
        break;
      }
      case CollectiveOp::kAllGather: {
        const bool in_place = send == static_cast<const char*>(recv) + rank_ * bytes;
        ZERO_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : send, count, type, recv, count,
                                      type, data_comm_, &request));
        break;
      }
      case CollectiveOp::kBroadcast:
        if (rank_ == info.root && send != recv && bytes > 0) std::memcpy(recv, send, bytes);
        ZERO_MPI_CHECK(MPI_Ibcast(recv, count, type, info.root, data_comm_, &request));
        break;
      case CollectiveOp::kBarrier: ZERO_MPI_CHECK(MPI_Ibarrier(data_comm_, &request)); break;
    }
    wait(request, info, "during the data transfer");
    if (info.reduce_op == ReduceOp::kAvg &&
        (info.op == CollectiveOp::kAllReduce || info.op == CollectiveOp::kReduceScatter)) {
      detail::divide(recv, info.dtype, info.count, world_size_);
    }
  }

  // Polls `request` until it completes or the timeout passes; on timeout, throws the report.
  void wait(MPI_Request& request, const CollectiveInfo& info, const char* phase) {
    const auto start = Clock::now();
    const auto deadline = start + timeout();
    while (true) {
      int done = 0;
      ZERO_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      const auto now = Clock::now();
      if (now >= deadline) break;
      // Nonblocking MPI collectives progress only inside MPI calls, so poll continuously (as a
      // blocking MPI call would), yielding the core to compute threads between polls. A wait that
      // lasts beyond a second is a peer that is late, not a transfer: poll slowly then.
      if (now - start < std::chrono::seconds(1))
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    throw_timeout(info, phase);
  }

  [[noreturn]] void throw_timeout(const CollectiveInfo& info, const char* phase) {
    // Ask every other rank's status thread what its rank is doing.
    std::vector<WireStatus> statuses(world_size_);
    std::vector<MPI_Request> requests;
    std::vector<int> answered(world_size_, 0);
    std::uint64_t ask = info.sequence;
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      MPI_Request send_request, recv_request;
      MPI_Isend(&ask, 1, MPI_UINT64_T, r, kTagStatusRequest, status_comm_, &send_request);
      MPI_Request_free(&send_request);
      MPI_Irecv(&statuses[r], sizeof(WireStatus), MPI_BYTE, r, kTagStatusReply, status_comm_,
                &recv_request);
      requests.push_back(recv_request);
    }
    const auto deadline = Clock::now() + detail::kStatusAnswerWait;
    while (Clock::now() < deadline) {
      bool all = true;
      int index = 0;
      for (int r = 0; r < world_size_; ++r) {
        if (r == rank_) continue;
        if (!answered[r]) MPI_Test(&requests[index], &answered[r], MPI_STATUS_IGNORE);
        all = all && answered[r];
        ++index;
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ZERO_THROW(
        detail::watchdog_report(info, rank_, world_size_, timeout(), phase, statuses, answered));
  }

  // Status thread: answers every status request with what this rank is doing. Runs beside the
  // communication stream, so a rank stuck in computation still answers.
  void answer_status_requests() {
    std::uint64_t asked = 0;
    MPI_Request request;
    MPI_Status status;
    MPI_Irecv(&asked, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kTagStatusRequest, status_comm_, &request);
    while (!stop_) {
      int done = 0;
      MPI_Test(&request, &done, &status);
      if (!done) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        continue;
      }
      const WireStatus reply = state_.status();
      MPI_Send(&reply, sizeof reply, MPI_BYTE, status.MPI_SOURCE, kTagStatusReply, status_comm_);
      MPI_Irecv(&asked, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kTagStatusRequest, status_comm_, &request);
    }
    MPI_Cancel(&request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }

  MPI_Comm data_comm_ = MPI_COMM_NULL;
  MPI_Comm check_comm_ = MPI_COMM_NULL;
  MPI_Comm status_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_size_ = 1;
  bool check_calls_ = true;

  CallState state_;

  std::atomic<bool> stop_{false};
  bool shut_down_ = false;
  std::thread status_thread_;
};

int shut_down_live_communicators(MPI_Comm, int, void*, void*) {
  std::lock_guard lock(g_live_mutex);
  for (MpiCommunicator* communicator : g_live) communicator->shut_down();
  return MPI_SUCCESS;
}

void register_finalize_hook() {
  static const bool registered = [] {
    int keyval = MPI_KEYVAL_INVALID;
    ZERO_MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &shut_down_live_communicators,
                                          &keyval, nullptr));
    ZERO_MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr));
    // A key still in use is freed when its last attribute is deleted (MPI_Comm_free_keyval):
    // here by MPI_Finalize, after the callback ran. Never freed, it leaked (LeakSanitizer).
    ZERO_MPI_CHECK(MPI_Comm_free_keyval(&keyval));
    return true;
  }();
  (void)registered;
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(CommOptions options) {
  int initialized = 0;
  ZERO_MPI_CHECK(MPI_Initialized(&initialized));
  int provided = 0;
  if (!initialized) {
    ZERO_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
    g_zero_initialized_mpi = true;
  } else {
    ZERO_MPI_CHECK(MPI_Query_thread(&provided));
  }
  ZERO_CHECK(provided >= MPI_THREAD_MULTIPLE, "the MPI library provides thread level ", provided,
             " but zero needs MPI_THREAD_MULTIPLE (", MPI_THREAD_MULTIPLE,
             "): initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
  return std::make_unique<MpiCommunicator>(options);
}

void abort_job(int exit_code) {
  run_abort_hooks();  // e.g. the NVMe swap files of this process (no destructors run)
  detail::abort_gloo_peers(exit_code);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void finalize_communication() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_zero_initialized_mpi && !finalized) MPI_Finalize();
}

}  // namespace zero
