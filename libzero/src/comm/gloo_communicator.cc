// The Gloo communicator: Gloo's TCP transport for processes started without MPI (torchrun, srun
// without PMI, environment set by hand), with the same call check and watchdog report as MPI.
//
// Rendezvous goes through a TCPStore at MASTER_ADDR:MASTER_PORT (tcp_store.h): torchrun's agent
// store when TORCHELASTIC_USE_AGENT_STORE=True (keys under "/worker/attempt_<restart count>/" as
// PyTorch's own workers use), else a store rank 0 hosts on MASTER_PORT. Each communicator's keys
// live under "zero/comm<k>/" (k counts the process's Gloo communicators, the same on every rank).
//
// Every collective runs in two parts, as in the MPI communicator: an all-gather of the 64-byte
// call description (call_check.h), then the data collective. bf16/fp16 reductions run in fp32
// (staged, reduced, rounded once), as the other CPU communicators do; reduce-scatter is a ring over
// the fp32 staging buffer. A part that times out, or fails because a peer's connection closed
// (a dead rank), asks every rank's status thread through the store what it is doing and throws the
// watchdog report naming the ranks that never reached the collective or did not answer.
#include <arpa/inet.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "call_check.h"
#include "reduce.h"
#include "tcp_store.h"
#include "zero/comm/communicator.h"
#include "zero/core/abort_hooks.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"

namespace zero {
namespace {

using Clock = std::chrono::steady_clock;
using detail::TcpStore;
using detail::WireCall;
using detail::WireStatus;

constexpr std::uint32_t kDataTag = 2;
// The call check's messages: a slot no Gloo collective (prefix << 56 | tag, small prefixes) and no
// Context::nextSlot() counter reaches. Messages between two ranks on one slot arrive in order, and
// a rank's check n + 1 starts after its check n completed, so one slot serves every check.
constexpr std::uint64_t kCheckSlot = (std::uint64_t{0x5a} << 56) | 1;

// gloo::rendezvous::Store over the TCPStore client, every key under `prefix`.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(TcpStore& store, std::string prefix) : store_(store), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(prefix_ + key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(prefix_ + key); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_.timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const std::string& key : keys) full.push_back(prefix_ + key);
    store_.wait(full, timeout);
  }

 private:
  TcpStore& store_;
  std::string prefix_;
};

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// The local address Gloo listens on: GLOO_SOCKET_IFNAME's interface when set (PyTorch's variable),
// else the address this host reaches MASTER_ADDR from.
::gloo::transport::tcp::attr device_attr(const std::string& master_addr) {
  ::gloo::transport::tcp::attr attr;
  if (const char* iface = std::getenv("GLOO_SOCKET_IFNAME"); iface != nullptr && *iface) {
    attr.iface = iface;
    return attr;
  }
  if (is_loopback(master_addr)) {
    attr.hostname = "127.0.0.1";
    return attr;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  ZERO_CHECK(::getaddrinfo(master_addr.c_str(), "9", &hints, &found) == 0 && found != nullptr,
             "MASTER_ADDR='", master_addr, "' does not resolve to an address");
  std::string local;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_storage mine{};
    socklen_t length = sizeof mine;
    char text[INET6_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &length) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&mine), length, text, sizeof text, nullptr, 0,
                      NI_NUMERICHOST) == 0) {
      local = text;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  ZERO_CHECK(!local.empty(), "no local interface reaches MASTER_ADDR='", master_addr,
             "'; set GLOO_SOCKET_IFNAME to the interface to use");
  attr.hostname = local;
  return attr;
}

std::atomic<int> g_gloo_communicators{0};

// The store (and, on rank 0 without an agent store, its server) one process shares among its Gloo
// communicators, kept until the process ends: a second communicator finds rank 0's store where
// the first one did.
// abort_job on one rank sets the job's abort key; every rank's status threads poll it and end
// their processes (as MPI_Abort ends an MPI job).
struct SharedStore {
  std::unique_ptr<detail::TcpStoreServer> server;
  std::unique_ptr<TcpStore> client;
  int rank = 0;
  int world_size = 1;
  std::string abort_key;  // "<key prefix>zero/abort"
  // The ranks that can still see the abort key: the others, less those a watchdog report found
  // dead or hung (they did not answer its status request); a dead rank never acknowledges.
  std::atomic<int> live_peers{0};

