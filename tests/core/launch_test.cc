// Launch detection from OpenMPI, torchrun, Slurm and PMI variables.
#include "zero/core/launch.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/device.h"
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

// The variables DeepSpeed's launcher (deepspeed/launcher/launch.py) sets for rank 5 of 2 nodes x 4:
// named "deepspeed", its ranks per node from LOCAL_SIZE (it sets no LOCAL_WORLD_SIZE).
TEST(Launch, DeepSpeedLauncherIsNamedWithItsRanksPerNode) {
  const LaunchInfo info = detect_launch({{"RANK", "5"},
                                         {"WORLD_SIZE", "8"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_SIZE", "4"},
                                         {"CROSS_RANK", "1"},
                                         {"CROSS_SIZE", "2"},
                                         {"MASTER_ADDR", "node1"},
                                         {"MASTER_PORT", "29500"}});
  EXPECT_EQ(info.launcher, Launcher::kDeepSpeed);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_NE(info.describe().find("deepspeed rank 5/8 (local 1/4)"), std::string::npos)
      << info.describe();
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

TEST(Launch, SlurmReadsMasterAddressAsTheSbatchScriptsExportIt) {
  const LaunchInfo info = detect_launch({{"SLURM_PROCID", "1"},
                                         {"SLURM_NTASKS", "2"},
                                         {"MASTER_ADDR", "node7"},
                                         {"MASTER_PORT", "29611"}});
  EXPECT_EQ(info.launcher, Launcher::kSlurm);
  EXPECT_EQ(info.master_addr, "node7");
  EXPECT_EQ(info.master_port, 29611);
}

TEST(Launch, BackendFollowsTheLauncher) {
  using Env = std::map<std::string, std::string>;
  auto backend = [](const Env& env) {
    return choose_backend(detect_launch(env), env, 0, DeviceKind::kCpu);
  };
  EXPECT_EQ(backend({}), "local");
  EXPECT_EQ(backend({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}), "mpi");
  EXPECT_EQ(backend({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), "local");
  EXPECT_EQ(backend({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}), "mpi");
  EXPECT_EQ(backend({{"RANK", "0"}, {"WORLD_SIZE", "2"}}), "gloo");
  EXPECT_EQ(backend({{"RANK", "0"}, {"WORLD_SIZE", "1"}}), "local");
  EXPECT_EQ(backend({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}), "gloo");
  // srun --mpi=pmix starts MPI ranks.
  EXPECT_EQ(backend({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"PMIX_RANK", "0"}}), "mpi");
  EXPECT_EQ(backend({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"ZERO_COMM_BACKEND", "mpi"}}), "mpi");
  EXPECT_THROW(backend({{"ZERO_COMM_BACKEND", "nvlink"}}), Error);
  EXPECT_THROW(backend({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"ZERO_COMM_BACKEND", "local"}}),
               Error);
}

TEST(Launch, BackendMatchesWhereTheCollectiveBuffersLive) {
  using Env = std::map<std::string, std::string>;
  // Host buffers: a visible GPU changes nothing (NCCL would be handed host pointers).
  auto host = [](const Env& env, int gpus) {
    return choose_backend(detect_launch(env), env, gpus, DeviceKind::kCpu);
  };
  EXPECT_EQ(host({}, 2), "local");
  EXPECT_EQ(host({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 2), "mpi");
  EXPECT_EQ(host({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, 8), "gloo");
  try {
    host({{"ZERO_COMM_BACKEND", "nccl"}}, 2);
    FAIL() << "nccl accepted for host buffers";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("host memory"), std::string::npos) << error.what();
  }
  // CUDA buffers: NCCL under every launcher and world size; a host-only backend is refused.
  auto device = [](const Env& env, int gpus) {
    return choose_backend(detect_launch(env), env, gpus, DeviceKind::kCuda);
  };
  if (!cuda_compiled()) {
    EXPECT_THROW(device({}, 2), Error);  // no CUDA in this build
    return;
  }
  EXPECT_EQ(device({}, 2), "nccl");
  EXPECT_EQ(device({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, 2), "nccl");
  EXPECT_EQ(device({{"RANK", "0"}, {"WORLD_SIZE", "2"}}, 1), "nccl");
  EXPECT_EQ(device({{"ZERO_COMM_BACKEND", "nccl"}}, 1), "nccl");
  EXPECT_THROW(device({}, 0), Error);  // no visible device
  for (const char* host_only : {"mpi", "gloo", "local"}) {
    try {
      device({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"ZERO_COMM_BACKEND", host_only}}, 2);
      FAIL() << host_only << " accepted for CUDA buffers";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("CUDA device"), std::string::npos) << error.what();
    }
  }
}

