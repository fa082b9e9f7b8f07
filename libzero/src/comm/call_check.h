// The call check and watchdog report shared by the multi-process communicators (MPI, Gloo):
// the fixed-size wire form of a collective call that ranks all-gather before each collective, the
// status a rank reports about itself, and the text of the errors both raise (internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"

namespace zero::detail {

// The wire form of a CollectiveInfo (fixed size, so ranks can all-gather it).
struct WireCall {
  std::uint64_t sequence;
  std::uint64_t count;
  std::int32_t root;
  std::uint8_t op, dtype, reduce_op, pad;
  std::uint32_t pad2;
  char label[kMaxCollectiveLabel + 1];  // NUL-terminated
};
static_assert(sizeof(WireCall) == 64);

WireCall to_wire(const CollectiveInfo& info);
CollectiveInfo from_wire(const WireCall& wire);

// Throws zero::Error (describe_disagreement) unless every rank's call in `calls` (rank order) is
// `mine` with the same sequence number.
void check_calls_agree(int rank, const CollectiveInfo& mine, const std::vector<WireCall>& calls);

// What a rank's status thread reports about it.
struct WireStatus {
  WireCall call;               // the last collective issued (sequence 0: none yet)
  std::int32_t in_collective;  // 1 while that collective runs, 0 once it finished
  std::int32_t pad;
  double seconds_in_state;
};
static_assert(sizeof(WireStatus) == 80);

// A rank's own state, kept by the communication stream and read by its status thread.
class CallState {
 public:
  CallState();
  void begin(const CollectiveInfo& info);
  void end();
  WireStatus status() const;

 private:
  mutable std::mutex mutex_;
  WireCall current_{};
  bool in_collective_ = false;
  std::chrono::steady_clock::time_point since_;
};

// How long a rank waits for the others' status answers before calling them dead or hung.
inline constexpr std::chrono::seconds kStatusAnswerWait{5};

// The watchdog's error for `info` stuck or failed on `rank`: `statuses[r]` is rank r's answer
// where `answered[r]`. `failure` is empty for a timeout, else what the transport reported (a peer
// that closed its connection). Names the ranks that never reached the collective.
std::string watchdog_report(const CollectiveInfo& info, int rank, int world_size,
                            std::chrono::milliseconds timeout, const char* phase,
                            const std::vector<WireStatus>& statuses,
                            const std::vector<int>& answered, const std::string& failure = {});

// Asks the other ranks of every live Gloo communicator to end their processes (abort_job calls it
// before exiting; MPI_Abort does the same for MPI). Does nothing in a build without Gloo.
void abort_gloo_peers(int exit_code);

}  // namespace zero::detail
