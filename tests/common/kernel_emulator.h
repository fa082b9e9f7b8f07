// Runs a CUDA kernel body (zero/core/kernel_thread.h) on the CPU over its exact launch grid: every
// thread of a block is a fiber (ucontext) on one host thread. A fiber runs until it reaches a warp
// shuffle, a warp barrier or __syncthreads; when all 32 lanes of its warp stand at the same shuffle
// the lanes exchange values as the hardware does (lane i receives lane i ^ mask's value), and when
// every thread of the block stands at the barrier the next phase starts. Shared memory is one
// allocation of exactly the launch's bytes per block (an index past its end is AddressSanitizer's
// heap overflow), filled with 0xFF bytes (NaN floats) as uninitialised device memory may hold.
// Divergence the hardware does not allow is an error: a full-mask shuffle that not every lane of
// the warp reaches, lanes at different primitives, a barrier some threads exited before, a warp
// primitive in a block that is not whole warps. Threads run in linear order or in reverse within
// each phase, and blocks one after another in linear order or in reverse (Order), so a missing
// barrier or a dependence between blocks shows as a difference between the two orders.
// Shared-memory races are errors whatever the order: every access through a view
// (thread.shared(pointer), kernel_thread.h's SharedView) is recorded per 4-byte word with the
// thread that made it, and two accesses to one word by different threads, at least one a write,
// fail unless a barrier orders them: __syncthreads for any two threads of the block, __syncwarp
// also for two lanes of one warp. A shuffle orders no memory (racecheck reports lanes that write
// and read one word across a shuffle: e0ba3f2's layer norm backward).
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
template <typename T>
class CheckedView;

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
  // A view of shared memory at `data`, inside the block's shared memory, whose accesses are
  // checked for races (CheckedView).
  template <typename T>
  CheckedView<T> shared(T* data) const;
  // Records this thread's read or write of `bytes` at `address`; throws zero::Error on a race
  // (above), an access outside the block's shared memory, or one not aligned to 4 bytes.
  void record_shared(const void* address, std::size_t bytes, bool write) const;
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
  void check_shared(const void* address) const;
  BlockRun* run_ = nullptr;
  unsigned linear_ = 0;
  KernelDim block_index_, thread_index_, block_dim_, grid_dim_;
};

// Element i of a CheckedView: reading it (converting to T) and writing it (assigning) record the
// access, then make it.
template <typename T>
class CheckedElement {
 public:
  using Value = std::remove_const_t<T>;
  CheckedElement(const EmulatedThread& thread, T* address) : thread_(&thread), address_(address) {}
  CheckedElement(const CheckedElement&) = default;
  operator Value() const {
    thread_->record_shared(address_, sizeof(T), false);
    return *address_;
  }
  const CheckedElement& operator=(const Value& value) const {
    static_assert(!std::is_const_v<T>, "a write through a view of const elements");
    thread_->record_shared(address_, sizeof(T), true);
    *address_ = value;
    return *this;
  }
  const CheckedElement& operator=(const CheckedElement& other) const {
    return *this = static_cast<Value>(other);
  }
  template <typename U>
  const CheckedElement& operator+=(const U& value) const {
    return *this = static_cast<Value>(static_cast<Value>(*this) + value);
  }

 private:
  const EmulatedThread* thread_;
  T* address_;
};

// The emulated thread's SharedView: the same interface, each access recorded.
template <typename T>
class CheckedView {
 public:
  static_assert(sizeof(T) % 4 == 0, "shared elements of whole 4-byte words (the checked unit)");
  CheckedView(const EmulatedThread& thread, T* data) : thread_(&thread), data_(data) {}
  template <typename Index>
  CheckedElement<T> operator[](Index i) const {
    return CheckedElement<T>(*thread_, data_ + i);
  }
  template <typename Index>
  CheckedView operator+(Index offset) const {
    return CheckedView(*thread_, data_ + offset);
  }
  template <typename Index>
  T* address(Index i) const {
    return data_ + i;
  }

 private:
  const EmulatedThread* thread_;
  T* data_;
};

template <typename T>
CheckedView<T> EmulatedThread::shared(T* data) const {
  check_shared(data);
  return CheckedView<T>(*this, data);
}

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