TEST(Launch, GlooRendezvousUsesTorchrunsAgentStorePrefix) {
  // GlooRendezvous::from_environment reads the process environment: set torchrun's variables.
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "29123", 1);
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "2", 1);
  const GlooRendezvous agent = GlooRendezvous::from_environment();
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  const GlooRendezvous hosted = GlooRendezvous::from_environment();
  for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                           "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT"})
    ::unsetenv(name);
  EXPECT_TRUE(agent.agent_store);
  EXPECT_EQ(agent.key_prefix, "/worker/attempt_2/");
  EXPECT_EQ(agent.rank, 1);
  EXPECT_EQ(agent.world_size, 2);
  EXPECT_EQ(agent.master_port, 29123);
  EXPECT_FALSE(hosted.agent_store);
  EXPECT_EQ(hosted.key_prefix, "");
}

TEST(Launch, BindCoresToRankSplitsTheAllowedCpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  const int count = CPU_COUNT(&allowed);
  // sched_setaffinity binds the calling thread: bind in threads so the test keeps its CPUs.
  auto bound = [](int local_rank, int local_world_size) {
    std::vector<int> cpus;
    std::string error;
    std::thread([&] {
      try {
        cpus = bind_cores_to_rank(local_rank, local_world_size);
      } catch (const Error& e) {
        error = e.what();
      }
    }).join();
    return std::pair(cpus, error);
  };
  std::vector<int> seen;
  for (int r = 0; r < count; ++r) {
    const auto [cpus, error] = bound(r, count);
    ASSERT_EQ(error, "");
    ASSERT_EQ(cpus.size(), 1u);
    EXPECT_TRUE(CPU_ISSET(cpus[0], &allowed));
    seen.push_back(cpus[0]);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end()) << "two ranks share a CPU";
  EXPECT_EQ(static_cast<int>(bound(0, 1).first.size()), count);
  const std::string error = bound(0, count + 1).second;
  EXPECT_NE(error.find("only " + std::to_string(count) + " CPUs"), std::string::npos) << error;
  EXPECT_NE(bound(2, 2).second.find("outside 2 local ranks"), std::string::npos);
}

// The device of each local rank from an injected count of visible devices (no GPU needed).
TEST(DeviceChoice, LocalRankRModTheVisibleDevicesOrTheCpu) {
  LaunchInfo launch;
  launch.local_world_size = 4;
  auto device_of = [&](int local_rank, int visible, bool use_cpu) {
    launch.local_rank = local_rank;
    return choose_device(launch, visible, use_cpu, {}).device;
  };
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(device_of(r, 4, false), Device::cuda(r));
    EXPECT_EQ(device_of(r, 2, false), Device::cuda(r % 2));  // two ranks per GPU
    EXPECT_EQ(device_of(r, 0, false), Device::cpu());        // no GPU: the CPU, as today
    EXPECT_EQ(device_of(r, 4, true), Device::cpu());         // --use_cpu / --no_cuda
  }
  EXPECT_EQ(device_of(3, 8, false), Device::cuda(3));
}

TEST(DeviceChoice, SaysWhyAndNamesTheCudaVisibleDevicesEntry) {
  LaunchInfo launch;
  launch.local_rank = 1;
  launch.local_world_size = 2;
  const DeviceChoice gpu = choose_device(launch, 2, false, {{"CUDA_VISIBLE_DEVICES", "2,5"}});
  EXPECT_EQ(gpu.device, Device::cuda(1));
  EXPECT_EQ(gpu.describe(),
            "cuda:1 (local rank 1 of 2, 2 visible CUDA devices, entry 5 of "
            "CUDA_VISIBLE_DEVICES=2,5)");
  launch.local_world_size = 3;
  EXPECT_NE(choose_device(launch, 2, false, {}).reason.find("shared by 3 local ranks"),
            std::string::npos);
  EXPECT_EQ(choose_device(launch, 2, true, {}).describe(), "cpu (--use_cpu)");
  EXPECT_EQ(choose_device(launch, 0, false, {}).describe(), "cpu (no CUDA device visible)");
}

// This process: a build without CUDA or a machine without a GPU runs on the CPU, as before.
TEST(DeviceChoice, ThisProcessFollowsTheVisibleDevices) {
  const DeviceChoice choice = choose_device(false);
  if (cuda_device_count() == 0)
    EXPECT_EQ(choice.device, Device::cpu());
  else
    EXPECT_EQ(choice.device, Device::cuda(detect_launch().local_rank % cuda_device_count()));
  EXPECT_EQ(choose_device(true).device, Device::cpu());
}

}  // namespace
}  // namespace zero
