// Launch detection from OpenMPI, torchrun, Slurm and PMI variables.
#include "zero/core/launch.h"

#include <gtest/gtest.h>

#include "zero/core/error.h"

namespace zero {
namespace {

TEST(Launch, NoLauncherIsWorldOfOne) {
  const LaunchInfo info = detect_launch({{"HOME", "/root"}});
  EXPECT_EQ(info.launcher, Launcher::kNone);
  EXPECT_EQ(info.world_size, 1);
}

TEST(Launch, OpenMpi) {
  const LaunchInfo info = detect_launch({{"OMPI_COMM_WORLD_RANK", "5"},
                                         {"OMPI_COMM_WORLD_SIZE", "8"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(info.launcher, Launcher::kOpenMpi);
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
}

TEST(Launch, TorchrunWinsOverSlurm) {
  const LaunchInfo info = detect_launch({{"RANK", "3"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "3"},
                                         {"LOCAL_WORLD_SIZE", "4"},
                                         {"MASTER_ADDR", "node1"},
                                         {"MASTER_PORT", "29500"},
                                         {"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(info.launcher, Launcher::kTorchrun);
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.master_addr, "node1");
  EXPECT_EQ(info.master_port, 29500);
  EXPECT_NE(info.describe().find("torchrun rank 3/4"), std::string::npos);
}

TEST(Launch, SlurmWithUnevenTasksPerNode) {
  const LaunchInfo info = detect_launch({{"SLURM_PROCID", "6"},
                                         {"SLURM_NTASKS", "8"},
                                         {"SLURM_LOCALID", "2"},
                                         {"SLURM_NTASKS_PER_NODE", "4(x2)"}});
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_EQ(info.rank, 6);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.local_world_size, 4);
}

TEST(Launch, Pmi) {
  const LaunchInfo info = detect_launch({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(info.launcher, Launcher::kPmi);
  EXPECT_EQ(info.local_rank, 1);
}

TEST(Launch, BadValuesNameTheVariable) {
  try {
    detect_launch({{"RANK", "two"}, {"WORLD_SIZE", "4"}});
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("RANK='two'"), std::string::npos) << error.what();
  }
  try {
    detect_launch({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("outside"), std::string::npos) << error.what();
  }
  EXPECT_THROW(detect_launch({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}}), Error);
}

}  // namespace
}  // namespace zero
