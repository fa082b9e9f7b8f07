// The CPU backend of the device layer: worker-thread streams over host memory. Its operations are
// the engine's reference arithmetic (fp32 results are the oracle the other backends match).
#include "zero/core/cpu_context.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../core/cuda_backend.h"
#include "host_arithmetic.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/logging.h"

namespace zero {
namespace {

using host::axpy_values;
using host::fill_values;
using host::scale_values;
using host::squares_of;

// kHostPinned on the CPU backend: page-locked host memory (mlock), as cudaHostAlloc gives on a
// GPU. Where locking fails (RLIMIT_MEMLOCK, usually a few MiB unprivileged), the block stays in
// plain pages and one warning per process says so; the bytes count under host_pinned either way.
class LockedHostAllocator final : public Allocator {
 public:
  explicit LockedHostAllocator(MemoryLedger& ledger)
      : Allocator(MemorySpace::kHostPinned, ledger, /*caching=*/true) {}
  ~LockedHostAllocator() override { release_cached(); }

 protected:
  void* raw_allocate(std::size_t size) override {  // a multiple of 64 (Allocator::allocate)
    void* data = std::aligned_alloc(64, size);
    if (data == nullptr) return nullptr;
    if (mlock(data, size) == 0) {
      std::lock_guard lock(mutex_);
      locked_[data] = size;
    } else {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        log_warning("pinned host memory: mlock of ", size, " bytes failed (", std::strerror(errno),
                    "; RLIMIT_MEMLOCK?): using pageable memory instead");
    }
    return data;
  }
  void raw_free(void* data) noexcept override {
    {
      std::lock_guard lock(mutex_);
      auto it = locked_.find(data);
      if (it != locked_.end()) {
        munlock(data, it->second);
        locked_.erase(it);
      }
    }
    std::free(data);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> locked_;
};

// Host memory for every space; kDevice stands for the GPU's memory, kHostPinned is page-locked.
class CpuContext final : public DeviceContext {
 public:
  explicit CpuContext(const CpuContextOptions& options)
      : DeviceContext(std::make_unique<MemoryLedger>()),
        device_(ledger(), MemorySpace::kDevice),
        pinned_(ledger()),
        host_(ledger(), MemorySpace::kHost),
        stress_(options.stress),
        asynchronous_(options.asynchronous),
        compute_("compute", options.stress),
        copy_("copy", options.stress) {}
  ~CpuContext() override {
    // Queued work may still free buffers into the allocators: drain the streams first.
    try {
      compute_.synchronize();
    } catch (...) {
    }
    try {
      copy_.synchronize();
    } catch (...) {
    }
  }

  std::string_view backend() const override { return "cpu"; }
  Device device() const override { return Device::cpu(); }
  bool model_runs_on_host() const override { return !asynchronous_; }
  Allocator& allocator(MemorySpace space) override {
    switch (space) {
      case MemorySpace::kDevice: return device_;
      case MemorySpace::kHostPinned: return pinned_;
      case MemorySpace::kHost: return host_;
      case MemorySpace::kNvme: break;
    }
    ZERO_THROW("the CPU device context has no allocator for space '", name_of(space),
               "' (NVMe memory belongs to the offload swapper)");
  }
  Stream& compute_stream() override { return compute_; }
  Stream& copy_stream() override { return copy_; }
  std::unique_ptr<Stream> make_stream(std::string name) override {
    return std::make_unique<CpuStream>(std::move(name), stress_);
  }

  void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
            float value) override {
    stream.submit([=] { fill_values(destination, dtype, count, value); });
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    if (size_bytes == 0) return;
    stream.submit([=] { std::memcpy(destination, source, size_bytes); });
  }
  void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
               DType destination_dtype, std::size_t count) override {
    stream.submit(
        [=] { zero::convert(source, source_dtype, destination, destination_dtype, count); });
  }
  void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
             DType destination_dtype, std::size_t count, float alpha) override {
    stream.submit(
        [=] { scale_values(source, source_dtype, destination, destination_dtype, count, alpha); });
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    stream.submit([=] { axpy_values(x, x_dtype, y, y_dtype, count, alpha); });
  }
  void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                      SquaresResult* result) override {
    stream.submit([=] { *result = squares_of(x, dtype, count); });
  }

 private:
  HostAllocator device_;
  LockedHostAllocator pinned_;
  HostAllocator host_;
  StreamStress stress_;
  bool asynchronous_;
  CpuStream compute_;
  CpuStream copy_;
};

