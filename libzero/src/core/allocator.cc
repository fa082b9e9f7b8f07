// Buffer ownership, the host allocator and the allocator factory.
#include "zero/core/allocator.h"

#include <cstdlib>
#include <new>

#include "cuda_backend.h"
#include "zero/core/error.h"

namespace zero {

namespace {
constexpr std::size_t kAlignmentBytes = 64;
}

Buffer::Buffer(Buffer&& other) noexcept
    : allocator_(other.allocator_),
      data_(other.data_),
      size_bytes_(other.size_bytes_),
      category_(other.category_) {
  other.allocator_ = nullptr;
  other.data_ = nullptr;
  other.size_bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    allocator_ = other.allocator_;
    data_ = other.data_;
    size_bytes_ = other.size_bytes_;
    category_ = other.category_;
    other.allocator_ = nullptr;
    other.data_ = nullptr;
    other.size_bytes_ = 0;
  }
  return *this;
}

void Buffer::reset() noexcept {
  if (allocator_ != nullptr) allocator_->release(data_, size_bytes_, category_);
  allocator_ = nullptr;
  data_ = nullptr;
  size_bytes_ = 0;
}

namespace {
std::size_t rounded_size(std::size_t size_bytes) {
  return (size_bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
}
}  // namespace

Buffer Allocator::allocate(std::size_t size_bytes, MemoryCategory category) {
  void* data = nullptr;
  if (size_bytes > 0) {
    bool found = false;
    if (caching_) {
      std::lock_guard lock(cache_mutex_);
      auto it = cache_.find(rounded_size(size_bytes));
      if (it != cache_.end() && !it->second.empty()) {
        data = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= it->first;
        ledger_->record_cached(space_, -static_cast<std::int64_t>(it->first));
        found = true;
      }
    }
    if (!found) {
      // The block is filed under its rounded size when freed, so it must be that large: a later
      // request of up to the rounded size may receive it.
      data = raw_allocate(rounded_size(size_bytes));
      if (data == nullptr && !planning() && cached_bytes() > 0) {
        release_cached();  // the cache holds memory of other sizes: give it back and retry
        data = raw_allocate(rounded_size(size_bytes));
      }
    }
    ZERO_CHECK(data != nullptr || planning(), "out of memory: could not allocate ",
               format_bytes(static_cast<std::int64_t>(size_bytes)), " (", size_bytes, " bytes) of ",
               name_of(space_), " memory for ", name_of(category));
  }
  ledger_->record_allocation(space_, category, size_bytes);
  return Buffer(this, data, size_bytes, category);
}

void Allocator::release(void* data, std::size_t size_bytes, MemoryCategory category) noexcept {
  try {
    ledger_->record_free(space_, category, size_bytes);
    if (caching_ && size_bytes > 0) {
      std::lock_guard lock(cache_mutex_);
      const std::size_t size = rounded_size(size_bytes);
      cache_[size].push_back(data);
      cached_bytes_ += size;
      ledger_->record_cached(space_, static_cast<std::int64_t>(size));
      return;
    }
  } catch (...) {
    // Unreachable for buffers this allocator handed out (a full cache vector aside, then the
    // block is freed below); destructors must not throw.
  }
  if (data != nullptr) raw_free(data);
}

void Allocator::release_cached() noexcept {
  std::lock_guard lock(cache_mutex_);
  for (auto& [size, blocks] : cache_) {
    for (void* data : blocks)
      if (data != nullptr) raw_free(data);
    try {
      ledger_->record_cached(space_, -static_cast<std::int64_t>(size * blocks.size()));
    } catch (...) {
    }
  }
  cache_.clear();
  cached_bytes_ = 0;
}

std::size_t Allocator::cached_bytes() const {
  std::lock_guard lock(cache_mutex_);
  return cached_bytes_;
}

void* HostAllocator::raw_allocate(std::size_t size_bytes) {
  return std::aligned_alloc(kAlignmentBytes, size_bytes);  // a multiple of the alignment
}

void HostAllocator::raw_free(void* data) noexcept { std::free(data); }

std::unique_ptr<Allocator> make_allocator(MemorySpace space, MemoryLedger& ledger, bool use_cuda) {
  if (const detail::CudaBackend* backend = detail::cuda_backend())
    return backend->make_allocator(space, ledger, use_cuda);
  ZERO_CHECK(!use_cuda, "a CUDA allocator was requested but ", detail::kNoCudaBackend);
  ZERO_CHECK(space != MemorySpace::kNvme,
             "NVMe memory is allocated by the offload swapper, not an allocator");
  return std::make_unique<HostAllocator>(ledger, space);
}

}  // namespace zero
