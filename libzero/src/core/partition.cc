// Shard-range arithmetic: the one definition of which elements each rank owns.
#include "zero/core/partition.h"

#include <algorithm>

#include "zero/core/error.h"

namespace zero {

std::size_t padded_num_elements(std::size_t num_elements, int world_size,
                                std::size_t alignment_elements) {
  ZERO_CHECK(world_size >= 1, "world size must be at least 1, got ", world_size);
  ZERO_CHECK(alignment_elements >= 1, "alignment must be at least 1 element, got ",
             alignment_elements);
  const std::size_t quantum = static_cast<std::size_t>(world_size) * alignment_elements;
  return (num_elements + quantum - 1) / quantum * quantum;
}

ElementRange shard_range(std::size_t padded_elements, int world_size, int rank) {
  ZERO_CHECK(world_size >= 1, "world size must be at least 1, got ", world_size);
  ZERO_CHECK(rank >= 0 && rank < world_size, "rank ", rank, " is outside world of size ",
             world_size);
  ZERO_CHECK(padded_elements % static_cast<std::size_t>(world_size) == 0, "flat buffer of ",
             padded_elements, " elements does not split into ", world_size,
             " equal shards; pad it with padded_num_elements()");
  const std::size_t shard = padded_elements / static_cast<std::size_t>(world_size);
  return {static_cast<std::size_t>(rank) * shard, static_cast<std::size_t>(rank + 1) * shard};
}

ElementRange intersect(ElementRange a, ElementRange b) {
  const std::size_t begin = std::max(a.begin, b.begin);
  const std::size_t end = std::min(a.end, b.end);
  return end > begin ? ElementRange{begin, end} : ElementRange{begin, begin};
}

}  // namespace zero
