// What launched this process: rank, world size and local rank from OpenMPI, MPICH/PMI, Slurm,
// DeepSpeed's launcher or torchrun environment variables.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "zero/core/device.h"

namespace zero {

enum class Launcher { kNone, kOpenMpi, kPmi, kSlurm, kTorchrun, kDeepSpeed };

struct LaunchInfo {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;       // MASTER_ADDR (torchrun sets it; sbatch scripts export it)
  int master_port = 0;           // MASTER_PORT
  std::string describe() const;  // "openmpi rank 1/4 (local 1/4)"
};

std::string name_of(Launcher launcher);

// Reads the variables of the first launcher whose variables are set, in the order OpenMPI
// (OMPI_COMM_WORLD_*), the `deepspeed` launcher (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_SIZE, with
// CROSS_RANK, which only it sets), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NTASKS_PER_NODE), PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID). torchrun comes before Slurm
// because torchrun under srun sets both and its values are the per-process ones. Throws zero::Error
// naming the variable when a value is not a number or rank/local rank are outside their world.
LaunchInfo detect_launch(const std::map<std::string, std::string>& environment);
LaunchInfo detect_launch();  // from this process's environment

// This process's environment as a map.
std::map<std::string, std::string> process_environment();

// The device this process computes on, and why.
struct DeviceChoice {
  Device device;
  std::string reason;            // "local rank 1 of 2, 2 visible CUDA devices", "--use_cpu"
  std::string describe() const;  // "cuda:1 (local rank 1 of 2, ...)", for the launch line
};

// The device of this local rank, as torchrun and Hugging Face's Trainer choose it:
// cuda:(local_rank mod visible_cuda_devices) when CUDA devices are visible (more local ranks than
// devices share them round-robin, and the reason says so); the CPU when none is visible or
// `use_cpu` (--use_cpu, --no_cuda). `visible_cuda_devices` is the CUDA runtime's count, which
// already honours CUDA_VISIBLE_DEVICES: cuda:i is its i-th entry, which the reason names from
// `environment`.
DeviceChoice choose_device(const LaunchInfo& launch, int visible_cuda_devices, bool use_cpu,
                           const std::map<std::string, std::string>& environment);
// This process's: detect_launch(), cuda_device_count() (0 in a build without CUDA),
// process_environment().
DeviceChoice choose_device(bool use_cpu);

// Pins the calling process (every thread started after) to its share of the CPUs it may run on:
// the allowed CPUs split into `local_world_size` contiguous groups, group `local_rank` (as
// DeepSpeed's --bind_cores_to_rank). Returns the CPUs bound; throws zero::Error when there are
// fewer CPUs than local ranks or the kernel refuses.
std::vector<int> bind_cores_to_rank(int local_rank, int local_world_size);

}  // namespace zero
