// The distributed sampler: epoch orders from (seed, epoch), world-size-independent global batches.
#include "zero/text/sampler.h"

#include <cmath>
#include <numeric>

#include "zero/core/error.h"

namespace zero::text {

namespace {

// SplitMix64: a tiny generator with a fixed definition (std::shuffle's output is not portable).
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) without bias (Lemire's multiply-and-reject).
  std::uint64_t below(std::uint64_t bound) {
    __extension__ typedef unsigned __int128 uint128;
    uint128 product = static_cast<uint128>(next()) * bound;
    auto low = static_cast<std::uint64_t>(product);
    if (low < bound) {
      const std::uint64_t threshold = -bound % bound;
      while (low < threshold) {
        product = static_cast<uint128>(next()) * bound;
        low = static_cast<std::uint64_t>(product);
      }
    }
    return static_cast<std::uint64_t>(product >> 64);
  }
};

}  // namespace

std::vector<std::size_t> shuffled_order(std::size_t n, std::uint64_t seed, std::uint64_t epoch) {
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  SplitMix64 generator{seed * 0x9e3779b97f4a7c15ull ^ (epoch + 1) * 0xd1b54a32d192ed03ull};
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[generator.below(i)]);
  return order;
}

DistributedSampler::DistributedSampler(SamplerOptions options) : options_(options) {
  ZERO_CHECK(options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
             "sampler rank ", options_.rank, " outside a world of ", options_.world_size);
  ZERO_CHECK(options_.global_batch_size >= 1 &&
                 options_.global_batch_size % static_cast<std::size_t>(options_.world_size) == 0,
             "global batch of ", options_.global_batch_size, " blocks does not split evenly over ",
             options_.world_size, " ranks");
  ZERO_CHECK(options_.num_blocks > 0, "the dataset has no block to sample");
  const std::size_t g = options_.global_batch_size;
  batches_per_epoch_ =
      options_.drop_last ? options_.num_blocks / g : (options_.num_blocks + g - 1) / g;
  ZERO_CHECK(batches_per_epoch_ > 0, "the dataset's ", options_.num_blocks,
             " blocks do not fill one global batch of ", g, " with drop_last");
}

std::uint64_t DistributedSampler::total_steps(double num_epochs, std::int64_t max_steps) const {
  if (max_steps > 0) return static_cast<std::uint64_t>(max_steps);
  ZERO_CHECK(num_epochs > 0, "num_train_epochs must be positive when max_steps is not set, got ",
             num_epochs);
  return static_cast<std::uint64_t>(
      std::ceil(num_epochs * static_cast<double>(batches_per_epoch_)));
}

const std::vector<std::size_t>& DistributedSampler::order_for(std::uint64_t epoch) const {
  if (cached_epoch_ != epoch) {
    if (options_.shuffle) {
      cached_order_ = shuffled_order(options_.num_blocks, options_.seed, epoch);
    } else {
      cached_order_.resize(options_.num_blocks);
      std::iota(cached_order_.begin(), cached_order_.end(), std::size_t{0});
    }
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::vector<std::size_t> DistributedSampler::global_batch(std::uint64_t step) const {
  const std::vector<std::size_t>& order = order_for(epoch_of(step));
  const std::size_t g = options_.global_batch_size;
  const std::uint64_t first = (step % batches_per_epoch_) * g;
  std::vector<std::size_t> batch(g);
  for (std::size_t i = 0; i < g; ++i) batch[i] = order[(first + i) % order.size()];
  return batch;
}

std::vector<std::size_t> DistributedSampler::local_batch(std::uint64_t step) const {
  const std::vector<std::size_t> batch = global_batch(step);
  const std::size_t share = local_batch_size();
  const auto begin =
      batch.begin() + static_cast<std::ptrdiff_t>(share * static_cast<std::size_t>(options_.rank));
  return std::vector<std::size_t>(begin, begin + static_cast<std::ptrdiff_t>(share));
}

std::vector<std::size_t> DistributedSampler::next() {
  std::vector<std::size_t> batch = local_batch(position_.step);
  ++position_.step;
  return batch;
}

}  // namespace zero::text
