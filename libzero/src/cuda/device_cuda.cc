// CUDA device queries, the cudaMalloc/cudaMallocHost allocators, the driver and library versions.
// cuBLASLt and cuDNN are asked through dlopen (zero::core calls neither, so links neither).
#include <cublas_api.h>
#include <cuda_runtime.h>
#include <cudnn_version.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cuda_allocators.h"
#include "cuda_backend_entries.h"
#include "zero/core/allocator.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/device.h"

namespace zero {

int detail::cuda_runtime_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device / no driver" error
    return 0;
  }
  return count;
}

namespace {

// "major.minor.patch" of a version number major·10000 + minor·100 + patch, as cuBLASLt, cuDNN 9
// and NCCL 2.9+ encode it.
std::string dotted(std::size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string((version / 100) % 100) + "." +
         std::to_string(version % 100);
}

// The size_t-returning version function `symbol` of the library the loader finds as `soname`.
std::string loaded_version(const char* soname, const char* symbol, const std::string& headers) {
  void* library = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) return std::string("not found (") + soname + "; headers " + headers + ")";
  std::string result;
  if (auto* function = reinterpret_cast<std::size_t (*)()>(dlsym(library, symbol))) {
    result = dotted(function());
    if (result != headers) result += " (headers " + headers + ")";
  } else {
    result = std::string(soname) + " without " + symbol;
  }
  dlclose(library);
  return result;
}

}  // namespace

std::string cuda_library_versions() {
  std::ostringstream out;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  int nccl = 0;
  ncclGetVersion(&nccl);
  const std::string cublas_headers =
      dotted(CUBLAS_VER_MAJOR * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH);
  const std::string cudnn_headers =
      dotted(CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL);
  const std::string cublas_soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  const std::string cudnn_soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  out << "cuda runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", cublasLt "
      << loaded_version(cublas_soname.c_str(), "cublasLtGetVersion", cublas_headers) << ", cudnn "
      << loaded_version(cudnn_soname.c_str(), "cudnnGetVersion", cudnn_headers) << ", nccl "
      << dotted(static_cast<std::size_t>(nccl));
  return out.str();
}

std::string cuda_driver_version() {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    return "none (no NVIDIA driver loaded)";
  }
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
  std::string module = "kernel module version unknown";
  std::ifstream file("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(file, line)) {
    const std::string marker = "Kernel Module";
    const std::size_t at = line.find(marker);
    if (at != std::string::npos) {
      std::istringstream words(line.substr(at + marker.size()));
      words >> module;
    }
  }
  return module + " (CUDA " + std::to_string(driver / 1000) + "." +
         std::to_string((driver % 1000) / 10) + ")";
}

std::vector<CudaDeviceInfo> detail::cuda_runtime_devices() {
  std::vector<CudaDeviceInfo> devices;
  const int count = cuda_device_count();
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    ZERO_CUDA_CHECK(cudaGetDeviceProperties(&properties, index));
    CudaDeviceInfo info;
    info.index = index;
    info.name = properties.name;
    info.major = properties.major;
    info.minor = properties.minor;
    info.total_memory_bytes = properties.totalGlobalMem;
    info.multiprocessors = properties.multiProcessorCount;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) == cudaSuccess) info.pci_bus_id = bus;
    devices.push_back(std::move(info));
  }
  return devices;
}

std::string CudaDeviceInfo::describe() const {
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB",
                static_cast<double>(total_memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  std::ostringstream out;
  out << "cuda:" << index << " " << name << ", sm_" << major << minor << ", " << memory << ", "
      << multiprocessors << " SMs";
  if (!pci_bus_id.empty()) out << ", PCI " << pci_bus_id;
  return out.str();
}

std::unique_ptr<Allocator> detail::make_cuda_runtime_allocator(MemorySpace space,
                                                               MemoryLedger& ledger,
                                                               bool use_cuda) {
  ZERO_CHECK(space != MemorySpace::kNvme,
             "NVMe memory is allocated by the offload swapper, not an allocator");
  if (use_cuda) {
    ZERO_CHECK(cuda_device_count() > 0,
               "a CUDA allocator was requested but no CUDA device is visible");
    if (space == MemorySpace::kDevice)
      return make_cuda_device_allocator(ledger, /*device=*/-1, /*caching=*/false);
    if (space == MemorySpace::kHostPinned)
      return make_cuda_pinned_allocator(ledger, /*caching=*/false);
  }
  return std::make_unique<HostAllocator>(ledger, space);
}

}  // namespace zero
