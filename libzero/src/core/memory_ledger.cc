// MemoryLedger: current and peak bytes per (space, category), and the report table.
#include "zero/core/memory_ledger.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "zero/core/error.h"

namespace zero {

std::string_view name_of(MemorySpace space) {
  static constexpr std::string_view kNames[] = {"device", "host_pinned", "host", "nvme"};
  return kNames[static_cast<std::size_t>(space)];
}

std::string_view name_of(MemoryCategory category) {
  static constexpr std::string_view kNames[] = {"params",      "param_shard",   "grads",
                                                "grad_shard",  "master_params", "optimizer_state",
                                                "activations", "comm_buffers",  "workspace"};
  return kNames[static_cast<std::size_t>(category)];
}

void MemoryLedger::record_allocation(MemorySpace space, MemoryCategory category,
                                     std::size_t size_bytes) {
  const auto s = static_cast<std::size_t>(space);
  const auto c = static_cast<std::size_t>(category);
  std::lock_guard lock(mutex_);
  used_[s][c] = true;
  LedgerEntry& entry = entries_[s][c];
  entry.current_bytes += static_cast<std::int64_t>(size_bytes);
  entry.peak_bytes = std::max(entry.peak_bytes, entry.current_bytes);
  LedgerEntry& total = totals_[s];
  total.current_bytes += static_cast<std::int64_t>(size_bytes);
  total.peak_bytes = std::max(total.peak_bytes, total.current_bytes);
  LedgerEntry& reserved = reserved_[s];
  reserved.current_bytes = total.current_bytes + cached_[s];
  reserved.peak_bytes = std::max(reserved.peak_bytes, reserved.current_bytes);
}

void MemoryLedger::record_free(MemorySpace space, MemoryCategory category, std::size_t size_bytes) {
  const auto s = static_cast<std::size_t>(space);
  const auto c = static_cast<std::size_t>(category);
  std::lock_guard lock(mutex_);
  LedgerEntry& entry = entries_[s][c];
  ZERO_CHECK(entry.current_bytes >= static_cast<std::int64_t>(size_bytes),
             "memory ledger: freeing ", size_bytes, " bytes of ", name_of(space), "/",
             name_of(category), " but only ", entry.current_bytes, " are recorded");
  entry.current_bytes -= static_cast<std::int64_t>(size_bytes);
  totals_[s].current_bytes -= static_cast<std::int64_t>(size_bytes);
  reserved_[s].current_bytes = totals_[s].current_bytes + cached_[s];
}

void MemoryLedger::record_cached(MemorySpace space, std::int64_t delta_bytes) {
  const auto s = static_cast<std::size_t>(space);
  std::lock_guard lock(mutex_);
  ZERO_CHECK(cached_[s] + delta_bytes >= 0, "memory ledger: ", -delta_bytes, " bytes of ",
             name_of(space), " leave the cache, but only ", cached_[s], " are cached");
  cached_[s] += delta_bytes;
  cached_used_[s] = true;
  LedgerEntry& reserved = reserved_[s];
  reserved.current_bytes = totals_[s].current_bytes + cached_[s];
  reserved.peak_bytes = std::max(reserved.peak_bytes, reserved.current_bytes);
}

LedgerEntry MemoryLedger::entry(MemorySpace space, MemoryCategory category) const {
  std::lock_guard lock(mutex_);
  return entries_[static_cast<std::size_t>(space)][static_cast<std::size_t>(category)];
}

LedgerEntry MemoryLedger::space_total(MemorySpace space) const {
  std::lock_guard lock(mutex_);
  return totals_[static_cast<std::size_t>(space)];
}

LedgerEntry MemoryLedger::space_reserved(MemorySpace space) const {
  std::lock_guard lock(mutex_);
  const auto s = static_cast<std::size_t>(space);
  // Without caching, reserved is the total (record_allocation keeps both).
  return reserved_[s];
}

void MemoryLedger::reset_peaks() {
  std::lock_guard lock(mutex_);
  for (auto& row : entries_)
    for (auto& entry : row) entry.peak_bytes = entry.current_bytes;
  for (auto& total : totals_) total.peak_bytes = total.current_bytes;
  for (auto& reserved : reserved_) reserved.peak_bytes = reserved.current_bytes;
}

std::string format_bytes(std::int64_t size_bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(size_bytes < 0 ? -size_bytes : size_bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  const char* sign = size_bytes < 0 ? "-" : "";
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%s%lld B", sign, static_cast<long long>(value));
  } else {
    std::snprintf(text, sizeof text,
                  value < 10    ? "%s%.2f %s"
                  : value < 100 ? "%s%.1f %s"
                                : "%s%.0f %s",
                  sign, value, kUnits[unit]);
  }
  return text;
}

std::string MemoryLedger::report(std::string_view title) const {
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  char line[160];
  if (!title.empty()) out << "memory ledger: " << title << "\n";
  std::snprintf(line, sizeof line, "%-12s %-16s %12s %12s %16s %16s\n", "space", "category",
                "current", "peak", "current_bytes", "peak_bytes");
  out << line;
  for (std::size_t s = 0; s < kNumMemorySpaces; ++s) {
    bool any = false;
    for (std::size_t c = 0; c < kNumMemoryCategories; ++c) {
      if (!used_[s][c]) continue;
      any = true;
      const LedgerEntry& e = entries_[s][c];
      std::snprintf(line, sizeof line, "%-12s %-16s %12s %12s %16lld %16lld\n",
                    std::string(name_of(static_cast<MemorySpace>(s))).c_str(),
                    std::string(name_of(static_cast<MemoryCategory>(c))).c_str(),
                    format_bytes(e.current_bytes).c_str(), format_bytes(e.peak_bytes).c_str(),
                    static_cast<long long>(e.current_bytes), static_cast<long long>(e.peak_bytes));
      out << line;
    }
    if (any) {
      const LedgerEntry& t = totals_[s];
      std::snprintf(line, sizeof line, "%-12s %-16s %12s %12s %16lld %16lld\n",
                    std::string(name_of(static_cast<MemorySpace>(s))).c_str(), "total",
                    format_bytes(t.current_bytes).c_str(), format_bytes(t.peak_bytes).c_str(),
                    static_cast<long long>(t.current_bytes), static_cast<long long>(t.peak_bytes));
      out << line;
    }
    if (cached_used_[s]) {
      const LedgerEntry& r = reserved_[s];
      std::snprintf(line, sizeof line, "%-12s %-16s %12s %12s %16lld %16lld\n",
                    std::string(name_of(static_cast<MemorySpace>(s))).c_str(), "reserved",
                    format_bytes(r.current_bytes).c_str(), format_bytes(r.peak_bytes).c_str(),
                    static_cast<long long>(r.current_bytes), static_cast<long long>(r.peak_bytes));
      out << line;
    }
  }
  return out.str();
}

}  // namespace zero
