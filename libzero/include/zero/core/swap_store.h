// SwapStore: one rank's fixed-size regions on a slower tier (ZeRO-Infinity's NVMe swap), read and
// written asynchronously between host buffers and per-rank files. The engine's offload (optimizer
// state and stage-3 parameter shards with `device: nvme`) moves its tiles through it, making its
// stores with the SwapStoreFactory it was given (Engine::set_swap_store_factory). The NVMe
// implementation (liburing, aligned O_DIRECT I/O) is zero::offload's make_nvme_swap_store()
// (zero/offload/nvme_swap_store.h); zero::make_engine (zero/factory/engine_factory.h) installs it.
//
// Contract:
// - Regions are declared with add_region() before their first I/O; the file space is reserved at
//   once (so a full filesystem fails there, naming the path), and the bytes count under the
//   ledger's nvme space in the given category.
// - write()/read() start a transfer of the whole region (read_range() of an aligned part of it)
//   and return at once; the host buffer must stay alive and untouched until wait() on the
//   returned ticket. Host buffers are aligned to io_alignment() and at least padded_bytes(region)
//   long (read_range: its bytes), allocate them that way.
// - wait() returns when the transfer is complete, or throws zero::Error naming the file and what
//   went wrong (short read, ENOSPC, EIO, file removed or truncated, ...). After an error every
//   later call throws the first error (sticky, as streams are).
// - The files are removed when the store is destroyed (and are never shared between ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "zero/core/memory_ledger.h"

namespace zero {

struct SwapTicket {
  std::uint64_t id = 0;  // 0: nothing to wait for
};

// What a store has moved since it was made, per direction: bytes (padded to io_alignment()) and
// the wall time with at least one transfer of that direction in flight, so bytes / seconds is the
// rate the transfers ran at, however many were in flight together.
struct SwapTraffic {
  std::int64_t bytes_read = 0;
  std::int64_t bytes_written = 0;
  double read_seconds = 0.0;
  double write_seconds = 0.0;
  SwapTraffic& operator+=(const SwapTraffic& other) {
    bytes_read += other.bytes_read;
    bytes_written += other.bytes_written;
    read_seconds += other.read_seconds;
    write_seconds += other.write_seconds;
    return *this;
  }
  SwapTraffic operator-(const SwapTraffic& earlier) const {
    return {bytes_read - earlier.bytes_read, bytes_written - earlier.bytes_written,
            read_seconds - earlier.read_seconds, write_seconds - earlier.write_seconds};
  }
  // 10^9 bytes per second of busy time; 0 when nothing moved.
  double read_gb_per_s() const { return rate(bytes_read, read_seconds); }
  double write_gb_per_s() const { return rate(bytes_written, write_seconds); }

 private:
  static double rate(std::int64_t bytes, double seconds) {
    return bytes > 0 && seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
  }
};

class SwapStore {
 public:
  virtual ~SwapStore() = default;

  // Declares a region of `bytes` bytes (label for error messages, e.g. "optimizer_state tile 3").
  virtual int add_region(std::string label, std::size_t bytes, MemoryCategory category) = 0;
  virtual SwapTicket write(int region, const void* source) = 0;
  virtual SwapTicket read(int region, void* destination) = 0;
  // Reads bytes [offset, offset + bytes) of the region into `destination` (its first byte lands
  // at destination[0]), as read() does the whole region: offset and bytes are multiples of
  // io_alignment() and offset + bytes <= padded_bytes(region), else zero::Error naming the region.
  // Engine::gather_master reads one unit's part of its sub-group's master region this way.
  virtual SwapTicket read_range(int region, std::size_t offset, std::size_t bytes,
                                void* destination) = 0;
  virtual void wait(SwapTicket ticket) = 0;
  // Waits for every transfer issued so far, from any thread, and finishes their tickets. Where
  // several parts share one store (an offloaded step's slots and stage 3's parameter reads),
  // each waits its own tickets; wait_all is for a store no one else is using (tests' doubles
  // refuse a later wait on a ticket it finished).
  virtual void wait_all() = 0;

  // Alignment of host buffers and of region sizes for direct I/O (the filesystem's block size).
  virtual std::size_t io_alignment() const = 0;
  // A region's size rounded up to io_alignment(): the host buffer size to allocate.
  virtual std::size_t padded_bytes(int region) const = 0;
  // The folder holding this rank's swap files.
  virtual const std::filesystem::path& directory() const = 0;
  // The traffic so far (a store that does not count returns zeros). Any thread.
  virtual SwapTraffic traffic() const { return {}; }
};

// The I/O settings of a store (DeepSpeed's "aio" section, mapped from the config where it is read:
// engine_options_from_config). How each maps to liburing: offload/src/nvme_swap_store.cc.
struct AioSettings {
  std::int64_t block_size = 1'048'576;    // bytes per request
  std::int64_t queue_depth = 8;           // requests in flight per ring
  std::int64_t intra_op_parallelism = 1;  // rings (and threads); DeepSpeed's old name thread_count
  bool single_submit = false;
  bool overlap_events = true;
  bool use_gds = false;  // GPUDirect Storage: not supported, ignored with a warning
};

// What a store is made from: one per nvme_path in use on a rank.
struct NvmeSwapOptions {
  std::filesystem::path nvme_path;  // the config's nvme_path; must exist and be writable
  int rank = 0;
  AioSettings aio;
  MemoryLedger* ledger = nullptr;  // records the regions under MemorySpace::kNvme
};

// Makes the SwapStore for `device: nvme` offload, or throws zero::Error naming the path and what
// is wrong with it.
using SwapStoreFactory = std::function<std::unique_ptr<SwapStore>(const NvmeSwapOptions&)>;

}  // namespace zero
