// The phase report (phase_report.h): one mapped line per process, rewritten under a lock.
#include "zero/core/phase_report.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "zero/core/error.h"

namespace zero {
namespace {

struct PhaseReport {
  std::mutex mutex;
  char* line = nullptr;  // kPhaseLineBytes, shared with the file
  int rank = 0;
  std::string phase = "start";
  int collectives_in_flight = 0;
  std::string collective = "-";

  // The whole line in one copy, padded with spaces, ending in '\n'. Caller holds `mutex`.
  void write() noexcept {
    char text[kPhaseLineBytes];
    std::memset(text, ' ', sizeof text);
    const int length =
        std::snprintf(text, sizeof text, "rank %d phase %s collective %s", rank, phase.c_str(),
                      collectives_in_flight > 0 ? collective.c_str() : "-");
    if (length >= 0 && length < kPhaseLineBytes) text[length] = ' ';
    text[kPhaseLineBytes - 1] = '\n';
    std::memcpy(line, text, sizeof text);
  }
};

std::atomic<PhaseReport*> g_report{nullptr};
std::mutex g_start_mutex;

// A word of the line: no spaces, at most 40 characters.
std::string word(std::string_view text) {
  std::string out(text.substr(0, 40));
  for (char& c : out)
    if (c == ' ' || c == '\n' || c == '\t') c = '_';
  return out.empty() ? std::string("-") : out;
}

}  // namespace

void start_phase_report(int rank) {
  const char* folder = std::getenv("ZERO_PHASE_DIR");
  if (folder == nullptr || *folder == '\0') return;
  std::lock_guard lock(g_start_mutex);
  if (g_report.load() != nullptr) return;
  const std::string path = std::string(folder) + "/rank" + std::to_string(rank) + "-" +
                           std::to_string(static_cast<long long>(::getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZERO_CHECK(fd >= 0, "ZERO_PHASE_DIR='", folder, "': cannot create ", path, ": ",
             std::strerror(errno));
  void* mapped = MAP_FAILED;
  if (::ftruncate(fd, kPhaseLineBytes) == 0)
    mapped = ::mmap(nullptr, kPhaseLineBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int saved = errno;
  ::close(fd);
  ZERO_CHECK(mapped != MAP_FAILED, "ZERO_PHASE_DIR='", folder, "': cannot map ", path, ": ",
             std::strerror(saved));
  auto* report = new PhaseReport;  // lives as long as the process: other threads may report late
  report->line = static_cast<char*>(mapped);
  report->rank = rank;
  report->write();
  g_report.store(report);
}

void report_phase(std::string_view phase) noexcept {
  PhaseReport* report = g_report.load(std::memory_order_acquire);
  if (report == nullptr) return;
  try {
    std::lock_guard lock(report->mutex);
    report->phase = word(phase);
    report->write();
  } catch (...) {
    // A report is best effort: an allocation failing here must not end the run.
  }
}

CollectiveReport::CollectiveReport(std::string_view op, std::uint64_t sequence) noexcept {
  PhaseReport* report = g_report.load(std::memory_order_acquire);
  if (report == nullptr) return;
  try {
    std::lock_guard lock(report->mutex);
    report->collective = word(op) + "#" + std::to_string(sequence);
    ++report->collectives_in_flight;
    report->write();
    active_ = true;
  } catch (...) {
    // As in report_phase.
  }
}

CollectiveReport::~CollectiveReport() {
  if (!active_) return;
  PhaseReport* report = g_report.load(std::memory_order_acquire);
  std::lock_guard lock(report->mutex);
  --report->collectives_in_flight;
  report->write();
}

}  // namespace zero
