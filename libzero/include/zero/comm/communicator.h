// Collective communication between the ranks of a job, ordered on a communication stream.
//
// Contract, as NCCL's: every rank of the communicator calls the same collectives in the same
// order with the same count, dtype, reduce op and root. Each call is numbered (its sequence
// number, from 1) and enqueued on the communicator's stream; it returns at once. Buffers must stay
// valid and unmodified until the stream has run the collective (record an event on stream() and
// wait for it, or synchronize()). A collective that does not complete within the watchdog timeout
// fails with an error that names it, its sequence number and what every other rank is doing
// (which ranks are behind, or called a different collective in its place).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zero/core/device.h"
#include "zero/core/dtype.h"
#include "zero/core/stream.h"

namespace zero {

struct LaunchInfo;    // zero/core/launch.h
class DeviceContext;  // zero/core/device_context.h

enum class ReduceOp : std::uint8_t { kSum, kAvg, kMax };
enum class CollectiveOp : std::uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kBarrier
};

std::string_view name_of(ReduceOp op);      // "sum", "avg", "max"
std::string_view name_of(CollectiveOp op);  // "all_reduce", ...

// A collective's label: what the caller does with it ("gather h.3"), at most this many bytes
// (longer labels are cut). It travels with the call check, so ranks that issue the same op and
// count for different purposes (two units of one size) are told apart, and error reports say what
// each rank was doing.
inline constexpr std::size_t kMaxCollectiveLabel = 31;

// What one collective call was: enough to tell two ranks' calls apart.
struct CollectiveInfo {
  std::uint64_t sequence = 0;  // 1 for the communicator's first collective
  CollectiveOp op = CollectiveOp::kBarrier;
  DType dtype = DType::kFloat32;
  std::size_t count =
      0;  // elements: per rank's output for reduce_scatter, per rank's input for all_gather
  ReduceOp reduce_op = ReduceOp::kSum;
  int root = 0;
  std::string label;  // at most kMaxCollectiveLabel bytes
  // Same call: op, dtype, count, reduce op, root and label agree (sequence is not compared).
  bool same_call(const CollectiveInfo& other) const;
  std::string to_string() const;  // "#3 all_reduce(count=22, fp32, sum) 'grads h.1'"
};

// The error text for ranks whose calls of one sequence number differ: each distinct call with the
// ranks that made it. `calls[r]` is rank r's call; `rank` is the rank reporting.
std::string describe_disagreement(int rank, const std::vector<CollectiveInfo>& calls);

struct CommOptions {
  // How long one collective may wait for its peers before the watchdog reports it.
  // ZERO_COMM_TIMEOUT_S in the environment overrides the default.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  static CommOptions from_environment();
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string_view backend() const = 0;  // "local", "thread", "mpi", "gloo", "nccl", ...
  // Where the buffers handed to the collectives must live: host memory (kCpu: local, thread, mpi,
  // gloo, planning) or the memory of a CUDA device (kCuda: nccl). A caller with host values and a
  // device communicator stages them through device buffers.
  virtual DeviceKind buffers() const { return DeviceKind::kCpu; }
  // False when collectives are only recorded (PlanningCommunicator): buffers are never touched,
  // so a plan may issue them on buffers without memory.
  virtual bool moves_data() const { return true; }

  // Every collective takes an optional label (see kMaxCollectiveLabel); ranks must pass the same.
  // recv[i] = op over ranks of send[i], `count` elements. send == recv is in place.
  void all_reduce(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                  std::string_view label = {});
  // send holds world_size × recv_count elements; rank r receives the reduction of block r.
  // In place when recv == send + rank·recv_count (NCCL's convention) or send == recv.
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op, std::string_view label = {});
  // recv (world_size × send_count elements) gets every rank's send block in rank order.
  // In place when send == recv + rank·send_count.
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                  std::string_view label = {});
  // recv on every rank gets root's send (send is read on root only; send == recv allowed).
  void broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                 std::string_view label = {});
  void barrier(std::string_view label = {});

  // The communication stream every collective runs on, in call order: a Stream of the device
  // layer (a CPU worker stream unless the backend supplies its own), which the engine orders
  // against its compute and copy streams with events.
  Stream& stream() { return *stream_; }
  // Waits for every collective issued so far; rethrows the first failure.
  void synchronize() { stream_->synchronize(); }
  // Collectives issued so far (the last one's sequence number).
  std::uint64_t sequence() const { return sequence_; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }

 protected:
  // `stream` null: a CPU worker stream named "communication".
  explicit Communicator(CommOptions options, std::unique_ptr<Stream> stream = nullptr);
  // Runs one collective to completion on the communication stream's thread; throws zero::Error
  // on failure or timeout. `info.count` and the pointers are as the public call received them.
  virtual void run(const CollectiveInfo& info, const void* send, void* recv) = 0;
  // Puts one numbered collective on the communication stream; returns at once. The default
  // submits run() as a host task of the stream (CPU worker thread, or a CUDA host function). A
  // backend whose collectives are themselves stream work (NCCL kernels on a CUDA stream)
  // overrides it to enqueue them from the calling thread.
  virtual void enqueue(const CollectiveInfo& info, const void* send, void* recv);

 private:
  void issue(CollectiveInfo info, const void* send, void* recv);

  CommOptions options_;
  std::uint64_t sequence_ = 0;
  std::unique_ptr<Stream> stream_;
};

