// `zero env`: what launched this process, what this build supports, what devices it sees.
#include <iostream>

#include "cli.h"
#include "commands.h"
#include "zero/comm/communicator.h"
#include "zero/core/device.h"
#include "zero/core/launch.h"
#include "zero/version.h"
#ifdef ZERO_WITH_CUDA
#include "zero/core/cuda_ops.h"
#endif

namespace zero::cli {

int run_env(std::span<char* const> args) {
  po::options_description options("Options");
  options.add_options()("help,h", "print this help")(
      "check_comm", "also run an all_reduce over every rank and print the result");
  const auto variables = parse(args, options);
  if (variables.count("help")) {
    std::cout << usage(
        "env", "Prints the launch environment, the build's features and the devices.", options);
    return 0;
  }
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
  if (variables.count("check_comm")) {
    auto communicator = make_communicator();
    float value = static_cast<float>(communicator->rank() + 1);
    communicator->all_reduce(&value, &value, 1, DType::kFloat32, ReduceOp::kSum);
    communicator->synchronize();
    const int world = communicator->world_size();
    std::cout << "comm: " << communicator->backend() << " rank " << communicator->rank() << "/"
              << world << ": all_reduce(sum of rank+1) = " << value << " (expected "
              << world * (world + 1) / 2 << ")\n";
  }
  return 0;
}

}  // namespace zero::cli
