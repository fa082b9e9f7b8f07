// A communicator that plays rank `rank` of a world of `world_size` alone: every collective is
// numbered, checked and recorded on the communication stream, in order, as a real backend would
// run it, but nothing is sent and no buffer is touched (the planning device context's buffers have
// no memory). With it and make_planning_context(), one process runs the exact allocation sequence
// of any rank of any world size (the planner, `zero estimate`).
#pragma once

#include <mutex>
#include <vector>

#include "zero/comm/communicator.h"

namespace zero {

class PlanningCommunicator final : public Communicator {
 public:
  // Throws zero::Error unless 0 <= rank < world_size. `stream`: the communication stream (null:
  // a CpuStream, a worker thread). The planner passes the planning context's in-order stream
  // (DeviceContext::make_stream), so frees the engine queues there run in program order and a
  // plan is the same every time.
  PlanningCommunicator(int rank, int world_size, CommOptions options = {},
                       std::unique_ptr<Stream> stream = nullptr);
  ~PlanningCommunicator() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::string_view backend() const override { return "planning"; }
  bool moves_data() const override { return false; }
  // The collectives the stream has run so far, in order (synchronize() first for all of them).
  std::vector<CollectiveInfo> calls() const;

 protected:
  void run(const CollectiveInfo& info, const void* send, void* recv) override;

 private:
  int rank_;
  int world_size_;
  mutable std::mutex mutex_;
  std::vector<CollectiveInfo> calls_;
};

}  // namespace zero
