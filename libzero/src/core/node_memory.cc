// The node's memory (/proc/meminfo, memory cgroup limits) and the process's resident peak.
#include "zero/core/node_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "zero/core/error.h"

namespace zero {

namespace fs = std::filesystem;

namespace {

// Limits at or above this are "no limit" (v1 writes PAGE_COUNTER_MAX pages, about 2^63 bytes).
constexpr std::int64_t kNoLimitBytes = std::int64_t{1} << 60;

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The limit in one cgroup file: bytes, or 0 for none ("max", absent, unreadable, huge).
std::int64_t limit_in(const fs::path& file) {
  const std::string text = read_text(file);
  if (text.empty() || text.starts_with("max")) return 0;
  long long value = 0;
  if (std::sscanf(text.c_str(), "%lld", &value) != 1 || value <= 0 || value >= kNoLimitBytes)
    return 0;
  return value;
}

// The smallest limit in `file_name` over `folder` and its ancestors up to `root`.
void smallest_limit(const fs::path& root, const std::string& cgroup_path,
                    const std::string& file_name, NodeMemory& node) {
  fs::path relative = fs::path(cgroup_path).relative_path();
  while (true) {
    const fs::path file = root / relative / file_name;
    const std::int64_t limit = limit_in(file);
    if (limit > 0 && (node.cgroup_limit_bytes == 0 || limit < node.cgroup_limit_bytes)) {
      node.cgroup_limit_bytes = limit;
      node.cgroup_limit_file = file.lexically_normal().string();
    }
    if (relative.empty()) return;
    relative = relative.has_parent_path() ? relative.parent_path() : fs::path();
  }
}

std::string gib_text(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f GiB", static_cast<double>(bytes) / 1073741824.0);
  return text;
}

}  // namespace

std::int64_t NodeMemory::limit_bytes() const {
  if (cgroup_limit_bytes > 0 && (total_bytes <= 0 || cgroup_limit_bytes < total_bytes))
    return cgroup_limit_bytes;
  return total_bytes;
}

std::string NodeMemory::describe() const {
  if (limit_bytes() == cgroup_limit_bytes && cgroup_limit_bytes > 0)
    return gib_text(cgroup_limit_bytes) + " (the memory cgroup's limit, " + cgroup_limit_file +
           "; MemTotal " + gib_text(total_bytes) + ")";
  return gib_text(total_bytes) + " (" + total_source + ")";
}

std::int64_t proc_field_bytes(std::string_view text, std::string_view key) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.starts_with(key) && line[key.size()] == ':') {
      long long value = 0;
      char unit[8] = {};
      const std::string rest(line.substr(key.size() + 1));
      const int read = std::sscanf(rest.c_str(), "%lld %7s", &value, unit);
      if (read < 1) return -1;
      return read == 2 && std::string_view(unit) == "kB" ? value * 1024 : value;
    }
    at = end + 1;
  }
  return -1;
}

NodeMemory parse_node_memory(std::string_view meminfo, std::string_view proc_self_cgroup,
                             const fs::path& cgroup_root) {
  NodeMemory node;
  node.total_bytes = proc_field_bytes(meminfo, "MemTotal");
  node.available_bytes = proc_field_bytes(meminfo, "MemAvailable");
  ZERO_CHECK(node.total_bytes > 0, "/proc/meminfo has no MemTotal line");
  // Lines "hierarchy-id:controllers:path"; v1's memory controller, or v2's unified "0::path".
  std::istringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    const std::size_t first = line.find(':');
    const std::size_t second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::vector<std::string> names;
    std::istringstream list(controllers);
    for (std::string name; std::getline(list, name, ',');) names.push_back(name);
    if (std::find(names.begin(), names.end(), "memory") != names.end())
      smallest_limit(cgroup_root / "memory", path, "memory.limit_in_bytes", node);
    else if (line.starts_with("0::"))
      smallest_limit(cgroup_root, path, "memory.max", node);
  }
  return node;
}

NodeMemory read_node_memory() {
  const std::string meminfo = read_text("/proc/meminfo");
  ZERO_CHECK(!meminfo.empty(), "cannot read /proc/meminfo to know this node's memory");
  return parse_node_memory(meminfo, read_text("/proc/self/cgroup"), "/sys/fs/cgroup");
}

ProcessMemory read_process_memory() {
  const std::string status = read_text("/proc/self/status");
  return {proc_field_bytes(status, "VmRSS"), proc_field_bytes(status, "VmHWM")};
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace zero
