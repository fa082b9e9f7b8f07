#include "zero/comm/host_collectives.h"

#include <cstddef>

#include "zero/core/allocator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/stream.h"

namespace zero {
namespace {

// Host pointers only where the communicator takes host memory and the device's memory is not
// host memory (a CUDA context beside a host communicator); everywhere else the values are staged
// through the device allocator, as every other collective buffer of a run is.
bool takes_host_pointers(const Communicator& communicator, const DeviceContext& context) {
  return communicator.buffers() == DeviceKind::kCpu &&
         !context.host_addressable(MemorySpace::kDevice);
}

// A device buffer of `count` floats holding `source` from float `offset` on.
Buffer stage_in(DeviceContext& context, std::size_t count, std::span<const float> source,
                std::size_t offset) {
  Buffer staging = context.allocator(MemorySpace::kDevice)
                       .allocate(count * sizeof(float), MemoryCategory::kWorkspace);
  Stream& compute = context.compute_stream();
  if (!source.empty())
    context.copy(compute, source.data(), staging.data_as<float>() + offset, source.size_bytes());
  // The collective runs on the communication stream: the copy must have landed first.
  compute.synchronize();
  return staging;
}

void stage_out(DeviceContext& context, const Buffer& staging, std::span<float> destination) {
  Stream& compute = context.compute_stream();
  context.copy(compute, staging.data(), destination.data(), destination.size_bytes());
  compute.synchronize();  // `destination` is host memory the copy writes
}

}  // namespace

void all_reduce_host(Communicator& communicator, DeviceContext& context, std::span<float> values,
                     ReduceOp op, std::string_view label) {
  if (takes_host_pointers(communicator, context)) {
    communicator.all_reduce(values.data(), values.data(), values.size(), DType::kFloat32, op,
                            label);
    communicator.synchronize();
    return;
  }
  Buffer staging = stage_in(context, values.size(), values, 0);
  communicator.all_reduce(staging.data(), staging.data(), values.size(), DType::kFloat32, op,
                          label);
  communicator.synchronize();
  stage_out(context, staging, values);
}

void host_barrier(Communicator& communicator, std::string_view label) {
  communicator.barrier(label);
  communicator.synchronize();
}

void all_gather_host(Communicator& communicator, DeviceContext& context,
                     std::span<const float> send, std::span<float> recv, std::string_view label) {
  const std::size_t world = static_cast<std::size_t>(communicator.world_size());
  ZERO_CHECK(recv.size() == send.size() * world, "all_gather_host (", label, "): recv holds ",
             recv.size(), " values, expected ", send.size(), " x ", world, " ranks");
  if (takes_host_pointers(communicator, context)) {
    communicator.all_gather(send.data(), recv.data(), send.size(), DType::kFloat32, label);
    communicator.synchronize();
    return;
  }
  // In place (NCCL's convention): this rank's block at rank × send.size().
  const std::size_t offset = static_cast<std::size_t>(communicator.rank()) * send.size();
  Buffer staging = stage_in(context, recv.size(), send, offset);
  float* gathered = staging.data_as<float>();
  communicator.all_gather(gathered + offset, gathered, send.size(), DType::kFloat32, label);
  communicator.synchronize();
  stage_out(context, staging, recv);
}

}  // namespace zero
