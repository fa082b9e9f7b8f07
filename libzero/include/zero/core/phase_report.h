// Where this process is, for an observer outside it (benchmarks/chaos_soak.sh kills ranks
// mid-step, mid-collective and mid-save by it). With ZERO_PHASE_DIR set, each process keeps one
// text line in <ZERO_PHASE_DIR>/rank<r>-<pid>:
//   rank R phase P collective C
// P: "start" (launch, rendezvous, loading and resuming), then the trainer's phases as RunMemory
// enters them (train, evaluation, checkpoint, final_save); C: the collective running on a
// communication stream, as <op>#<sequence> ("-": none). The step is metrics.jsonl's last line.
// The file is a shared mapping of kPhaseLineBytes, rewritten whole at every change: a reader sees
// each change at once and the last one survives a SIGKILL. A read racing a write may see a mixed
// line; read again. Without ZERO_PHASE_DIR every call is one branch.
#pragma once

#include <cstdint>
#include <string_view>

namespace zero {

inline constexpr int kPhaseLineBytes = 128;

// Opens the report of rank `rank` when ZERO_PHASE_DIR is set (once per process; later calls do
// nothing). Throws zero::Error naming the folder when it cannot be written. Main thread, before
// the first collective (make_communicator calls it).
void start_phase_report(int rank);

// Thread-safe; no-ops until start_phase_report() opened a report. Never throw.
void report_phase(std::string_view phase) noexcept;  // spaces become '_'

// Marks a collective in flight for its lifetime (the communication stream, around its run).
class CollectiveReport {
 public:
  CollectiveReport(std::string_view op, std::uint64_t sequence) noexcept;
  ~CollectiveReport();
  CollectiveReport(const CollectiveReport&) = delete;
  CollectiveReport& operator=(const CollectiveReport&) = delete;

 private:
  bool active_ = false;
};

}  // namespace zero
