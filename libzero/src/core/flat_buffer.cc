// FlatLayout (tensors back to back, padded for sharding) and the FlatBuffer that owns one.
#include "zero/core/flat_buffer.h"

#include <cstring>
#include <set>
#include <sstream>

#include "zero/core/error.h"

namespace zero {

std::size_t TensorSpec::num_elements() const {
  std::size_t count = 1;
  for (std::int64_t dimension : shape) {
    ZERO_CHECK(dimension >= 0, "tensor '", name, "' has negative dimension ", dimension);
    count *= static_cast<std::size_t>(dimension);
  }
  return count;
}

FlatLayout::FlatLayout(std::vector<TensorSpec> tensors, int world_size,
                       std::size_t alignment_elements)
    : world_size_(world_size) {
  std::set<std::string> names;
  slots_.reserve(tensors.size());
  for (TensorSpec& tensor : tensors) {
    ZERO_CHECK(!tensor.name.empty(), "flat layout: tensor #", slots_.size(), " has an empty name");
    ZERO_CHECK(names.insert(tensor.name).second, "flat layout: tensor name '", tensor.name,
               "' appears twice");
    const std::size_t count = tensor.num_elements();
    slots_.push_back({std::move(tensor.name), std::move(tensor.shape), num_elements_, count});
    num_elements_ += count;
  }
  padded_num_elements_ = zero::padded_num_elements(num_elements_, world_size, alignment_elements);
}

const TensorSlot& FlatLayout::slot(std::string_view name) const {
  for (const TensorSlot& slot : slots_)
    if (slot.name == name) return slot;
  std::ostringstream known;
  for (const TensorSlot& slot : slots_) known << (known.tellp() > 0 ? ", " : "") << slot.name;
  ZERO_THROW("flat layout has no tensor '", name, "'; it has: ", known.str());
}

FlatBuffer::FlatBuffer(FlatLayout layout, DType dtype, Allocator& allocator,
                       MemoryCategory category)
    : layout_(std::move(layout)),
      dtype_(dtype),
      buffer_(allocator.allocate(layout_.padded_num_elements() * size_of(dtype), category)) {
  if (buffer_.data() != nullptr) {
    const std::size_t tail = layout_.padded_num_elements() - layout_.num_elements();
    std::memset(element(layout_.num_elements()), 0, tail * size_of(dtype_));
  }
}

void* FlatBuffer::element(std::size_t offset_elements) const {
  ZERO_DCHECK(offset_elements <= layout_.padded_num_elements(), "offset out of range");
  return static_cast<char*>(buffer_.data()) + offset_elements * size_of(dtype_);
}

void FlatBuffer::check_element_size(std::size_t element_size) const {
  ZERO_CHECK(element_size == size_of(dtype_), "view of element size ", element_size,
             " requested from a flat buffer of ", name_of(dtype_));
}

}  // namespace zero
