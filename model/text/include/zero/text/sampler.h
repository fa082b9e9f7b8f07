// The distributed sampler: which blocks each rank trains on at each step, shuffled by (seed,
// epoch), with global batches that do not depend on the world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zero::text {

struct SamplerOptions {
  std::size_t num_blocks = 0;
  std::size_t global_batch_size = 1;  // blocks per global batch: per-rank batch × world size
  int world_size = 1;
  int rank = 0;
  std::uint64_t seed = 42;
  bool shuffle = true;
  // The last global batch of an epoch when num_blocks is not a multiple of global_batch_size:
  //   false: completed with the first blocks of the same epoch's order (PyTorch
  //          DistributedSampler's padding): every block is seen at least once per epoch, the
  //          num_blocks % G padding blocks twice.
  //   true:  dropped: the epoch's last num_blocks % G blocks of the order are not seen in that
  //          epoch (a different set each epoch when shuffled).
  bool drop_last = false;
};

// Where a run is, to save in a checkpoint and restore: global batches consumed so far.
struct SamplerPosition {
  std::uint64_t step = 0;
  bool operator==(const SamplerPosition&) const = default;
};

// Global batch s is the G consecutive blocks [b·G, (b+1)·G) of epoch e's order, with
// e = s / batches_per_epoch and b = s % batches_per_epoch; rank r gets the slice
// [r·G/W, (r+1)·G/W) of it. The order is a permutation of all blocks drawn from (seed, epoch) by a
// fixed generator (SplitMix64 + Fisher-Yates with unbiased bounded draws), the same on every
// machine. So a global batch holds the same blocks at any world size, ranks are disjoint within a
// batch, and a resumed run continues exactly. Not thread-safe (caches the current epoch's order).
class DistributedSampler {
 public:
  // Throws zero::Error when G is not a multiple of world_size, rank is outside the world, or the
  // dataset has no block (or, with drop_last, fewer blocks than one global batch).
  explicit DistributedSampler(SamplerOptions options);

  std::uint64_t batches_per_epoch() const { return batches_per_epoch_; }
  std::size_t local_batch_size() const { return options_.global_batch_size / options_.world_size; }
  std::uint64_t epoch_of(std::uint64_t step) const { return step / batches_per_epoch_; }
  // Hugging Face's rule: max_steps when > 0, else ceil(num_epochs × batches_per_epoch), so 0.1
  // epochs is the first tenth of epoch 0's order, rounded up to whole batches.
  std::uint64_t total_steps(double num_epochs, std::int64_t max_steps) const;

  std::vector<std::size_t> epoch_order(std::uint64_t epoch) const { return order_for(epoch); }
  std::vector<std::size_t> global_batch(std::uint64_t step) const;
  std::vector<std::size_t> local_batch(std::uint64_t step) const;

  // The cursor: next() returns this rank's batch at position().step and advances it.
  std::vector<std::size_t> next();
  SamplerPosition position() const { return position_; }
  void set_position(SamplerPosition position) { position_ = position; }

 private:
  const std::vector<std::size_t>& order_for(std::uint64_t epoch) const;  // cached
  SamplerOptions options_;
  std::uint64_t batches_per_epoch_ = 0;
  SamplerPosition position_;
  mutable std::uint64_t cached_epoch_ = ~0ull;
  mutable std::vector<std::size_t> cached_order_;
};

// The permutation of [0, n) for (seed, epoch): the sampler's order, exposed for tests and tools.
std::vector<std::size_t> shuffled_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch);

}  // namespace zero::text
