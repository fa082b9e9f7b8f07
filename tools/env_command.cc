// `zero env`: what launched this process, what this build supports, what devices it sees.
#include <cstring>
#include <iostream>

#include "commands.h"
#include "zero/comm/communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/train/cli.h"
#include "zero/version.h"
#ifdef ZERO_WITH_CUDA
#include "zero/core/cuda_ops.h"
#endif

namespace zero::cli {

namespace {

// An all_reduce of rank + 1 over every rank, with its buffer where `communicator` takes buffers:
// host memory, or device memory of `context` (staged through its host allocator).
void check_comm(Communicator& communicator, DeviceContext* context) {
  const int world = communicator.world_size();
  float value = static_cast<float>(communicator.rank() + 1);
  if (context == nullptr) {
    communicator.all_reduce(&value, &value, 1, DType::kFloat32, ReduceOp::kSum, "check_comm");
    communicator.synchronize();
  } else {
    Buffer host =
        context->allocator(MemorySpace::kHost).allocate(sizeof value, MemoryCategory::kCommBuffers);
    Buffer device = context->allocator(MemorySpace::kDevice)
                        .allocate(sizeof value, MemoryCategory::kCommBuffers);
    std::memcpy(host.data(), &value, sizeof value);
    context->copy(context->copy_stream(), host.data(), device.data(), sizeof value);
    context->copy_stream().synchronize();
    communicator.all_reduce(device.data(), device.data(), 1, DType::kFloat32, ReduceOp::kSum,
                            "check_comm");
    communicator.synchronize();
    context->copy(context->copy_stream(), device.data(), host.data(), sizeof value);
    context->copy_stream().synchronize();
    std::memcpy(&value, host.data(), sizeof value);
  }
  const float expected = static_cast<float>(world * (world + 1) / 2);
  std::cout << "comm: " << communicator.backend() << " rank " << communicator.rank() << "/" << world
            << ": all_reduce(sum of rank+1) = " << value << " (expected " << expected << "), "
            << (context ? "device" : "host") << " buffers\n";
  ZERO_CHECK(value == expected, "zero env --check_comm: the all_reduce over ",
             communicator.backend(), " gave ", value, ", expected ", expected);
}

}  // namespace

int run_env(std::span<char* const> args) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help")(
      "check_comm",
      "also run an all_reduce over every rank and print the result: over NCCL with device "
      "buffers on this rank's device (cuda:LOCAL_RANK mod the visible devices) when CUDA "
      "devices are visible, otherwise over the host communicator (mpi, gloo or local)")(
      "use_cpu",
      "choose the CPU even when GPUs are visible (as zero train --use_cpu): --check_comm "
      "then checks the host-memory communicator");
  const auto variables = parse(args, options);
  if (variables.count("help")) {
    std::cout << usage(
        "env", "Prints the launch environment, the build's features and the devices.", options);
    return 0;
  }
  stop_if_parse_only();
  const LaunchInfo launch = detect_launch();
  std::cout << "zero " << kVersion << "\n"
            << "launch: " << launch.describe() << "\n"
            << "cuda: " << (cuda_compiled() ? "compiled in" : "not compiled in") << ", "
            << cuda_device_count() << " device(s) visible\n";
#ifdef ZERO_WITH_CUDA
  std::cout << "cuda driver: " << cuda_driver_version() << "\n"
            << "cuda libraries: " << cuda_library_versions() << "\n";
  for (const CudaDeviceInfo& device : cuda_devices()) std::cout << device.describe() << "\n";
#endif
  const DeviceChoice device = choose_device(variables.count("use_cpu") > 0);
  std::cout << "device: " << device.describe() << "\n";
  if (variables.count("check_comm")) {
    const bool on_cuda = device.device.kind == DeviceKind::kCuda;
    std::unique_ptr<DeviceContext> context;
    if (on_cuda) context = make_device_context(device.device);
    auto communicator = make_communicator(device.device.kind);
    check_comm(*communicator, context.get());
  }
  return 0;
}

}  // namespace zero::cli