// Runs each task at once, on the submitting thread: the order of a stream, no concurrency.
class InOrderStream final : public Stream {
 public:
  explicit InOrderStream(std::string name) : name_(std::move(name)) {}
  void submit(std::function<void()> task) override { task(); }
  Event record() override { return Event(); }
  void wait(const Event& event) override { event.synchronize(); }
  void synchronize() override {}
  const std::string& name() const override { return name_; }

 private:
  std::string name_;
};

class PlanningContext final : public DeviceContext {
 public:
  PlanningContext()
      : DeviceContext(std::make_unique<MemoryLedger>()),
        device_(ledger(), MemorySpace::kDevice),
        pinned_(ledger(), MemorySpace::kHostPinned),
        host_(ledger(), MemorySpace::kHost),
        compute_("compute"),
        copy_("copy") {}

  std::string_view backend() const override { return "planning"; }
  Device device() const override { return Device::cpu(); }
  bool planning() const override { return true; }
  bool model_runs_on_host() const override { return true; }
  Allocator& allocator(MemorySpace space) override {
    switch (space) {
      case MemorySpace::kDevice: return device_;
      case MemorySpace::kHostPinned: return pinned_;
      case MemorySpace::kHost: return host_;
      case MemorySpace::kNvme: break;
    }
    ZERO_THROW("the planning device context has no allocator for space '", name_of(space), "'");
  }
  Stream& compute_stream() override { return compute_; }
  Stream& copy_stream() override { return copy_; }
  std::unique_ptr<Stream> make_stream(std::string name) override {
    return std::make_unique<InOrderStream>(std::move(name));
  }
  // Nothing is computed in a plan: the buffers have no memory.
  void fill(Stream&, void*, DType, std::size_t, float) override {}
  void copy(Stream&, const void*, void*, std::size_t) override {}
  void convert(Stream&, const void*, DType, void*, DType, std::size_t) override {}
  void scale(Stream&, const void*, DType, void*, DType, std::size_t, float) override {}
  void axpy(Stream&, const void*, DType, void*, DType, std::size_t, float) override {}
  void sum_of_squares(Stream&, const void*, DType, std::size_t, SquaresResult* result) override {
    *result = {};
  }

 private:
  PlanningAllocator device_;
  PlanningAllocator pinned_;
  PlanningAllocator host_;
  InOrderStream compute_;
  InOrderStream copy_;
};

}  // namespace

void DeviceContext::release_after(Stream& stream, std::shared_ptr<void> object) {
  if (!object) return;
  stream.submit([object = std::move(object)]() mutable { object.reset(); });
}

CpuContextOptions CpuContextOptions::from_environment() {
  CpuContextOptions options;
  options.stress = StreamStress::from_environment();
  if (const char* mode = std::getenv("ZERO_CPU_ASYNC"); mode != nullptr && *mode != '\0') {
    const std::string_view text(mode);
    ZERO_CHECK(text == "0" || text == "1", "ZERO_CPU_ASYNC='", text,
               "' must be 1 (the model's CPU kernels on the compute stream) or 0 (on the host)");
    options.asynchronous = text == "1";
  }
  return options;
}

std::unique_ptr<DeviceContext> make_cpu_context(const CpuContextOptions& options) {
  return std::make_unique<CpuContext>(options);
}

std::unique_ptr<DeviceContext> make_cpu_context(StreamStress stress) {
  CpuContextOptions options = CpuContextOptions::from_environment();
  options.stress = stress;
  return std::make_unique<CpuContext>(options);
}

std::unique_ptr<DeviceContext> make_device_context(Device device) {
  if (device.kind == DeviceKind::kCuda) return make_cuda_context(device.index);
  return make_cpu_context();
}

std::unique_ptr<DeviceContext> make_planning_context() {
  return std::make_unique<PlanningContext>();
}

std::unique_ptr<DeviceContext> make_cuda_context(int index) {
  const detail::CudaBackend* backend = detail::cuda_backend();
  ZERO_CHECK(backend, "make_cuda_context(", index, "): ", detail::kNoCudaBackend);
  return backend->make_context(index);
}

}  // namespace zero
