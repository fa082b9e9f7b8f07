// torchrun's agent store outlives a restart: the keys zero writes there carry the attempt's
// restart count (TORCHELASTIC_RESTART_COUNT), so what a killed attempt left (its abort key, its
// mesh addresses) never reaches the next attempt. benchmarks/chaos_soak.sh shows it under real
// torchrun restarts; this shows it on one rank against a store standing in for the agent's.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/free_port.h"
#include "comm/tcp_store.h"
#include "zero/comm/communicator.h"

namespace zero {
namespace {

using namespace std::chrono_literals;

int free_port() {
  const int port = testing::free_port();
  EXPECT_GT(port, 0) << "no free port on 127.0.0.1";
  return port;
}

// The environment torchrun gives the one worker of attempt `restart` on the agent store at `port`.
void set_torchrun_environment(int port, int restart) {
  for (const auto& [name, value] : {std::pair<const char*, std::string>{"RANK", "0"},
                                    {"WORLD_SIZE", "1"},
                                    {"LOCAL_RANK", "0"},
                                    {"LOCAL_WORLD_SIZE", "1"},
                                    {"MASTER_ADDR", "127.0.0.1"},
                                    {"MASTER_PORT", std::to_string(port)},
                                    {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                    {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart)}})
    ::setenv(name, value.c_str(), 1);
}

TEST(RestartKeys, EachAttemptsKeysCarryItsRestartCount) {
  set_torchrun_environment(29500, 3);
  const GlooRendezvous rendezvous = GlooRendezvous::from_environment();
  EXPECT_TRUE(rendezvous.agent_store);
  EXPECT_EQ(rendezvous.key_prefix, "/worker/attempt_3/");
}

#ifdef ZERO_TEST_WITH_GLOO
// Attempt 0's rank 1 aborted the job (its abort key: rank 1, exit code 9) and was killed; the
// agent's store keeps the key. Attempt `restart`'s rank trains on for a second (its status thread
// polls the abort key every 0.2 s) and exits 0, or is ended by the abort with code 9.
void run_attempt(int port, int restart) {
  set_torchrun_environment(port, restart);
  auto communicator = make_gloo_communicator(GlooRendezvous::from_environment(), CommOptions{});
  float value = 1.0f;
  for (int i = 0; i < 10; ++i) {
    communicator->all_reduce(&value, &value, 1, DType::kFloat32, ReduceOp::kSum, "step");
    communicator->synchronize();
    std::this_thread::sleep_for(100ms);
  }
  std::exit(0);
}

TEST(RestartKeysDeathTest, AKilledAttemptsAbortKeyDoesNotEndTheNextAttempt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int port = free_port();
  detail::TcpStoreServer agent_store(port);  // torchrun's, alive across attempts
  detail::TcpStore attempt0("127.0.0.1", port, 5s);
  attempt0.set("/worker/attempt_0/zero/abort", std::vector<char>{1, 9});
  EXPECT_EXIT(run_attempt(port, 1), ::testing::ExitedWithCode(0), "");
  // The same key under the attempt's own count ends it: the test can tell the two apart.
  EXPECT_EXIT(run_attempt(port, 0), ::testing::ExitedWithCode(9), "rank 1 aborted the job");
}
#endif

}  // namespace
}  // namespace zero
