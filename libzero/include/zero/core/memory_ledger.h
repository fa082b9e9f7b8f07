// Per-rank accounting of every byte zero allocates: current and peak bytes per (space, category).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace zero {

// Where bytes live. On a CPU-only build "device" is ordinary host memory labelled as device, so
// budgets and offload are exercised without a GPU.
enum class MemorySpace : std::uint8_t { kDevice, kHostPinned, kHost, kNvme };
inline constexpr std::size_t kNumMemorySpaces = 4;

// What the bytes are for.
enum class MemoryCategory : std::uint8_t {
  kParams,          // full compute-precision parameters (gathered units, replicated stages)
  kParamShard,      // this rank's shard of the compute-precision parameters (stage 3)
  kGrads,           // full gradients / gradient buckets before reduction
  kGradShard,       // this rank's reduced gradient shard
  kMasterParams,    // fp32 master weights (only when compute precision is not fp32)
  kOptimizerState,  // optimizer moments
  kActivations,
  kCommBuffers,
  kWorkspace,
};
inline constexpr std::size_t kNumMemoryCategories = 9;

std::string_view name_of(MemorySpace space);        // "device", "host_pinned", "host", "nvme"
std::string_view name_of(MemoryCategory category);  // "params", "param_shard", ...

struct LedgerEntry {
  std::int64_t current_bytes = 0;
  std::int64_t peak_bytes = 0;
};

// Thread-safe. Peaks are tracked per (space, category) and per space in total; the peak of a
// space's total is not the sum of its categories' peaks, so both are kept.
class MemoryLedger {
 public:
  void record_allocation(MemorySpace space, MemoryCategory category, std::size_t size_bytes);
  // Throws zero::Error when more is freed than is held under (space, category).
  void record_free(MemorySpace space, MemoryCategory category, std::size_t size_bytes);

  // Bytes an allocator holds for reuse (freed by their owners, not returned to the system): +size
  // when a freed block is kept, -size when it is handed out again or returned.
  void record_cached(MemorySpace space, std::int64_t delta_bytes);

  LedgerEntry entry(MemorySpace space, MemoryCategory category) const;
  // In use: the sum of the space's categories.
  LedgerEntry space_total(MemorySpace space) const;
  // In use plus cached: what the allocators hold from the system.
  LedgerEntry space_reserved(MemorySpace space) const;
  // Forgets peaks (sets each peak to the current value); current bytes are kept.
  void reset_peaks();

  // A table with one row per (space, category) that was ever used, current and peak bytes in
  // human units and exact bytes, a total row per space, and a reserved row (total + cached) for
  // spaces where an allocator ever cached. `title` heads it (e.g. "rank 0").
  std::string report(std::string_view title = {}) const;

 private:
  mutable std::mutex mutex_;
  std::array<std::array<LedgerEntry, kNumMemoryCategories>, kNumMemorySpaces> entries_{};
  std::array<LedgerEntry, kNumMemorySpaces> totals_{};
  std::array<LedgerEntry, kNumMemorySpaces> reserved_{};
  std::array<std::int64_t, kNumMemorySpaces> cached_{};
  std::array<bool, kNumMemorySpaces> cached_used_{};
  std::array<std::array<bool, kNumMemoryCategories>, kNumMemorySpaces> used_{};
};

// "1.50 GiB", "12.0 KiB", "512 B".
std::string format_bytes(std::int64_t size_bytes);

}  // namespace zero
