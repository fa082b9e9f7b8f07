// Launch detection from OpenMPI, DeepSpeed's launcher, torchrun, Slurm and PMI environment
// variables.
#include "zero/core/launch.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include "zero/core/device.h"
#include "zero/core/error.h"

extern char** environ;

namespace zero {

std::string name_of(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone: return "none";
    case Launcher::kOpenMpi: return "openmpi";
    case Launcher::kPmi: return "pmi";
    case Launcher::kSlurm: return "slurm";
    case Launcher::kTorchrun: return "torchrun";
    case Launcher::kDeepSpeed: return "deepspeed";
  }
  return "unknown";
}

std::string LaunchInfo::describe() const {
  std::ostringstream out;
  out << name_of(launcher) << " rank " << rank << "/" << world_size << " (local " << local_rank
      << "/" << local_world_size << ")";
  if (!master_addr.empty()) out << " master " << master_addr << ":" << master_port;
  return out.str();
}

std::string DeviceChoice::describe() const { return device.to_string() + " (" + reason + ")"; }

DeviceChoice choose_device(const LaunchInfo& launch, int visible_cuda_devices, bool use_cpu,
                           const std::map<std::string, std::string>& environment) {
  if (use_cpu) return {Device::cpu(), "--use_cpu"};
  if (visible_cuda_devices <= 0) return {Device::cpu(), "no CUDA device visible"};
  const int index = launch.local_rank % visible_cuda_devices;
  std::ostringstream reason;
  reason << "local rank " << launch.local_rank << " of " << launch.local_world_size << ", "
         << visible_cuda_devices << " visible CUDA device" << (visible_cuda_devices > 1 ? "s" : "");
  if (launch.local_world_size > visible_cuda_devices)
    reason << ", shared by " << launch.local_world_size << " local ranks round-robin";
  if (auto visible = environment.find("CUDA_VISIBLE_DEVICES"); visible != environment.end()) {
    std::vector<std::string> entries;
    std::stringstream list(visible->second);
    for (std::string entry; std::getline(list, entry, ',');) entries.push_back(entry);
    if (index < static_cast<int>(entries.size())) reason << ", entry " << entries[index] << " of";
    reason << " CUDA_VISIBLE_DEVICES=" << visible->second;
  }
  return {Device::cuda(index), reason.str()};
}

DeviceChoice choose_device(bool use_cpu) {
  return choose_device(detect_launch(), cuda_device_count(), use_cpu, process_environment());
}

namespace {

struct Names {
  Launcher launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  const char* only_this_launcher_sets = nullptr;  // must be set too, where given
};

constexpr Names kLaunchers[] = {
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {Launcher::kDeepSpeed, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK"},
    {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {Launcher::kPmi, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

const std::string* find(const std::map<std::string, std::string>& environment, const char* name) {
  auto it = environment.find(name);
  return it == environment.end() ? nullptr : &it->second;
}

int parse_int(const std::map<std::string, std::string>& environment, const char* name,
              int fallback) {
  const std::string* text = find(environment, name);
  if (text == nullptr) return fallback;
  // Slurm writes SLURM_NTASKS_PER_NODE as e.g. "4(x2)" on uneven allocations: take the leading
  // count.
  int value = 0;
  const char* end = text->data() + text->size();
  auto [stop, error] = std::from_chars(text->data(), end, value);
  ZERO_CHECK(error == std::errc() && (stop == end || *stop == '('), "launch environment: ", name,
             "='", *text, "' is not an integer");
  return value;
}

}  // namespace

LaunchInfo detect_launch(const std::map<std::string, std::string>& environment) {
  LaunchInfo info;
  for (const Names& names : kLaunchers) {
    if (find(environment, names.rank) == nullptr ||
        find(environment, names.world_size) == nullptr ||
        (names.only_this_launcher_sets != nullptr &&
         find(environment, names.only_this_launcher_sets) == nullptr))
      continue;
    info.launcher = names.launcher;
    info.rank = parse_int(environment, names.rank, 0);
    info.world_size = parse_int(environment, names.world_size, 1);
    info.local_rank = parse_int(environment, names.local_rank, info.rank);
    info.local_world_size = parse_int(environment, names.local_world_size, info.world_size);
    if (const std::string* address = find(environment, "MASTER_ADDR")) info.master_addr = *address;
    info.master_port = parse_int(environment, "MASTER_PORT", 0);
    ZERO_CHECK(info.world_size >= 1, "launch environment: ", names.world_size, "=", info.world_size,
               " must be at least 1");
    ZERO_CHECK(info.rank >= 0 && info.rank < info.world_size, "launch environment: ", names.rank,
               "=", info.rank, " is outside the world of ", names.world_size, "=", info.world_size);
    ZERO_CHECK(info.local_rank >= 0 && info.local_rank < info.local_world_size,
               "launch environment: ", names.local_rank, "=", info.local_rank, " is outside ",
               names.local_world_size, "=", info.local_world_size);
    return info;
  }
  return info;
}

LaunchInfo detect_launch() { return detect_launch(process_environment()); }

std::vector<int> bind_cores_to_rank(int local_rank, int local_world_size) {
  ZERO_CHECK(local_world_size >= 1 && local_rank >= 0 && local_rank < local_world_size,
             "bind_cores_to_rank: local rank ", local_rank, " is outside ", local_world_size,
             " local ranks");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ZERO_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0,
             "bind_cores_to_rank: cannot read this process's CPU affinity");
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  const int count = static_cast<int>(cpus.size());
  ZERO_CHECK(count >= local_world_size, "--bind_cores_to_rank: ", local_world_size,
             " ranks on this node but only ", count, " CPUs to share among them");
  // Contiguous groups, the first count % ranks groups one CPU larger.
  const int base = count / local_world_size, extra = count % local_world_size;
  const int begin = local_rank * base + std::min(local_rank, extra);
  const int size = base + (local_rank < extra ? 1 : 0);
  std::vector<int> mine(cpus.begin() + begin, cpus.begin() + begin + size);
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : mine) CPU_SET(cpu, &set);
  ZERO_CHECK(sched_setaffinity(0, sizeof set, &set) == 0,
             "bind_cores_to_rank: the kernel refused to bind local rank ", local_rank);
  return mine;
}

std::map<std::string, std::string> process_environment() {
  std::map<std::string, std::string> environment;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string_view::npos) continue;
    environment.emplace(std::string(text.substr(0, equals)), std::string(text.substr(equals + 1)));
  }
  return environment;
}

}  // namespace zero
