// A job in which one rank misbehaves, for the watchdog tests (run by ctest under mpirun; the test
// passes when the output names the collective and the rank and the job ends instead of hanging).
//   watchdog_main skip      the last rank skips collective #3 and computes (sleeps) for 120 s
//   watchdog_main mismatch  the last rank calls a barrier where the others call all_reduce #3
//   watchdog_main kill      the last rank dies (SIGKILL) where the others call all_reduce #3
// A second argument "gloo" runs it on the Gloo communicator (launched by launch_ranks) instead of
// MPI.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/logging.h"

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "skip";
  int rank = 0;
  zero::set_log_sink(zero::stderr_log_sink);
  try {
    zero::CommOptions options;
    options.timeout = std::chrono::seconds(2);
    const bool gloo = argc > 2 && std::string(argv[2]) == "gloo";
    auto comm =
        gloo ? zero::make_gloo_communicator(zero::GlooRendezvous::from_environment(), options)
             : zero::make_mpi_communicator(options);
    rank = comm->rank();
    const int last = comm->world_size() - 1;
    zero::set_log_rank(rank, comm->world_size());
    std::vector<float> data(22, 1.0f);
    for (int i = 0; i < 2; ++i) {
      comm->all_reduce(data.data(), data.data(), data.size(), zero::DType::kFloat32,
                       zero::ReduceOp::kSum);
    }
    comm->synchronize();
    if (rank == last && scenario == "skip") {
      std::this_thread::sleep_for(std::chrono::seconds(120));
    } else if (rank == last && scenario == "kill") {
      ::raise(SIGKILL);
    } else if (rank == last && scenario == "mismatch") {
      comm->barrier();
    } else {
      comm->all_reduce(data.data(), data.data(), data.size(), zero::DType::kFloat32,
                       zero::ReduceOp::kSum);
    }
    comm->synchronize();
    std::printf("rank %d: finished without detecting anything\n", rank);
  } catch (const std::exception& error) {
    zero::log_error(error.what());
    zero::abort_job(1);
  }
  zero::finalize_communication();
  return 0;
}
