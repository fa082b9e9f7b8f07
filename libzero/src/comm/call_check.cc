// The call check and watchdog report shared by the MPI and Gloo communicators.
#include "call_check.h"

#include <cstring>
#include <sstream>

#include "zero/core/error.h"

namespace zero::detail {

using Clock = std::chrono::steady_clock;

WireCall to_wire(const CollectiveInfo& info) {
  WireCall wire{info.sequence,
                info.count,
                info.root,
                static_cast<std::uint8_t>(info.op),
                static_cast<std::uint8_t>(info.dtype),
                static_cast<std::uint8_t>(info.reduce_op),
                0,
                0,
                {}};
  info.label.copy(wire.label, kMaxCollectiveLabel);  // Communicator::issue cut it to fit
  return wire;
}

CollectiveInfo from_wire(const WireCall& wire) {
  return {wire.sequence,
          static_cast<CollectiveOp>(wire.op),
          static_cast<DType>(wire.dtype),
          wire.count,
          static_cast<ReduceOp>(wire.reduce_op),
          wire.root,
          std::string(wire.label, strnlen(wire.label, kMaxCollectiveLabel))};
}

void check_calls_agree(int rank, const CollectiveInfo& mine, const std::vector<WireCall>& calls) {
  std::vector<CollectiveInfo> infos;
  bool agree = true;
  for (const WireCall& call : calls) {
    infos.push_back(from_wire(call));
    agree = agree && infos.back().same_call(mine) && infos.back().sequence == mine.sequence;
  }
  if (!agree) ZERO_THROW(describe_disagreement(rank, infos));
}

CallState::CallState() : since_(Clock::now()) {}

void CallState::begin(const CollectiveInfo& info) {
  std::lock_guard lock(mutex_);
  current_ = to_wire(info);
  in_collective_ = true;
  since_ = Clock::now();
}

void CallState::end() {
  std::lock_guard lock(mutex_);
  in_collective_ = false;
  since_ = Clock::now();
}

WireStatus CallState::status() const {
  WireStatus reply{};
  std::lock_guard lock(mutex_);
  reply.call = current_;
  reply.in_collective = in_collective_ ? 1 : 0;
  reply.seconds_in_state = std::chrono::duration<double>(Clock::now() - since_).count();
  return reply;
}

namespace {

std::string describe(const WireStatus& status) {
  std::ostringstream out;
  if (status.call.sequence == 0) {
    out << "has issued no collective yet (" << status.seconds_in_state << " s since start)";
  } else {
    out << (status.in_collective ? "waiting in " : "not in a collective; last finished ")
        << from_wire(status.call).to_string() << " (" << status.seconds_in_state << " s ago)";
  }
  return out.str();
}

}  // namespace

std::string watchdog_report(const CollectiveInfo& info, int rank, int world_size,
                            std::chrono::milliseconds timeout, const char* phase,
                            const std::vector<WireStatus>& statuses,
                            const std::vector<int>& answered, const std::string& failure) {
  std::ostringstream behind, detail;
  std::vector<int> behind_ranks, silent_ranks;
  for (int r = 0; r < world_size; ++r) {
    detail << "\n  rank " << r << ": ";
    if (r == rank) {
      detail << "waiting in " << info.to_string() << " (this rank)";
      continue;
    }
    if (!answered[r]) {
      detail << "did not answer within " << kStatusAnswerWait.count()
             << " s (hung process, or dead)";
      behind_ranks.push_back(r);
      silent_ranks.push_back(r);
      continue;
    }
    const WireStatus& status = statuses[r];
    detail << describe(status);
    const CollectiveInfo theirs = from_wire(status.call);
    if (theirs.sequence < info.sequence ||
        (theirs.sequence == info.sequence && !theirs.same_call(info))) {
      behind_ranks.push_back(r);
    }
  }
  for (std::size_t i = 0; i < behind_ranks.size(); ++i)
    behind << (i ? ", " : "") << behind_ranks[i];
  std::ostringstream out;
  out << "watchdog: collective " << info.to_string();
  if (failure.empty()) {
    out << " timed out after " << std::chrono::duration<double>(timeout).count() << " s ";
  } else {
    out << " failed (" << failure << ") ";
  }
  out << phase << " on rank " << rank << " of " << world_size << "; "
      << (behind_ranks.empty() ? std::string("no rank is behind (a transport stall)")
                               : "rank(s) " + behind.str() + " never reached it");
  if (!silent_ranks.empty()) {
    out << " (";
    for (std::size_t i = 0; i < silent_ranks.size(); ++i) out << (i ? ", " : "") << silent_ranks[i];
    out << (silent_ranks.size() > 1 ? " are" : " is") << " dead or hung)";
  }
  out << ". Where each rank is:" << detail.str()
      << "\n(The timeout is set by ZERO_COMM_TIMEOUT_S.)";
  return out.str();
}

}  // namespace zero::detail
