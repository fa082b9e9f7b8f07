// An in-memory SwapStore for the engine's nvme offload tests: regions are host vectors, recorded
// under the ledger's nvme space as the real store records its files. Transfers are deferred to
// wait(), so an engine that reads a buffer before waiting for its read, or changes a buffer
// before its write was waited for, sees wrong values (and fails parity); host buffers must be
// aligned to io_alignment(), and a read of a region with a write in flight is an error. Any
// thread may call it (the engine's copy stream swaps gradient windows while the host thread swaps
// parameter shards). With `record_events`, every call is logged in order ("read <label>",
// "write <label>", "wait read <label>", "wait write <label>"), so a test can check what overlaps
// what without timing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "zero/core/error.h"
#include "zero/core/swap_store.h"
#include "zero/engine/engine.h"

namespace zero::testing {

struct SwapStoreCounters {
  std::mutex mutex;
  // Fault injection: the read with this 1-based number fails (as a short read would), and every
  // later call of that store fails with the same error (sticky, as the real store). 0: none.
  int fail_read = 0;
  int reads = 0;
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  int stores = 0;
  std::vector<std::string> paths;  // nvme_path of each store made
  bool record_events = false;
  std::vector<std::string> events;
  // Waits for reads of parameter shards ("param_shard <unit>" regions), and how many of them ran
  // on `compute_thread` (the thread that trains, set by the test): the engine issues those reads
  // there and waits for them on its copy stream, so the model never stalls on one.
  std::thread::id compute_thread;
  int param_read_waits = 0;
  int param_read_waits_on_compute_thread = 0;
  void record(std::string event) {
    std::lock_guard lock(mutex);
    if (record_events) events.push_back(std::move(event));
  }
};

class MemorySwapStore final : public SwapStore {
 public:
  MemorySwapStore(const NvmeSwapOptions& options, SwapStoreCounters* counters)
      : ledger_(options.ledger), counters_(counters), directory_(options.nvme_path) {}
  ~MemorySwapStore() override {
    for (const Region& region : regions_)
      if (ledger_) ledger_->record_free(MemorySpace::kNvme, region.category, region.bytes);
  }

  int add_region(std::string label, std::size_t bytes, MemoryCategory category) override {
    std::lock_guard lock(mutex_);
    if (ledger_) ledger_->record_allocation(MemorySpace::kNvme, category, bytes);
    regions_.push_back({std::move(label), bytes, category, std::vector<char>(bytes, 0)});
    return static_cast<int>(regions_.size() - 1);
  }
  SwapTicket write(int region, const void* source) override {
    std::lock_guard lock(mutex_);
    return start(region, const_cast<void*>(source), true);
  }
  SwapTicket read(int region, void* destination) override {
    std::lock_guard lock(mutex_);
    for (const auto& [id, pending] : pending_)
      ZERO_CHECK(!(pending.region == region && pending.write), "read of '",
                 regions_.at(region).label, "' while a write to it is in flight");
    return start(region, destination, false);
  }
  // The real store's rules: whole io_alignment() blocks inside the padded region; the padding past
  // the region's bytes reads as zeros.
  SwapTicket read_range(int region, std::size_t offset, std::size_t bytes,
                        void* destination) override {
    std::lock_guard lock(mutex_);
    ZERO_CHECK(region >= 0 && region < static_cast<int>(regions_.size()), "no swap region #",
               region);
    ZERO_CHECK(offset % io_alignment() == 0 && bytes % io_alignment() == 0 &&
                   offset <= padded_bytes(region) && bytes <= padded_bytes(region) - offset,
               "read of ", bytes, " bytes at ", offset, " of '", regions_[region].label,
               "': not whole blocks inside its ", padded_bytes(region), " padded bytes");
    for (const auto& [id, pending] : pending_)
      ZERO_CHECK(!(pending.region == region && pending.write), "read of '",
                 regions_.at(region).label, "' while a write to it is in flight");
    const SwapTicket ticket = start(region, destination, false);
    pending_[ticket.id].offset = offset;
    pending_[ticket.id].bytes = bytes;
    return ticket;
  }
  void wait(SwapTicket ticket) override {
    std::lock_guard lock(mutex_);
    check_sticky();
    if (ticket.id == 0) return;
    auto it = pending_.find(ticket.id);
    ZERO_CHECK(it != pending_.end(), "wait on unknown or finished swap ticket ", ticket.id);
    run(it->second);
    pending_.erase(it);
  }
  void wait_all() override {
    std::lock_guard lock(mutex_);
    for (auto& [id, pending] : pending_) run(pending);
    pending_.clear();
  }
  std::size_t io_alignment() const override { return 4096; }
  std::size_t padded_bytes(int region) const override {
    return (regions_.at(region).bytes + 4095) / 4096 * 4096;
  }
  const std::filesystem::path& directory() const override { return directory_; }

