// An in-process communicator over threads: one ThreadCommGroup, one thread per rank. Tests the
// sharding bookkeeping at any world size without mpirun; reductions run in rank order, so results
// are bit-identical on every rank and deterministic. Ranks that call different collectives at the
// same sequence number fail at once with a message naming both calls.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zero/comm/communicator.h"

namespace zero {

class ThreadCommGroup {
 public:
  explicit ThreadCommGroup(int world_size, CommOptions options = {});
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

// Runs body(communicator) on world_size threads, one per rank, and joins them. If any rank
// throws, the group is aborted (waiting peers fail instead of hanging) and the first error is
// rethrown here, prefixed with its rank.
void run_ranks(int world_size, const std::function<void(Communicator&)>& body,
               CommOptions options = {});

}  // namespace zero
