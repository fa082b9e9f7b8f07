// Runs a CUDA kernel body (zero/core/kernel_thread.h) on the CPU over its exact launch grid: every
// thread of a block is a fiber (ucontext) on one host thread. A fiber runs until it reaches a warp
// shuffle, a warp barrier or __syncthreads; when all 32 lanes of its warp stand at the same shuffle
// the lanes exchange values as the hardware does (lane i receives lane i ^ mask's value), and when
// every thread of the block stands at the barrier the next phase starts. Shared memory is one
// Shared per block, filled with 0xFF bytes (NaN floats) as uninitialised device memory may hold.
// Divergence the hardware does not allow is an error: a full-mask shuffle that not every lane of
// the warp reaches, lanes at different primitives, a barrier some threads exited before, a warp
// primitive in a block that is not whole warps. Threads run in linear order or in reverse within
// each phase, and blocks one after another in linear order or in reverse (Order), so a missing
// barrier or a dependence between blocks shows as a difference between the two orders.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <type_traits>

#include "zero/core/dtype.h"
#include "zero/core/kernel_thread.h"

namespace zero::kernels {

// The emulated 16-bit types: zero's conversions (round to nearest even, as the device's).
template <>
struct Element<BFloat16> {
  static float widen(BFloat16 value) { return to_float(value); }
  static BFloat16 narrow(float value) { return to_bf16(value); }
};
template <>
struct Element<Float16> {
  static float widen(Float16 value) { return to_float(value); }
  static Float16 narrow(float value) { return to_fp16(value); }
};

namespace emulation {

enum class Order { kForward, kReverse };

class BlockRun;

// The thread a body sees in emulation (the DeviceThread interface).
class EmulatedThread {
 public:
  KernelDim block_index() const { return block_index_; }
  KernelDim thread_index() const { return thread_index_; }
  KernelDim block_dim() const { return block_dim_; }
  KernelDim grid_dim() const { return grid_dim_; }
  template <typename T>
  T shfl_xor(T value, int lane_mask) const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(std::uint64_t));
    std::uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits = exchange(bits, lane_mask, sizeof(T));
    T result;
    std::memcpy(&result, &bits, sizeof(T));
    return result;
  }
  void sync_warp() const;
  void sync_block() const;
  // The fibers of a grid take turns on one host thread, so a read-modify-write is atomic.
  double atomic_add(double* address, double value) const {
    const double old = *address;
    *address = old + value;
    return old;
  }

 private:
  friend class BlockRun;
  std::uint64_t exchange(std::uint64_t bits, int lane_mask, std::size_t bytes) const;
  BlockRun* run_ = nullptr;
  unsigned linear_ = 0;
  KernelDim block_index_, thread_index_, block_dim_, grid_dim_;
};

// body(thread, shared_bytes) for every thread of every block of `config`, one block at a time.
// Throws zero::Error on divergence (above) or a grid past `max_threads` threads.
void run_grid(const LaunchConfig& config, Order order, std::size_t shared_bytes,
              const std::function<void(EmulatedThread&, void*)>& body,
              std::uint64_t max_threads = std::uint64_t{1} << 24);

struct NoShared {};

// body(thread, shared) with a Shared per block (NoShared: none).
template <typename Shared = NoShared, typename Body>
void run(const LaunchConfig& config, Order order, Body&& body) {
  static_assert(std::is_trivially_default_constructible_v<Shared>);
  run_grid(config, order, std::is_empty_v<Shared> ? 0 : sizeof(Shared),
           [&](EmulatedThread& thread, void* shared) {
             body(thread, *std::launder(static_cast<Shared*>(shared)));
           });
}

}  // namespace emulation
}  // namespace zero::kernels
