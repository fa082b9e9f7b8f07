// The memory of the node this process runs on and of the process itself: MemTotal and
// MemAvailable from /proc/meminfo, the memory cgroup's limit (v1 memory.limit_in_bytes, v2
// memory.max, the smallest over the process's cgroup and its ancestors), and the process's
// resident bytes and resident peak (VmRSS, VmHWM in /proc/self/status), the peak reset through
// /proc/self/clear_refs. The planner checks plans against node_memory_limit(); the trainer measures
// each phase's process peak with them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace zero {

struct NodeMemory {
  std::int64_t total_bytes = 0;         // MemTotal
  std::int64_t available_bytes = 0;     // MemAvailable (what can be had without swapping)
  std::int64_t cgroup_limit_bytes = 0;  // 0: no memory cgroup limit
  std::string cgroup_limit_file;        // the file that set it
  std::string total_source = "MemTotal, /proc/meminfo";  // or the flag that gave total_bytes
  // What a process here may hold: the cgroup limit when it is below MemTotal, else MemTotal.
  std::int64_t limit_bytes() const;
  // "23.5 GiB (MemTotal, /proc/meminfo)" or "1.0 GiB (cgroup limit, <file>)".
  std::string describe() const;
};

// This node, as this process sees it. Throws zero::Error when /proc/meminfo cannot be read.
NodeMemory read_node_memory();

// The same from given texts and a cgroup mount root (tests): `meminfo` as /proc/meminfo,
// `proc_self_cgroup` as /proc/self/cgroup; v1 limits are read under cgroup_root/memory/<path>,
// v2 limits under cgroup_root/<path>, each up to cgroup_root itself.
NodeMemory parse_node_memory(std::string_view meminfo, std::string_view proc_self_cgroup,
                             const std::filesystem::path& cgroup_root);

// A "Key:   123 kB" field of /proc/meminfo or /proc/self/status, in bytes; -1 when absent.
std::int64_t proc_field_bytes(std::string_view text, std::string_view key);

// This process's resident bytes now (VmRSS) and its resident peak (VmHWM); -1 each where
// /proc/self/status lacks them.
struct ProcessMemory {
  std::int64_t resident_bytes = -1;
  std::int64_t peak_resident_bytes = -1;
};
ProcessMemory read_process_memory();

// Resets VmHWM to the current VmRSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0); false
// when the kernel refuses (the peak then keeps counting from the process's start).
bool reset_peak_resident();

}  // namespace zero
