// A unit's tensors laid out back to back in one flat buffer, with named views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/dtype.h"
#include "zero/core/partition.h"

namespace zero {

struct TensorSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t num_elements() const;
};

// Where one tensor sits in a flat layout.
struct TensorSlot {
  std::string name;
  std::vector<std::int64_t> shape;
  std::size_t offset_elements = 0;
  std::size_t num_elements = 0;
  ElementRange range() const { return {offset_elements, offset_elements + num_elements}; }
};

// Pure layout: tensors in declaration order, without gaps, then padding so that the total
// splits into world_size equal shards of a multiple of alignment_elements (padded_num_elements).
class FlatLayout {
 public:
  FlatLayout() = default;
  // Throws zero::Error for duplicate or empty names and negative dimensions.
  FlatLayout(std::vector<TensorSpec> tensors, int world_size, std::size_t alignment_elements);

  const std::vector<TensorSlot>& slots() const { return slots_; }
  // Throws zero::Error naming the known tensors when `name` is not one of them.
  const TensorSlot& slot(std::string_view name) const;
  std::size_t num_elements() const { return num_elements_; }  // without padding
  std::size_t padded_num_elements() const { return padded_num_elements_; }
  int world_size() const { return world_size_; }
  ElementRange shard(int rank) const {
    return shard_range(padded_num_elements_, world_size_, rank);
  }

 private:
  std::vector<TensorSlot> slots_;
  std::size_t num_elements_ = 0;
  std::size_t padded_num_elements_ = 0;
  int world_size_ = 1;
};

// A view of one tensor inside a flat buffer: typed pointer, shape and its place in the layout.
template <typename T>
struct TensorView {
  T* data = nullptr;
  const TensorSlot* slot = nullptr;
  std::span<T> span() const { return {data, slot->num_elements}; }
};

// Owns the memory of a FlatLayout (all padded elements, padding zeroed) in one dtype.
class FlatBuffer {
 public:
  FlatBuffer() = default;
  FlatBuffer(FlatLayout layout, DType dtype, Allocator& allocator, MemoryCategory category);

  const FlatLayout& layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  void* data() const { return buffer_.data(); }
  std::size_t size_bytes() const { return buffer_.size_bytes(); }

  // Typed view of a named tensor; T's size must match the dtype.
  template <typename T>
  TensorView<T> view(std::string_view name) const {
    check_element_size(sizeof(T));
    const TensorSlot& slot = layout_.slot(name);
    return {static_cast<T*>(buffer_.data()) + slot.offset_elements, &slot};
  }
  // Pointer to element `offset_elements` (any dtype).
  void* element(std::size_t offset_elements) const;

 private:
  void check_element_size(std::size_t element_size) const;

  FlatLayout layout_;
  DType dtype_ = DType::kFloat32;
  Buffer buffer_;
};

}  // namespace zero
