// PlanningCommunicator: rank r of a world of N alone; collectives recorded, not executed.
#include "zero/comm/planning_communicator.h"

#include "zero/core/error.h"

namespace zero {

PlanningCommunicator::PlanningCommunicator(int rank, int world_size, CommOptions options,
                                           std::unique_ptr<Stream> stream)
    : Communicator(options, std::move(stream)), rank_(rank), world_size_(world_size) {
  ZERO_CHECK(world_size >= 1, "a planning communicator needs a world of at least 1 rank, not ",
             world_size);
  ZERO_CHECK(rank >= 0 && rank < world_size, "planning communicator: rank ", rank,
             " is outside a world of ", world_size);
}

PlanningCommunicator::~PlanningCommunicator() {
  try {
    synchronize();  // the stream's tasks call run() on this object
  } catch (...) {
  }
}

std::vector<CollectiveInfo> PlanningCommunicator::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

void PlanningCommunicator::run(const CollectiveInfo& info, const void*, void*) {
  std::lock_guard lock(mutex_);
  calls_.push_back(info);
}

}  // namespace zero
