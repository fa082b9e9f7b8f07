// A CPU context whose device memory the host cannot address, as on a GPU: device allocations are
// whole pages of their own, mprotect'ed PROT_NONE while guard(true) (a host read or write of
// them, memcpy or pread/pwrite into them, is a SIGSEGV or EFAULT), reachable only through the
// context's own operations (copy, convert, fill, ...), which lift the guard on their stream for
// the time they run. host_addressable(kDevice) is false. Tests turn the guard on around the code
// under test (checkpoint saves and loads, gather_master), off where the host model reads its
// gathered units and where the optimizer steps (Optimizer::step_on runs the optimizer's own CPU
// kernels on the stream, not an operation of this context).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "forwarding_context.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device_context.h"

namespace zero::testing {

// Device memory in whole pages of its own, PROT_NONE while guarded and no operation is running.
class GuardedDeviceAllocator final : public Allocator {
 public:
  explicit GuardedDeviceAllocator(MemoryLedger& ledger)
      : Allocator(MemorySpace::kDevice, ledger, /*caching=*/false) {}
  ~GuardedDeviceAllocator() override { release_cached(); }

  void set_guard(bool on) {
    std::lock_guard lock(mutex_);
    guarded_ = on;
    protect_all();
  }
  // True when [data, data + size_bytes) lies inside one live block.
  bool holds(const void* data, std::size_t size_bytes) {
    const auto* begin = static_cast<const char*>(data);
    std::lock_guard lock(mutex_);
    auto it = blocks_.upper_bound(const_cast<char*>(begin));
    if (it == blocks_.begin()) return false;
    --it;
    return begin + size_bytes <= static_cast<const char*>(it->first) + it->second;
  }
  // An operation of the context runs (on a stream): the device may touch its memory.
  void open() {
    std::lock_guard lock(mutex_);
    if (open_++ == 0) protect_all();
  }
  void close() {
    std::lock_guard lock(mutex_);
    if (--open_ == 0) protect_all();
  }

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    const std::size_t bytes = mapped_size(size_bytes);
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return nullptr;
    std::lock_guard lock(mutex_);
    blocks_[data] = bytes;
    if (guarded_ && open_ == 0) ::mprotect(data, bytes, PROT_NONE);
    return data;
  }
  void raw_free(void* data) noexcept override {
    std::lock_guard lock(mutex_);
    const auto found = blocks_.find(data);
    if (found == blocks_.end()) return;
    ::munmap(data, found->second);
    blocks_.erase(found);
  }

 private:
  static std::size_t mapped_size(std::size_t size_bytes) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<std::size_t>(size_bytes, 1) + page - 1) / page * page;
  }
  void protect_all() {  // mutex_ held
    const int protection = guarded_ && open_ == 0 ? PROT_NONE : PROT_READ | PROT_WRITE;
    for (const auto& [data, bytes] : blocks_) ::mprotect(data, bytes, protection);
  }
  std::mutex mutex_;
  std::map<void*, std::size_t> blocks_;
  bool guarded_ = false;
  int open_ = 0;
};

// The CPU backend (host mode) whose device space is a GuardedDeviceAllocator the host does not
// address (host_addressable(kDevice) is false, as on CUDA). Each operation lifts the guard on its
// stream for the time it runs.
class GuardedDeviceContext final : public ForwardingContext {
 public:
  GuardedDeviceContext()
      : ForwardingContext(make_cpu_context(CpuContextOptions{})), device_(inner().ledger()) {}
  ~GuardedDeviceContext() override {
    try {
      compute_stream().synchronize();
      copy_stream().synchronize();
    } catch (...) {
    }
  }
  void guard(bool on) { device_.set_guard(on); }
  GuardedDeviceAllocator& device_allocator() { return device_; }

  bool host_addressable(MemorySpace space) const override {
    return space != MemorySpace::kDevice && ForwardingContext::host_addressable(space);
  }
  Allocator& allocator(MemorySpace space) override {
    return space == MemorySpace::kDevice ? device_ : ForwardingContext::allocator(space);
  }
  void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
            float value) override {
    lifted(stream, [&] { ForwardingContext::fill(stream, destination, dtype, count, value); });
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    lifted(stream, [&] { ForwardingContext::copy(stream, source, destination, size_bytes); });
  }
  void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
               DType destination_dtype, std::size_t count) override {
    lifted(stream, [&] {
      ForwardingContext::convert(stream, source, source_dtype, destination, destination_dtype,
                                 count);
    });
  }
  void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
             DType destination_dtype, std::size_t count, float alpha) override {
    lifted(stream, [&] {
      ForwardingContext::scale(stream, source, source_dtype, destination, destination_dtype, count,
                               alpha);
    });
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    lifted(stream, [&] { ForwardingContext::axpy(stream, x, x_dtype, y, y_dtype, count, alpha); });
  }
  void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                      SquaresResult* result) override {
    lifted(stream, [&] { ForwardingContext::sum_of_squares(stream, x, dtype, count, result); });
  }

 private:
  template <typename Operation>
  void lifted(Stream& stream, Operation operation) {
    stream.submit([this] { device_.open(); });
    operation();
    stream.submit([this] { device_.close(); });
  }
  GuardedDeviceAllocator device_;
};

}  // namespace zero::testing
