// Allocators that record every allocation in a MemoryLedger, and the owning Buffer they return.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "zero/core/memory_ledger.h"

namespace zero {

class Allocator;

// Owning, move-only handle to `size_bytes` bytes in one space, recorded in a ledger under one
// category. Returned to its allocator (and the ledger) on destruction. A buffer from a planning
// allocator has data() == nullptr but counts in the ledger like a real one.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator* allocator, void* data, std::size_t size_bytes, MemoryCategory category)
      : allocator_(allocator), data_(data), size_bytes_(size_bytes), category_(category) {}
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  std::size_t size_bytes() const { return size_bytes_; }
  MemoryCategory category() const { return category_; }
  bool allocated() const { return allocator_ != nullptr; }
  void reset() noexcept;

 private:
  Allocator* allocator_ = nullptr;
  void* data_ = nullptr;
  std::size_t size_bytes_ = 0;
  MemoryCategory category_ = MemoryCategory::kWorkspace;
};

// Allocates in one memory space and records into one ledger. The allocator and the ledger must
// outlive every Buffer they hand out.
//
// A caching allocator keeps freed blocks, by exact size (rounded up to 64 bytes), and hands them to
// the next request of that size instead of asking the system: stage 3 frees and re-allocates the
// same unit-sized buffers every micro-step, and fresh pages cost a fault each (a 12 MiB gather
// into fresh memory took 7.6 ms instead of 1.6 ms here). Cached bytes are in the ledger
// (record_cached; space_reserved = in use + cached), so what the process holds stays known; a
// request that finds no memory returns the cache to the system and tries again.
class Allocator {
 public:
  Allocator(MemorySpace space, MemoryLedger& ledger, bool caching = false)
      : space_(space), ledger_(&ledger), caching_(caching) {}
  // Derived allocators call release_cached() in their destructors (raw_free is theirs).
  virtual ~Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // Zero-sized requests give an allocated, empty Buffer. Memory is 64-byte aligned and not
  // initialised. Throws zero::Error naming the space, category and size when memory runs out.
  Buffer allocate(std::size_t size_bytes, MemoryCategory category);

  MemorySpace space() const { return space_; }
  MemoryLedger& ledger() const { return *ledger_; }
  // True when buffers are only recorded, never backed by memory.
  virtual bool planning() const { return false; }
  bool caching() const { return caching_; }
  // Returns every cached block to the system (torch.cuda.empty_cache()).
  void release_cached() noexcept;
  std::size_t cached_bytes() const;

 protected:
  // `size_bytes` is the request rounded up to a multiple of 64 (the size the block is cached
  // under); returns at least that many bytes, 64-byte aligned, or nullptr when memory is out.
  virtual void* raw_allocate(std::size_t size_bytes) = 0;
  virtual void raw_free(void* data) noexcept = 0;

 private:
  friend class Buffer;
  void release(void* data, std::size_t size_bytes, MemoryCategory category) noexcept;

  MemorySpace space_;
  MemoryLedger* ledger_;
  bool caching_;
  mutable std::mutex cache_mutex_;  // buffers are freed on stream threads too
  std::unordered_map<std::size_t, std::vector<void*>> cache_;  // rounded size -> free blocks
  std::size_t cached_bytes_ = 0;
};

// Ordinary (pageable) host memory, 64-byte aligned. With space kDevice on a CPU-only build it
// stands in for device memory; with kHostPinned where CUDA is absent it stands in for pinned
// memory.
class HostAllocator final : public Allocator {
 public:
  explicit HostAllocator(MemoryLedger& ledger, MemorySpace space = MemorySpace::kHost,
                         bool caching = true)
      : Allocator(space, ledger, caching) {}
  ~HostAllocator() override { release_cached(); }

 protected:
  void* raw_allocate(std::size_t size_bytes) override;
  void raw_free(void* data) noexcept override;
};

// Records without allocating: the planner runs the engine's allocation sequence through it, so
// a plan and a real run fill their ledgers identically.
class PlanningAllocator final : public Allocator {
 public:
  // `caching` as the allocator the plan stands for (HostAllocator caches by default).
  PlanningAllocator(MemoryLedger& ledger, MemorySpace space, bool caching = true)
      : Allocator(space, ledger, caching) {}
  ~PlanningAllocator() override { release_cached(); }
  bool planning() const override { return true; }

 protected:
  void* raw_allocate(std::size_t) override { return nullptr; }
  void raw_free(void*) noexcept override {}
};

// The allocator for `space`: HostAllocator without zero::cuda (or for kHost), a CUDA allocator
// (cudaMalloc / cudaMallocHost) for kDevice / kHostPinned when `use_cuda`.
std::unique_ptr<Allocator> make_allocator(MemorySpace space, MemoryLedger& ledger,
                                          bool use_cuda = false);

}  // namespace zero
