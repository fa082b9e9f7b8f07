// Communicator base (sequence numbers, stream ordering), the local backend and the factory.
#include "zero/comm/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "../core/cuda_backend.h"
#include "call_check.h"
#include "nccl_backend.h"
#include "zero/core/abort_hooks.h"
#include "zero/core/cpu_stream.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/logging.h"
#include "zero/core/phase_report.h"

namespace zero {

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "unknown";
}

std::string_view name_of(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kBarrier: return "barrier";
  }
  return "unknown";
}

bool CollectiveInfo::same_call(const CollectiveInfo& other) const {
  return op == other.op && dtype == other.dtype && count == other.count &&
         reduce_op == other.reduce_op && root == other.root && label == other.label;
}

std::string CollectiveInfo::to_string() const {
  std::ostringstream out;
  out << "#" << sequence << " " << name_of(op);
  switch (op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduceScatter:
      out << "(count=" << count << ", " << name_of(dtype) << ", " << name_of(reduce_op) << ")";
      break;
    case CollectiveOp::kAllGather:
      out << "(count=" << count << ", " << name_of(dtype) << ")";
      break;
    case CollectiveOp::kBroadcast:
      out << "(count=" << count << ", " << name_of(dtype) << ", root=" << root << ")";
      break;
    case CollectiveOp::kBarrier: break;
  }
  if (!label.empty()) out << " '" << label << "'";
  return out.str();
}

std::string describe_disagreement(int rank, const std::vector<CollectiveInfo>& calls) {
  // Distinct calls in order of first appearance, each with the ranks that made it.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < static_cast<int>(calls.size()); ++r) {
    const std::string call = calls[r].to_string();
    auto group =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == call; });
    if (group == groups.end()) {
      groups.push_back({call, {r}});
    } else {
      group->second.push_back(r);
    }
  }
  std::ostringstream out;
  out << "ranks disagree on collective #" << calls[rank].sequence << " (this is rank " << rank
      << "):";
  for (const auto& [call, ranks] : groups) {
    out << "\n  rank" << (ranks.size() > 1 ? "s " : " ");
    for (std::size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
    out << " called " << call;
  }
  out << "\nEvery rank must call the same collectives in the same order (a rank skipped or added "
         "one, e.g. a data-dependent branch around a unit's gather).";
  return out.str();
}

CommOptions CommOptions::from_environment() {
  CommOptions options;
  if (const char* text = std::getenv("ZERO_COMM_TIMEOUT_S")) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    ZERO_CHECK(end != text && *end == '\0' && seconds > 0, "ZERO_COMM_TIMEOUT_S='", text,
               "' must be a positive number of seconds");
    options.timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
  }
  return options;
}

Communicator::Communicator(CommOptions options, std::unique_ptr<Stream> stream)
    : options_(options),
      stream_(stream ? std::move(stream) : std::make_unique<CpuStream>("communication")) {}

void Communicator::issue(CollectiveInfo info, const void* send, void* recv) {
  info.sequence = ++sequence_;
  if (info.label.size() > kMaxCollectiveLabel) info.label.resize(kMaxCollectiveLabel);
  enqueue(info, send, recv);
}

void Communicator::enqueue(const CollectiveInfo& info, const void* send, void* recv) {
  stream_->submit([this, info, send, recv] {
    const CollectiveReport report(name_of(info.op), info.sequence);  // ZERO_PHASE_DIR's line
    run(info, send, recv);
  });
}

void Communicator::all_reduce(const void* send, void* recv, std::size_t count, DType dtype,
                              ReduceOp op, std::string_view label) {
  issue({0, CollectiveOp::kAllReduce, dtype, count, op, 0, std::string(label)}, send, recv);
}

void Communicator::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                  ReduceOp op, std::string_view label) {
  issue({0, CollectiveOp::kReduceScatter, dtype, recv_count, op, 0, std::string(label)}, send,
        recv);
}

void Communicator::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype,
                              std::string_view label) {
  issue({0, CollectiveOp::kAllGather, dtype, send_count, ReduceOp::kSum, 0, std::string(label)},
        send, recv);
}

void Communicator::broadcast(const void* send, void* recv, std::size_t count, DType dtype, int root,
                             std::string_view label) {
  ZERO_CHECK(root >= 0 && root < world_size(), "broadcast root ", root,
             " is outside world of size ", world_size());
  issue({0, CollectiveOp::kBroadcast, dtype, count, ReduceOp::kSum, root, std::string(label)}, send,
        recv);
}

