// The device layer: what one rank computes on. A DeviceContext holds, per rank, an allocator per
// memory space (device, host_pinned, host), a compute stream and a copy stream (the
// communicator's stream is the third, Communicator::stream()), and the few operations the engine
// runs on device buffers, each enqueued on a stream and ordered by events. Backends are peers
// behind this one interface (as ggml's ggml_backend_i, c10d's Backend):
//   cpu       worker-thread streams over host memory; the oracle (libzero/src/cpu/)
//   cuda      cudaStream_t/cudaEvent_t, a caching cudaMalloc allocator, cudaHostAlloc pinned
//             memory, kernels for the operations (libzero/src/cuda/; builds with CUDA)
//   planning  allocators that record without memory, in-order streams, operations that do
//             nothing: one process runs the exact allocation sequence of any rank (the planner)
// Buffers cross the interface as void* + DType; every operation is asynchronous on its stream.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "zero/core/allocator.h"
#include "zero/core/cpu_stream.h"
#include "zero/core/device.h"
#include "zero/core/dtype.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/stream.h"

namespace zero {

// A sum of squares, readable on the host once its stream has run it.
struct SquaresResult {
  double sum = 0.0;        // Σ x² in double
  bool nonfinite = false;  // some element was inf or NaN (the fp16 overflow check)
};

class DeviceContext {
 public:
  virtual ~DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  virtual std::string_view backend() const = 0;  // "cpu", "cuda", "planning"
  virtual Device device() const = 0;
  // True when buffers are only recorded (no memory, operations do nothing).
  virtual bool planning() const { return false; }
  // True when the model's kernels run on the calling host thread (CPU backend, host mode): the
  // engine then waits on the host for the compute stream before handing a buffer to the model.
  // False when the model enqueues its kernels on compute_stream() (CUDA, CPU asynchronous mode).
  virtual bool model_runs_on_host() const = 0;
  // Makes this context's device current on the calling thread (cudaSetDevice), for a host thread
  // of the engine's own that enqueues work on its streams (the overlapped optimizer step's
  // worker). Nothing to do on the CPU.
  virtual void use_on_this_thread() {}
  // True when the host may read and write `space`'s memory through plain pointers (memcpy, pread,
  // pwrite): host and pinned memory always, kDevice where the device is the CPU. Where false, the
  // host reaches the bytes only through copy() into host memory and a wait on the stream.
  virtual bool host_addressable(MemorySpace space) const {
    if (space == MemorySpace::kNvme) return false;
    return space != MemorySpace::kDevice || device().kind == DeviceKind::kCpu;
  }

  // Every allocation of this rank, in every space.
  MemoryLedger& ledger() { return *ledger_; }
  // The allocator of `space` (kDevice, kHostPinned, kHost; NVMe belongs to the offload swapper).
  virtual Allocator& allocator(MemorySpace space) = 0;
  virtual Stream& compute_stream() = 0;
  virtual Stream& copy_stream() = 0;
  // A new stream of this backend (a communicator's stream).
  virtual std::unique_ptr<Stream> make_stream(std::string name) = 0;

  // ---- operations, enqueued on `stream` ----
  // destination[i] = value, `count` elements of `dtype`.
  virtual void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
                    float value) = 0;
  // `size_bytes` bytes between any two spaces of this context (buffers must not overlap).
  virtual void copy(Stream& stream, const void* source, void* destination,
                    std::size_t size_bytes) = 0;
  // Converts `count` elements (zero::convert's rounding).
  virtual void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
                       DType destination_dtype, std::size_t count) = 0;
  // destination[i] = alpha · source[i] (fp32 arithmetic, rounded to destination_dtype).
  virtual void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
                     DType destination_dtype, std::size_t count, float alpha) = 0;
  // y[i] += alpha · x[i] (fp32 arithmetic, rounded to y_dtype).
  virtual void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype,
                    std::size_t count, float alpha) = 0;
  // *result = Σ x[i]² in double and whether any x[i] is inf/NaN; `result` is host memory that
  // must stay valid until the stream has run the operation.
  virtual void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                              SquaresResult* result) = 0;
  // Keeps `object` alive until `stream` has run everything submitted so far (a buffer that
  // queued work still reads), then drops it on the stream's side.
  void release_after(Stream& stream, std::shared_ptr<void> object);

 protected:
  explicit DeviceContext(std::unique_ptr<MemoryLedger> ledger) : ledger_(std::move(ledger)) {}

 private:
  std::unique_ptr<MemoryLedger> ledger_;
};

// The CPU backend (stress from the environment unless given; mode from ZERO_CPU_ASYNC, options
// in zero/core/cpu_context.h), caching host allocators for every space (kDevice: device memory).
std::unique_ptr<DeviceContext> make_cpu_context(
    StreamStress stress = StreamStress::from_environment());

// The planning backend: PlanningAllocators for every space, recording into ledger() as the CPU
// backend's caching allocators would; streams that run host tasks in order at once; operations
// that touch nothing.
std::unique_ptr<DeviceContext> make_planning_context();

// The CUDA backend on device `index` (a program that links zero::cuda, and a visible device;
// zero::Error otherwise).
std::unique_ptr<DeviceContext> make_cuda_context(int index);

}  // namespace zero
