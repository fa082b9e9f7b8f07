// The NCCL communicator on device buffers: the collective checks (collective_checks.h) through a
// staging communicator that copies each call's host buffers to the GPU, runs the NCCL collective
// there and copies the result back. At world 1 (plain process) and under mpirun when every rank
// has its own GPU; skips when the GPUs are missing (labelled cuda).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "collective_checks.h"
#include "zero/comm/communicator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"

namespace zero {
namespace {

void cuda_check(cudaError_t status, const char* what) {
  ZERO_CHECK(status == cudaSuccess, what, " failed: ", cudaGetErrorString(status));
}

// Host-buffer collectives over a device-buffer communicator: every call stages its buffers
// through cudaMalloc'd memory (one region when send and recv overlap, so in-place stays in place).
class StagedCommunicator final : public Communicator {
 public:
  StagedCommunicator(std::unique_ptr<Communicator> device, int device_index)
      : Communicator(CommOptions::from_environment()),
        device_(std::move(device)),
        device_index_(device_index) {}
  int rank() const override { return device_->rank(); }
  int world_size() const override { return device_->world_size(); }
  std::string_view backend() const override { return device_->backend(); }

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override {
    cuda_check(cudaSetDevice(device_index_), "cudaSetDevice");  // this worker thread's device
    const std::size_t element = size_of(info.dtype), world = world_size();
    std::size_t in = info.count * element, out = in;
    if (info.op == CollectiveOp::kReduceScatter) in *= world;
    if (info.op == CollectiveOp::kAllGather) out *= world;
    if (info.op == CollectiveOp::kBarrier) in = out = 0;
    const char* s = static_cast<const char*>(send);
    char* r = static_cast<char*>(recv);
    char* device_send = nullptr;
    char* device_recv = nullptr;
    std::vector<void*> owned;
    auto stage = [&](const char* host, std::size_t bytes) -> char* {
      if (host == nullptr || bytes == 0) return nullptr;
      void* device = nullptr;
      cuda_check(cudaMalloc(&device, bytes), "cudaMalloc");
      owned.push_back(device);
      cuda_check(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
      return static_cast<char*>(device);
    };
    const bool overlap = s != nullptr && r != nullptr && s < r + out && r < s + in;
    if (overlap) {
      const char* low = std::min<const char*>(s, r);
      const char* high = std::max<const char*>(s + in, r + out);
      char* base = stage(low, high - low);
      device_send = base + (s - low);
      device_recv = base + (r - low);
    } else {
      device_send = stage(s, in);
      device_recv = stage(r, out);
    }
    try {
      switch (info.op) {
        case CollectiveOp::kAllReduce:
          device_->all_reduce(device_send, device_recv, info.count, info.dtype, info.reduce_op,
                              info.label);
          break;
        case CollectiveOp::kReduceScatter:
          device_->reduce_scatter(device_send, device_recv, info.count, info.dtype, info.reduce_op,
                                  info.label);
          break;
        case CollectiveOp::kAllGather:
          device_->all_gather(device_send, device_recv, info.count, info.dtype, info.label);
          break;
        case CollectiveOp::kBroadcast:
          device_->broadcast(device_send, device_recv, info.count, info.dtype, info.root,
                             info.label);
          break;
        case CollectiveOp::kBarrier: device_->barrier(info.label); break;
      }
      device_->synchronize();
      if (device_recv != nullptr && out > 0)
        cuda_check(cudaMemcpy(r, device_recv, out, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
    } catch (...) {
      for (void* device : owned) cudaFree(device);
      throw;
    }
    for (void* device : owned) cudaFree(device);
  }

 private:
  std::unique_ptr<Communicator> device_;
  int device_index_;
};

// One GPU per rank: skips unless this node has a device for each of its ranks.
bool have_gpus() {
  const LaunchInfo launch = detect_launch();
  return cuda_device_count() >= std::max(1, launch.local_world_size);
}

std::unique_ptr<Communicator> make_nccl() {
  const LaunchInfo launch = detect_launch();
  const NcclBootstrap bootstrap =
      launch.world_size > 1 ? NcclBootstrap::kMpi : NcclBootstrap::kStore;
  return std::make_unique<StagedCommunicator>(make_nccl_communicator(launch.local_rank, bootstrap),
                                              launch.local_rank);
}

Communicator& world() {
  static std::unique_ptr<Communicator> communicator = make_nccl();
  return *communicator;
}

#define SKIP_WITHOUT_GPUS()                                                                 \
  if (!have_gpus())                                                                         \
  GTEST_SKIP() << "needs one CUDA device per rank (" << cuda_device_count() << " visible, " \
               << detect_launch().local_world_size << " rank(s) on this node)"

TEST(NcclCommunicator, KnowsItsPlace) {
  SKIP_WITHOUT_GPUS();
  const LaunchInfo launch = detect_launch();
  EXPECT_EQ(world().rank(), launch.rank);
  EXPECT_EQ(world().world_size(), launch.world_size);
  EXPECT_EQ(world().backend(), "nccl");
}

TEST(NcclCommunicator, EveryCollectiveMatchesReference) {
  SKIP_WITHOUT_GPUS();
  testing::check_every_collective(world());
}

TEST(NcclCommunicator, RandomFloatAllReduceIsCloseToSerialSum) {
  SKIP_WITHOUT_GPUS();
  testing::check_random_float_average(world());
}

TEST(NcclCommunicator, ManySmallCollectivesKeepOrder) {
  SKIP_WITHOUT_GPUS();
  testing::check_many_small_collectives_keep_order(world());
}

TEST(NcclCommunicator, LabelsTellSameShapedCallsApartOnEveryRank) {
  SKIP_WITHOUT_GPUS();
  if (world().world_size() < 2) GTEST_SKIP() << "a disagreement needs two ranks";
  testing::check_labels_tell_calls_apart(make_nccl, world());
}

TEST(NcclCommunicator, TakesDeviceBuffers) {
  SKIP_WITHOUT_GPUS();
  const LaunchInfo launch = detect_launch();
  auto nccl = make_nccl_communicator(
      launch.local_rank, launch.world_size > 1 ? NcclBootstrap::kMpi : NcclBootstrap::kStore);
  EXPECT_EQ(nccl->buffers(), DeviceKind::kCuda);
}

// The world of one on a CUDA context copies device buffers through the context (memmove on
// device pointers would crash): every collective through the staging communicator.
TEST(LocalCommunicator, CopiesDeviceBuffersThroughItsContext) {
  if (detect_launch().world_size > 1) GTEST_SKIP() << "a world of one";
  SKIP_WITHOUT_GPUS();
  std::unique_ptr<DeviceContext> context = make_cuda_context(0);
  auto local = make_local_communicator(CommOptions::from_environment(), context.get());
  EXPECT_EQ(local->buffers(), DeviceKind::kCuda);
  StagedCommunicator staged(std::move(local), 0);
  testing::check_every_collective(staged, 1023);
}

TEST(NcclCommunicator, RejectsADeviceThatDoesNotExist) {
  SKIP_WITHOUT_GPUS();
  EXPECT_THROW(make_nccl_communicator(cuda_device_count(), NcclBootstrap::kStore), Error);
}

}  // namespace
}  // namespace zero
