// What launched this process: rank, world size and local rank from OpenMPI, MPICH/PMI, Slurm or
// torchrun environment variables.
#pragma once

#include <map>
#include <string>

namespace zero {

enum class Launcher { kNone, kOpenMpi, kPmi, kSlurm, kTorchrun };

struct LaunchInfo {
  Launcher launcher = Launcher::kNone;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;       // torchrun only
  int master_port = 0;           // torchrun only
  std::string describe() const;  // "openmpi rank 1/4 (local 1/4)"
};

std::string name_of(Launcher launcher);

// Reads the variables of the first launcher whose variables are set, in the order OpenMPI
// (OMPI_COMM_WORLD_*), torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE),
// PMI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID). torchrun comes before Slurm because torchrun
// under srun sets both and its values are the per-process ones. Throws zero::Error naming the
// variable when a value is not a number or rank/local rank are outside their world.
LaunchInfo detect_launch(const std::map<std::string, std::string>& environment);
LaunchInfo detect_launch();  // from this process's environment

}  // namespace zero