void Communicator::barrier(std::string_view label) {
  issue({0, CollectiveOp::kBarrier, DType::kFloat32, 0, ReduceOp::kSum, 0, std::string(label)},
        nullptr, nullptr);
}

namespace {

// World of one: every collective is the identity (avg and max of one value are the value), so
// out-of-place calls copy: with memmove for host buffers, through the context for its buffers.
class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(CommOptions options, DeviceContext* context)
      : Communicator(options, context ? context->make_stream("communication") : nullptr),
        context_(context) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "local"; }
  DeviceKind buffers() const override {
    return context_ ? context_->device().kind : DeviceKind::kCpu;
  }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    if (info.op == CollectiveOp::kBarrier || send == recv || info.count == 0) return;
    std::memmove(recv, send, info.count * size_of(info.dtype));
  }
  void enqueue(const CollectiveInfo& info, const void* send, void* recv) override {
    const bool copies = info.op != CollectiveOp::kBarrier && send != recv && info.count > 0;
    if (context_ == nullptr || !copies) return Communicator::enqueue(info, send, recv);
    context_->copy(stream(), send, recv, info.count * size_of(info.dtype));
  }

 private:
  DeviceContext* context_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(CommOptions options, DeviceContext* context) {
  return std::make_unique<LocalCommunicator>(options, context);
}

GlooRendezvous GlooRendezvous::from_environment() {
  const std::map<std::string, std::string> environment = process_environment();
  const LaunchInfo launch = detect_launch(environment);
  GlooRendezvous rendezvous;
  rendezvous.rank = launch.rank;
  rendezvous.world_size = launch.world_size;
  rendezvous.master_addr = launch.master_addr;
  rendezvous.master_port = launch.master_port;
  auto agent = environment.find("TORCHELASTIC_USE_AGENT_STORE");
  rendezvous.agent_store = agent != environment.end() && agent->second == "True";
  if (rendezvous.agent_store) {
    // The prefix torch.distributed's env:// rendezvous gives workers on torchrun's agent store.
    auto restart = environment.find("TORCHELASTIC_RESTART_COUNT");
    rendezvous.key_prefix = "/worker/attempt_" +
                            (restart == environment.end() ? std::string("0") : restart->second) +
                            "/";
  }
  return rendezvous;
}

std::string choose_backend(const LaunchInfo& launch,
                           const std::map<std::string, std::string>& environment,
                           int visible_cuda_devices, DeviceKind buffers) {
  const bool on_cuda = buffers == DeviceKind::kCuda;
  if (on_cuda) {
    ZERO_CHECK(cuda_compiled(), "the collective buffers are on a CUDA device, but ",
               detail::kNoCudaBackend);
    ZERO_CHECK(visible_cuda_devices > 0,
               "the collective buffers are on a CUDA device, but no CUDA device is visible "
               "(CUDA_VISIBLE_DEVICES?)");
  }
  if (auto forced = environment.find("ZERO_COMM_BACKEND"); forced != environment.end()) {
    const std::string& name = forced->second;
    ZERO_CHECK(name == "nccl" || name == "mpi" || name == "gloo" || name == "local",
               "ZERO_COMM_BACKEND='", name, "' is not one of nccl, mpi, gloo, local");
    ZERO_CHECK(name != "local" || launch.world_size == 1, "ZERO_COMM_BACKEND=local, but the ",
               name_of(launch.launcher), " launch has ", launch.world_size, " ranks");
    ZERO_CHECK(name != "nccl" || on_cuda,
               "ZERO_COMM_BACKEND=nccl, but this run's collective buffers are in host memory "
               "(the model runs on the CPU): NCCL takes device buffers only; use mpi, gloo or "
               "local");
    ZERO_CHECK(!on_cuda || name == "nccl", "ZERO_COMM_BACKEND=", name,
               ", but this run's collective buffers are on a CUDA "
               "device: ",
               name, " takes host buffers here; use nccl");
    return name;
  }
  if (on_cuda) return "nccl";
  if (launch.world_size <= 1) return "local";
  switch (launch.launcher) {
    case Launcher::kOpenMpi:
    case Launcher::kPmi: return "mpi";
    case Launcher::kTorchrun:
    case Launcher::kDeepSpeed: return "gloo";
    case Launcher::kSlurm:
      // srun --mpi=pmix / pmi2 starts MPI ranks; plain srun starts processes that meet over Gloo.
      if (environment.contains("PMIX_RANK") || environment.contains("PMI_RANK")) return "mpi";
      return "gloo";
    case Launcher::kNone: break;
  }
  return "local";
}