 private:
  struct Region {
    std::string label;
    std::size_t bytes;
    MemoryCategory category;
    std::vector<char> data;
  };
  struct Pending {
    int region;
    void* buffer;
    bool write;
    std::size_t offset = 0;                            // read_range: the part read
    std::size_t bytes = static_cast<std::size_t>(-1);  // -1: the whole region
  };
  SwapTicket start(int region, void* buffer, bool write) {
    check_sticky();
    ZERO_CHECK(region >= 0 && region < static_cast<int>(regions_.size()), "no swap region #",
               region);
    ZERO_CHECK(reinterpret_cast<std::uintptr_t>(buffer) % io_alignment() == 0, "swap buffer for '",
               regions_[region].label, "' is not aligned to ", io_alignment(), " bytes");
    pending_[++next_] = {region, buffer, write, 0, static_cast<std::size_t>(-1)};
    if (counters_) counters_->record((write ? "write " : "read ") + regions_[region].label);
    return {next_};
  }
  void check_sticky() const {
    if (!error_.empty()) ZERO_THROW(error_);
  }
  void run(const Pending& pending) {
    Region& region = regions_.at(pending.region);
    if (counters_) counters_->record((pending.write ? "wait write " : "wait read ") + region.label);
    if (!pending.write && counters_ && region.label.starts_with("param_shard ")) {
      std::lock_guard lock(counters_->mutex);
      ++counters_->param_read_waits;
      counters_->param_read_waits_on_compute_thread +=
          std::this_thread::get_id() == counters_->compute_thread;
    }
    if (!pending.write && counters_) {
      std::lock_guard lock(counters_->mutex);
      if (++counters_->reads == counters_->fail_read)
        error_ = "short read of " + (directory_ / region.label).string() + ": 0 of " +
                 std::to_string(region.bytes) + " bytes (injected)";
    }
    check_sticky();
    const bool whole = pending.bytes == static_cast<std::size_t>(-1);
    if (pending.write) {
      std::memcpy(region.data.data(), pending.buffer, region.bytes);
    } else if (whole) {
      std::memcpy(pending.buffer, region.data.data(), region.bytes);
    } else {  // the region's bytes in the range, zeros past them
      const std::size_t held =
          std::min(pending.bytes, region.bytes - std::min(pending.offset, region.bytes));
      if (held > 0) std::memcpy(pending.buffer, region.data.data() + pending.offset, held);
      std::memset(static_cast<char*>(pending.buffer) + held, 0, pending.bytes - held);
    }
    if (counters_) {
      std::lock_guard lock(counters_->mutex);
      (pending.write ? counters_->bytes_written : counters_->bytes_read) +=
          static_cast<std::int64_t>(whole ? region.bytes : pending.bytes);
    }
  }

  MemoryLedger* ledger_;
  SwapStoreCounters* counters_;
  std::filesystem::path directory_;
  std::vector<Region> regions_;
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_ = 0;
  std::string error_;
  std::mutex mutex_;
};

inline SwapStoreFactory memory_swap_store_factory(SwapStoreCounters* counters = nullptr) {
  return [counters](const NvmeSwapOptions& options) -> std::unique_ptr<SwapStore> {
    if (counters) {
      std::lock_guard lock(counters->mutex);
      ++counters->stores;
      counters->paths.push_back(options.nvme_path.string());
    }
    return std::make_unique<MemorySwapStore>(options, counters);
  };
}

}  // namespace zero::testing