  // Sets the abort key and waits (up to 2 s) until the live ranks have seen it: rank 0's store
  // ends with its process.
  void abort_peers(int exit_code) noexcept {
    try {
      client->set(abort_key,
                  std::vector<char>{static_cast<char>(rank & 0x7f), static_cast<char>(exit_code)});
      const auto deadline = Clock::now() + std::chrono::seconds(2);
      while (Clock::now() < deadline && client->add(abort_key + "_seen", 0) < live_peers.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } catch (...) {
      // The store is gone: the peers find out from their connections to this rank.
    }
  }

  // Ends this process when another rank aborted the job.
  void end_if_aborted() {
    if (!client->check({abort_key})) return;
    const std::vector<char> abort = client->get(abort_key);
    const int aborting = abort.empty() ? -1 : abort[0];
    const int code = abort.size() < 2 ? 1 : static_cast<unsigned char>(abort[1]);
    log_error("rank ", aborting, " aborted the job (exit code ", code, "); ending rank ", rank,
              " too");
    client->add(abort_key + "_seen", 1);
    if (server != nullptr) {
      // This process hosts the store: keep it up (up to 5 s) until every other rank has seen the
      // abort, or a rank that polls late (a loaded machine) would find no store and never end.
      const auto deadline = Clock::now() + std::chrono::seconds(5);
      while (Clock::now() < deadline && client->add(abort_key + "_seen", 0) < live_peers.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    run_abort_hooks();  // e.g. the NVMe swap files of this process
    std::_Exit(code);
  }
};

std::mutex g_stores_mutex;
std::map<std::string, std::shared_ptr<SharedStore>> g_stores;

std::shared_ptr<SharedStore> shared_store(const GlooRendezvous& rendezvous,
                                          std::chrono::milliseconds timeout) {
  auto& mutex = g_stores_mutex;
  auto& stores = g_stores;
  const std::string key = rendezvous.master_addr + ":" + std::to_string(rendezvous.master_port) +
                          (rendezvous.agent_store ? " agent" : " hosted");
  std::lock_guard lock(mutex);
  std::shared_ptr<SharedStore>& store = stores[key];
  if (store != nullptr) return store;
  auto made = std::make_shared<SharedStore>();
  if (rendezvous.agent_store) {
    made->client =
        std::make_unique<TcpStore>(rendezvous.master_addr, rendezvous.master_port, timeout);
  } else {
    if (rendezvous.rank == 0)
      made->server = std::make_unique<detail::TcpStoreServer>(rendezvous.master_port);
    made->client = std::make_unique<TcpStore>(
        rendezvous.rank == 0 ? std::string("127.0.0.1") : rendezvous.master_addr,
        rendezvous.master_port, timeout, TcpStore::Protocol::kV2);
  }
  made->rank = rendezvous.rank;
  made->world_size = rendezvous.world_size;
  made->live_peers = rendezvous.world_size - 1;
  made->abort_key = rendezvous.key_prefix + "zero/abort";
  store = made;
  return store;
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(CommOptions options, const GlooRendezvous& rendezvous)
      : Communicator(options),
        rank_(rendezvous.rank),
        world_size_(rendezvous.world_size),
        agent_store_(rendezvous.agent_store) {
    ZERO_CHECK(world_size_ >= 1 && rank_ >= 0 && rank_ < world_size_, "Gloo rendezvous: rank ",
               rank_, " is outside the world of ", world_size_);
    ZERO_CHECK(!rendezvous.master_addr.empty() && rendezvous.master_port > 0,
               "the Gloo communicator needs MASTER_ADDR and MASTER_PORT (the rendezvous store's "
               "address): set both in the environment (torchrun and the sbatch scripts in "
               "configs/slurm do)");
    const auto store_timeout = std::max(timeout(), std::chrono::milliseconds(30'000));
    shared_ = shared_store(rendezvous, store_timeout);
    store_ = shared_->client.get();
    prefix_ = rendezvous.key_prefix + "zero/comm" + std::to_string(g_gloo_communicators++) + "/";
    const char* check = std::getenv("ZERO_COMM_CHECK");
    check_calls_ = check == nullptr || std::string(check) != "0";

    auto device = ::gloo::transport::tcp::CreateDevice(device_attr(rendezvous.master_addr));
    context_ = std::make_shared<::gloo::rendezvous::Context>(rank_, world_size_);
    context_->setTimeout(store_timeout);
    StoreAdapter adapter(*store_, prefix_ + "mesh/");
    try {
      context_->connectFullMesh(adapter, device);
    } catch (const ::gloo::Exception& error) {
      ZERO_THROW("Gloo rendezvous of rank ", rank_, " of ", world_size_, " through the store at ",
                 store_->address(), " failed: ", error.what());
    }
    context_->setTimeout(timeout());
    // Every rank is connected before any collective: the status keys start from here.
    status_thread_ = std::thread([this] { answer_status_requests(); });
  }

  ~GlooCommunicator() override {
    try {
      synchronize();
    } catch (...) {
      // The failure was reported to whoever synchronized; a destructor cannot rethrow it.
    }
    stop_ = true;
    status_thread_.join();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "gloo"; }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    state_.begin(info);
    const auto start = Clock::now();
    const char* phase = "waiting for every rank to reach it";
    try {
      if (check_calls_ && world_size_ > 1) check_same_call(info);
      phase = "during the data transfer";
      run_data(info, send, recv);
    } catch (const ::gloo::Exception& error) {
      throw_report(info, phase, Clock::now() - start, error.what());
    }
    state_.end();
  }

 private:
  // Every rank sends its call description straight to every other rank (one hop, where Gloo's
  // ring all-gather takes world - 1 in sequence): the check costs one message latency.
  void check_same_call(const CollectiveInfo& info) {
    std::vector<WireCall> calls(world_size_);
    calls[rank_] = detail::to_wire(info);
    auto buffer = context_->createUnboundBuffer(calls.data(), calls.size() * sizeof(WireCall));
    for (int r = 0; r < world_size_; ++r) {
      if (r == rank_) continue;
      buffer->recv(r, kCheckSlot, r * sizeof(WireCall), sizeof(WireCall));
      buffer->send(r, kCheckSlot, rank_ * sizeof(WireCall), sizeof(WireCall));
    }
    for (int r = 0; r < world_size_ - 1; ++r) buffer->waitRecv(timeout());
    for (int r = 0; r < world_size_ - 1; ++r) buffer->waitSend(timeout());
    detail::check_calls_agree(rank_, info, calls);
  }

  void run_data(const CollectiveInfo& info, const void* send, void* recv) {
    const std::size_t bytes = info.count * size_of(info.dtype);
    char* out = static_cast<char*>(recv);
    switch (info.op) {
      case CollectiveOp::kAllReduce: all_reduce(info, send, recv); break;
      case CollectiveOp::kReduceScatter: reduce_scatter(info, send, recv); break;
      case CollectiveOp::kAllGather: {
        if (bytes == 0) break;
        ::gloo::AllgatherOptions options(context_);
        if (send != out + rank_ * bytes)
          options.setInput(const_cast<char*>(static_cast<const char*>(send)), bytes);
        options.setOutput(out, bytes * world_size_);
        options.setTag(kDataTag);
        options.setTimeout(timeout());
        ::gloo::allgather(options);
        break;
      }
      case CollectiveOp::kBroadcast: {
        if (rank_ == info.root && send != recv && bytes > 0) std::memcpy(recv, send, bytes);
        if (bytes == 0) break;
        ::gloo::BroadcastOptions options(context_);
        options.setOutput(out, bytes);
        options.setRoot(info.root);
        options.setTag(kDataTag);
        options.setTimeout(timeout());
        ::gloo::broadcast(options);
        break;
      }
      case CollectiveOp::kBarrier: {
        ::gloo::BarrierOptions options(context_);
        options.setTag(kDataTag);
        options.setTimeout(timeout());
        ::gloo::barrier(options);
        break;
      }
    }
  }

  static ::gloo::AllreduceOptions::Func float_reduction(ReduceOp op) {
    using Fn = void (*)(void*, const void*, const void*, std::size_t);
    return op == ReduceOp::kMax ? static_cast<Fn>(&::gloo::max<float>)
                                : static_cast<Fn>(&::gloo::sum<float>);
  }

  static float identity(ReduceOp op) {
    return op == ReduceOp::kMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  }

  void all_reduce(const CollectiveInfo& info, const void* send, void* recv) {
    if (info.count == 0) return;
    ::gloo::AllreduceOptions options(context_);
    options.setReduceFunction(float_reduction(info.reduce_op));
    options.setTag(kDataTag);
    options.setTimeout(timeout());
    if (info.dtype == DType::kFloat32) {
      if (send != recv)
        options.setInput(const_cast<float*>(static_cast<const float*>(send)), info.count);
      options.setOutput(static_cast<float*>(recv), info.count);
      ::gloo::allreduce(options);
      if (info.reduce_op == ReduceOp::kAvg)
        detail::divide(recv, info.dtype, info.count, world_size_);
      return;
    }
    std::vector<float> staging(info.count, identity(info.reduce_op));
    detail::accumulate(staging.data(), send, info.dtype, info.reduce_op, info.count);
    options.setOutput(staging.data(), staging.size());
    ::gloo::allreduce(options);
    detail::finish_reduction(staging.data(), recv, info.dtype, info.reduce_op, world_size_,
                             info.count);
  }

  // Ring reduce-scatter over an fp32 copy of the input: at step s rank r sends its partial sum of
  // block (r - s - 1) to rank r + 1 and adds the partial of block (r - s - 2) from rank r - 1 into
  // its own; after world - 1 steps block r holds every rank's contribution.
  void reduce_scatter(const CollectiveInfo& info, const void* send, void* recv) {
    const std::size_t n = info.count;
    if (n == 0) return;
    const int w = world_size_;
    std::vector<float> partial(n * w, identity(info.reduce_op));
    detail::accumulate(partial.data(), send, info.dtype, info.reduce_op, n * w);
    std::vector<float> incoming(n);
    auto partial_buffer =
        context_->createUnboundBuffer(partial.data(), partial.size() * sizeof(float));
    auto incoming_buffer = context_->createUnboundBuffer(incoming.data(), n * sizeof(float));
    const std::uint64_t slot = static_cast<std::uint64_t>(context_->nextSlot(w));
    const int right = (rank_ + 1) % w, left = (rank_ + w - 1) % w;
    const std::size_t block_bytes = n * sizeof(float);
    for (int step = 0; step < w - 1; ++step) {
      const int outgoing = ((rank_ - step - 1) % w + w) % w;
      const int arriving = ((rank_ - step - 2) % w + w) % w;
      partial_buffer->send(right, slot + step, outgoing * block_bytes, block_bytes);
      incoming_buffer->recv(left, slot + step, 0, block_bytes);
      incoming_buffer->waitRecv(timeout());
      partial_buffer->waitSend(timeout());
      detail::accumulate(partial.data() + arriving * n, incoming.data(), DType::kFloat32,
                         info.reduce_op, n);
    }
    detail::finish_reduction(partial.data() + rank_ * n, recv, info.dtype, info.reduce_op, w, n);
  }

  std::string status_key(std::int64_t request, int rank) const {
    return prefix_ + "status/" + std::to_string(request) + "/" + std::to_string(rank);
  }

  // Status thread: answers every status request (a counter in the store) with what this rank is
  // doing, and ends the process when another rank aborted the job. Runs beside the communication
  // stream, so a rank stuck in computation still answers.
  void answer_status_requests() {
    std::int64_t answered = 0;
    try {
      while (!stop_) {
        shared_->end_if_aborted();
        const std::int64_t asked = store_->add(prefix_ + "status/request", 0);
        for (; answered < asked; ++answered) {
          const WireStatus status = state_.status();
          const char* bytes = reinterpret_cast<const char*>(&status);
          store_->set(status_key(answered + 1, rank_),
                      std::vector<char>(bytes, bytes + sizeof status));
        }
        for (int i = 0; i < 20 && !stop_; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    } catch (const std::exception&) {
      // The store went away (rank 0 ended or died): nobody can ask any more.
    }
  }

  [[noreturn]] void throw_report(const CollectiveInfo& info, const char* phase,
                                 Clock::duration elapsed, const std::string& gloo_error) {
    std::vector<WireStatus> statuses(world_size_);
    std::vector<int> answered(world_size_, 0);
    std::string store_problem;
    try {
      const std::int64_t request = store_->add(prefix_ + "status/request", 1);
      const auto deadline = Clock::now() + detail::kStatusAnswerWait;
      int missing = world_size_ - 1;
      while (missing > 0 && Clock::now() < deadline) {
        for (int r = 0; r < world_size_; ++r) {
          if (r == rank_ || answered[r] || !store_->check({status_key(request, r)})) continue;
          const std::vector<char> bytes = store_->get(status_key(request, r));
          if (bytes.size() != sizeof(WireStatus)) continue;
          std::memcpy(&statuses[r], bytes.data(), sizeof(WireStatus));
          answered[r] = 1;
          --missing;
        }
        if (missing > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      shared_->live_peers = world_size_ - 1 - missing;  // abort_job waits for these only
    } catch (const std::exception& error) {
      store_problem = std::string("; the store at ") + store_->address() +
                      (agent_store_ ? " (torchrun's)" : " (hosted by rank 0)") +
                      " is unreachable: " + error.what();
    }
    // Gloo's own message for a timeout says so; any other failure is reported with its text.
    const bool timed_out = elapsed >= timeout() - std::chrono::milliseconds(50);
    std::string failure;
    if (!timed_out) {
      failure = "Gloo: " + gloo_error.substr(0, gloo_error.find('\n'));
      if (failure.size() > 200) failure.resize(200);
    }
    ZERO_THROW(detail::watchdog_report(info, rank_, world_size_, timeout(), phase, statuses,
                                       answered, failure),
               store_problem);
  }

  int rank_ = 0;
  int world_size_ = 1;
  bool agent_store_ = false;
  bool check_calls_ = true;
  std::shared_ptr<SharedStore> shared_;
  TcpStore* store_ = nullptr;
  std::string prefix_;
  std::shared_ptr<::gloo::rendezvous::Context> context_;
  detail::CallState state_;
  std::atomic<bool> stop_{false};
  std::thread status_thread_;
};

}  // namespace

namespace detail {
void abort_gloo_peers(int exit_code) {
  std::lock_guard lock(g_stores_mutex);
  for (auto& [address, store] : g_stores) store->abort_peers(exit_code);
}
}  // namespace detail

namespace {

// Gloo's TCP transport writes to its peers' sockets without MSG_NOSIGNAL, so a write to a rank
// that died raised SIGPIPE and killed this one before the watchdog could name the dead rank (the
// TSan run of comm_gloo_watchdog_kill_np2 once saw "process 0 killed by signal 13"). Where
// SIGPIPE still has its default action, it is ignored, as Python (so PyTorch's Gloo) does at
// start: the write then fails with EPIPE and Gloo reports the closed connection. A handler the
// program installed is left as it is.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    std::signal(SIGPIPE, SIG_IGN);
}

}  // namespace

std::unique_ptr<Communicator> make_gloo_communicator(const GlooRendezvous& rendezvous,
                                                     CommOptions options) {
  ignore_default_sigpipe();
  return std::make_unique<GlooCommunicator>(options, rendezvous);
}

}  // namespace zero
