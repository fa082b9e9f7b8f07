// The CUDA backend of the device layer: streams and events over cudaStream_t/cudaEvent_t, a
// caching cudaMalloc allocator for device memory, cudaHostAlloc pinned memory, and the
// operations as kernels (cuda_kernels.cu) or cudaMemcpyAsync, all enqueued on streams.
#include <cuda_runtime.h>

#include <exception>
#include <mutex>

#include "cuda_allocators.h"
#include "cuda_backend_entries.h"
#include "cuda_kernels.h"
#include "cuda_stream.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"

namespace zero {
namespace {

class CudaEvent final : public EventImpl {
 public:
  explicit CudaEvent(cudaEvent_t event, std::shared_ptr<std::exception_ptr> stream_error)
      : event_(event), stream_error_(std::move(stream_error)) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool query() const override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  void synchronize() const override {
    ZERO_CUDA_CHECK(cudaEventSynchronize(event_));
    if (*stream_error_) std::rethrow_exception(*stream_error_);
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
  std::shared_ptr<std::exception_ptr> stream_error_;  // the first failed host task's error
};

class CudaStream final : public Stream {
 public:
  CudaStream(std::string name, int device) : name_(std::move(name)), device_(device) {
    ZERO_CUDA_CHECK(cudaSetDevice(device_));
    ZERO_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  // Host tasks run by the CUDA driver's callback thread, in stream order; a failure is sticky.
  void submit(std::function<void()> task) override {
    struct Call {
      std::function<void()> body;
      std::shared_ptr<std::exception_ptr> error;
    };
    auto* call = new Call{std::move(task), error_};
    const cudaError_t status = cudaLaunchHostFunc(
        stream_,
        [](void* data) {
          std::unique_ptr<Call> owned(static_cast<Call*>(data));
          if (*owned->error) return;
          try {
            owned->body();
          } catch (...) {
            *owned->error = std::current_exception();
          }
        },
        call);
    if (status != cudaSuccess) delete call;
    ZERO_CUDA_CHECK(status);
  }
  Event record() override {
    cudaEvent_t event = nullptr;
    ZERO_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    ZERO_CUDA_CHECK(cudaEventRecord(event, stream_));
    return Event(std::make_shared<CudaEvent>(event, error_));
  }
  void wait(const Event& event) override {
    if (event.impl() == nullptr) return;
    if (const auto* cuda_event = dynamic_cast<const CudaEvent*>(event.impl())) {
      ZERO_CUDA_CHECK(cudaStreamWaitEvent(stream_, cuda_event->get(), 0));
      return;
    }
    submit([event] { event.synchronize(); });  // another backend's event: wait from the stream
  }
  void synchronize() override {
    ZERO_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (*error_) std::rethrow_exception(*error_);
  }
  const std::string& name() const override { return name_; }
  cudaStream_t get() const { return stream_; }

 private:
  std::string name_;
  int device_;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<std::exception_ptr> error_ = std::make_shared<std::exception_ptr>();
};

cudaStream_t native(Stream& stream) { return detail::native_cuda_stream(stream); }

}  // namespace

cudaStream_t detail::native_cuda_stream(Stream& stream) {
  auto* cuda_stream = dynamic_cast<CudaStream*>(&stream.underlying());
  ZERO_CHECK(cuda_stream != nullptr, "stream '", stream.name(),
             "' is not a CUDA stream: the CUDA device context runs on its own streams");
  return cuda_stream->get();
}

CudaStreamHandle cuda_stream_handle(Stream& stream) { return detail::native_cuda_stream(stream); }

namespace {

class CudaContext final : public DeviceContext {
 public:
  explicit CudaContext(int index)
      : DeviceContext(std::make_unique<MemoryLedger>()),
        index_(index),
        device_(make_cuda_device_allocator(ledger(), index, /*caching=*/true)),
        pinned_(make_cuda_pinned_allocator(ledger(), /*caching=*/true)),
        host_(ledger(), MemorySpace::kHost),
        compute_("compute", index),
        copy_("copy", index) {}
  ~CudaContext() override {
    cudaStreamSynchronize(compute_.get());
    cudaStreamSynchronize(copy_.get());
  }

  std::string_view backend() const override { return "cuda"; }
  Device device() const override { return Device::cuda(index_); }
  bool model_runs_on_host() const override { return false; }
  void use_on_this_thread() override { ZERO_CUDA_CHECK(cudaSetDevice(index_)); }
  Allocator& allocator(MemorySpace space) override {
    switch (space) {
      case MemorySpace::kDevice: return *device_;
      case MemorySpace::kHostPinned: return *pinned_;
      case MemorySpace::kHost: return host_;
      case MemorySpace::kNvme: break;
    }
    ZERO_THROW("the CUDA device context has no allocator for space '", name_of(space), "'");
  }
  Stream& compute_stream() override { return compute_; }
  Stream& copy_stream() override { return copy_; }
  std::unique_ptr<Stream> make_stream(std::string name) override {
    return std::make_unique<CudaStream>(std::move(name), index_);
  }

  void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
            float value) override {
    cuda::launch_fill(destination, dtype, count, value, native(stream));
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    if (size_bytes == 0) return;
    ZERO_CUDA_CHECK(
        cudaMemcpyAsync(destination, source, size_bytes, cudaMemcpyDefault, native(stream)));
  }
  void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
               DType destination_dtype, std::size_t count) override {
    convert_on_device(source, source_dtype, destination, destination_dtype, count, native(stream));
  }
  void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
             DType destination_dtype, std::size_t count, float alpha) override {
    cuda::launch_scale(source, source_dtype, destination, destination_dtype, count, alpha, false,
                       native(stream));
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    cuda::launch_scale(x, x_dtype, y, y_dtype, count, alpha, true, native(stream));
  }
  void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                      SquaresResult* result) override {
    // Two doubles in pinned memory: the kernel's sum and flag, read back by a host task.
    Buffer scratch = pinned_->allocate(2 * sizeof(double), MemoryCategory::kWorkspace);
    Buffer device = device_->allocate(2 * sizeof(double), MemoryCategory::kWorkspace);
    const cudaStream_t native_stream = native(stream);
    ZERO_CUDA_CHECK(cudaMemsetAsync(device.data(), 0, 2 * sizeof(double), native_stream));
    cuda::launch_sum_of_squares(x, dtype, count, device.data_as<double>(), native_stream);
    ZERO_CUDA_CHECK(cudaMemcpyAsync(scratch.data(), device.data(), 2 * sizeof(double),
                                    cudaMemcpyDeviceToHost, native_stream));
    auto buffers =
        std::make_shared<std::pair<Buffer, Buffer>>(std::move(scratch), std::move(device));
    stream.submit([buffers, result] {
      const auto* values = buffers->first.data_as<double>();
      *result = {values[0], values[1] != 0.0};
    });
  }

 private:
  int index_;
  // Caching: a buffer freed by release_after() (a host function, where CUDA calls are not
  // allowed) goes to the cache, not to cudaFree.
  std::unique_ptr<Allocator> device_;
  std::unique_ptr<Allocator> pinned_;
  HostAllocator host_;
  CudaStream compute_;
  CudaStream copy_;
};

}  // namespace

std::unique_ptr<DeviceContext> detail::make_cuda_runtime_context(int index) {
  const int count = cuda_device_count();
  ZERO_CHECK(index >= 0 && index < count, "make_cuda_context(", index, "): ", count,
             " CUDA device(s) visible");
  return std::make_unique<CudaContext>(index);
}

}  // namespace zero