std::unique_ptr<Communicator> make_communicator(DeviceKind buffers, CommOptions options) {
  const std::map<std::string, std::string> environment = process_environment();
  const LaunchInfo launch = detect_launch(environment);
  const int devices = cuda_device_count();
  const std::string backend = choose_backend(launch, environment, devices, buffers);
  start_phase_report(launch.rank);  // with ZERO_PHASE_DIR, before the rendezvous
  // The buffers' device: this local rank's CUDA device (zero/core/launch.h), or the host.
  const DeviceChoice device =
      buffers == DeviceKind::kCuda
          ? choose_device(launch, devices, /*use_cpu=*/false, environment)
          : DeviceChoice{Device::cpu(), devices > 0 ? std::to_string(devices) +
                                                          " CUDA device(s) visible, host buffers "
                                                          "asked for"
                                                    : "no CUDA device visible"};
  std::unique_ptr<Communicator> communicator;
  if (backend == "nccl") {
    const bool mpi_launch =
        launch.launcher == Launcher::kOpenMpi || launch.launcher == Launcher::kPmi ||
        (launch.launcher == Launcher::kSlurm &&
         (environment.contains("PMIX_RANK") || environment.contains("PMI_RANK")));
    communicator = make_nccl_communicator(device.device.index,
                                          mpi_launch ? NcclBootstrap::kMpi : NcclBootstrap::kStore,
                                          GlooRendezvous::from_environment(), options);
  } else if (backend == "mpi") {
    communicator = make_mpi_communicator(options);
  } else if (backend == "gloo") {
    communicator = make_gloo_communicator(GlooRendezvous::from_environment(), options);
  } else {
    communicator = make_local_communicator(options);
  }
  set_log_rank(communicator->rank(), communicator->world_size());
  log_info("launch: ", name_of(launch.launcher), ", backend ", communicator->backend(),
           ", world size ", communicator->world_size(), ", ", launch.local_world_size,
           " rank(s) per node, device ", device.describe(), ", collective buffers in ",
           buffers == DeviceKind::kCuda ? "device" : "host", " memory");
  return communicator;
}

}  // namespace zero

#ifndef ZERO_WITH_MPI
namespace zero {

std::unique_ptr<Communicator> make_mpi_communicator(CommOptions) {
  ZERO_THROW(
      "this build of zero has no MPI support (configure with -DZERO_WITH_MPI=ON and "
      "libopenmpi-dev installed)");
}

void abort_job(int exit_code) {
  run_abort_hooks();  // e.g. the NVMe swap files of this process (no destructors run)
  detail::abort_gloo_peers(exit_code);
  std::_Exit(exit_code);
}

void finalize_communication() {}

}  // namespace zero
#endif

#ifndef ZERO_WITH_GLOO
namespace zero {

namespace detail {
void abort_gloo_peers(int) {}
}  // namespace detail

std::unique_ptr<Communicator> make_gloo_communicator(const GlooRendezvous&, CommOptions) {
  ZERO_THROW(
      "this build of zero has no Gloo support (install libgloo-dev, scripts/setup.sh, and "
      "configure with -DZERO_WITH_GLOO=ON); launch with mpirun instead");
}

}  // namespace zero
#endif

namespace zero {
namespace {
detail::NcclFactory registered_nccl_factory = nullptr;  // constant-initialised
}  // namespace

void detail::register_nccl_factory(NcclFactory factory) { registered_nccl_factory = factory; }

std::unique_ptr<Communicator> make_nccl_communicator(int device, NcclBootstrap bootstrap,
                                                     const GlooRendezvous& rendezvous,
                                                     CommOptions options) {
  ZERO_CHECK(registered_nccl_factory, "NCCL communicator on cuda:", device, ": ",
             detail::kNoCudaBackend);
  return registered_nccl_factory(device, bootstrap, rendezvous, options);
}

}  // namespace zero
