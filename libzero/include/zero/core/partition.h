// Which contiguous range of a flat buffer each rank owns. Every component that needs a shard
// range (engine, planner, checkpoint resharding) calls these functions and nothing else.
#pragma once

#include <cstddef>

namespace zero {

// A half-open element range [begin, end).
struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const ElementRange&) const = default;
};

// The size a flat buffer of `num_elements` is padded to so it splits into `world_size` equal
// shards, each a multiple of `alignment_elements`: the least multiple of world_size × alignment
// that is >= num_elements (0 stays 0). Throws zero::Error for world_size < 1 or alignment < 1.
std::size_t padded_num_elements(std::size_t num_elements, int world_size,
                                std::size_t alignment_elements);

// Rank `rank`'s shard of a buffer padded to `padded_elements` (a multiple of world_size):
// [rank·S, (rank+1)·S) with S = padded_elements / world_size. Throws for a rank outside
// [0, world_size) or a size that is not a multiple of world_size.
ElementRange shard_range(std::size_t padded_elements, int world_size, int rank);

// The overlap of two ranges (empty when they do not meet).
ElementRange intersect(ElementRange a, ElementRange b);

}  // namespace zero