// A world of one: every collective is a copy. Without `context` the buffers are host memory and
// the copies run on a CPU worker stream; with it, the buffers are `context`'s (device pointers
// under CUDA), the stream is one of its streams and the copies are its copy operation. `context`
// must outlive the communicator.
std::unique_ptr<Communicator> make_local_communicator(
    CommOptions options = CommOptions::from_environment(), DeviceContext* context = nullptr);

// MPI over MPI_COMM_WORLD (duplicated). Initialises MPI with MPI_THREAD_MULTIPLE if the process
// has not; if it has, requires that level. Throws zero::Error when built without MPI.
std::unique_ptr<Communicator> make_mpi_communicator(
    CommOptions options = CommOptions::from_environment());

// Where a Gloo communicator meets its peers: a TCPStore at master_addr:master_port.
struct GlooRendezvous {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  // torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True): every rank connects to it, keys
  // under key_prefix ("/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/"). Otherwise rank 0 hosts
  // the store on master_port.
  bool agent_store = false;
  std::string key_prefix;
  // From the launch environment (detect_launch, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*).
  static GlooRendezvous from_environment();
};

// Gloo over TCP (processes started without MPI: torchrun, srun without PMI, environment set by
// hand). Throws zero::Error when built without Gloo or when the rendezvous fails.
std::unique_ptr<Communicator> make_gloo_communicator(
    const GlooRendezvous& rendezvous = GlooRendezvous::from_environment(),
    CommOptions options = CommOptions::from_environment());

// How an NCCL communicator's ranks share NCCL's unique id: rank 0 creates it and sends it over
// MPI_COMM_WORLD (kMpi), or puts it in the launcher's TCPStore at MASTER_ADDR:MASTER_PORT (kStore:
// torchrun, Slurm without PMI; the store as for Gloo, GlooRendezvous).
enum class NcclBootstrap : std::uint8_t { kMpi, kStore };

// NCCL over CUDA device `device` (one GPU per rank; NCCL refuses two ranks on one GPU). The
// communication stream is a CUDA stream of that device's DeviceContext; collectives take device
// pointers and are enqueued on it as NCCL kernels, in call order. Each collective is preceded by
// the call check (its 64-byte description all-gathered through NCCL, checked on the stream by the
// same code as MPI's and Gloo's); a watchdog thread polls ncclCommGetAsyncError and the timeout
// and calls ncclCommAbort on failure, after which synchronize() throws the report. Throws
// zero::Error in a program without zero::cuda, or with kMpi when built without MPI.
std::unique_ptr<Communicator> make_nccl_communicator(
    int device, NcclBootstrap bootstrap,
    const GlooRendezvous& rendezvous = GlooRendezvous::from_environment(),
    CommOptions options = CommOptions::from_environment());

// Which backend make_communicator picks for a launch whose collective buffers live on `buffers`.
// The communicator always matches where the buffers are: for CUDA buffers "nccl" (any launcher,
// any world size; the build must have CUDA and NCCL and `visible_cuda_devices` > 0, else an
// error); for host buffers "mpi" under an MPI launcher (mpirun, srun with PMI/PMIx), "gloo" under
// torchrun or Slurm without PMI, "local" for one rank, whatever GPUs are visible.
// ZERO_COMM_BACKEND=nccl|mpi|gloo|local overrides the choice among the backends for those
// buffers; naming one for the other kind of memory (nccl for host buffers, mpi/gloo for CUDA
// buffers) is an error that says so.
std::string choose_backend(const LaunchInfo& launch,
                           const std::map<std::string, std::string>& environment,
                           int visible_cuda_devices, DeviceKind buffers);

// The communicator the launch calls for with collective buffers on `buffers` (choose_backend), with
// one log line naming the launcher, backend, world size, ranks per node, the device and where the
// buffers live. NCCL drives this local rank's device, choose_device (zero/core/launch.h).
std::unique_ptr<Communicator> make_communicator(
    DeviceKind buffers, CommOptions options = CommOptions::from_environment());

// Ends every rank of the job: runs this process's abort hooks (zero/core/abort_hooks.h), then
// MPI_Abort when MPI is running (so no peer is left waiting in a collective), otherwise exit.
// Never returns.
[[noreturn]] void abort_job(int exit_code);

// Finalises MPI if zero initialised it; call once at the end of main on every rank.
void finalize_communication();

}  // namespace zero
