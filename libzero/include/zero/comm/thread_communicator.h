// An in-process communicator over threads: one ThreadCommGroup, one thread per rank, all ranks on
// one DeviceContext (host memory by default; one CUDA device's memory with a CUDA context, where
// NCCL refuses two ranks on one device). Each collective is stream work of that context on the
// rank's own communication stream: copies between the ranks' buffers and, for sums, the context's
// convert and axpy in fp32 in rank order (so results are bit-identical on every rank and
// deterministic, whatever the thread timing). Ranks meet on the host only to exchange pointers and
// events when they call; the streams order against each other with events, never host waits.
// Ranks that call different collectives at the same sequence number fail at once, on their
// streams, with a message naming both calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zero/comm/communicator.h"

namespace zero {

class DeviceContext;  // zero/core/device_context.h

class ThreadCommGroup {
 public:
  // Collective buffers live in `context`'s memory (device pointers of a CUDA context's device;
  // any buffer of that device, whichever context allocated it); `context` must outlive the group.
  // Null: the group owns a CPU context, and buffers are host memory.
  explicit ThreadCommGroup(int world_size, CommOptions options = {},
                           DeviceContext* context = nullptr);
  ~ThreadCommGroup();
  ThreadCommGroup(const ThreadCommGroup&) = delete;
  ThreadCommGroup& operator=(const ThreadCommGroup&) = delete;

  int world_size() const;
  // The communicator of `rank`; each may be used by one thread at a time.
  Communicator& communicator(int rank);
  // Makes every waiting and future collective of the group fail with `reason`.
  void abort(const std::string& reason);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
};

// Runs body(communicator) on world_size threads, one per rank, and joins them; the group's
// collective buffers on `context` as above. If any rank throws, the group is aborted (waiting peers
// fail instead of hanging) and the first error is rethrown here, prefixed with its rank.
void run_ranks(int world_size, const std::function<void(Communicator&)>& body,
               CommOptions options = {}, DeviceContext* context = nullptr);

}  // namespace zero
