// Collective bandwidth, as nccl-tests reports it: for each size, time per call, algorithm
// bandwidth (bytes / time) and bus bandwidth (algbw × the op's ring factor), on any communicator.
// Run: mpirun -np 2 build/benchmarks/comm_bench [--max_bytes N] [--dtype fp32|bf16|fp16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/logging.h"

namespace {

struct Op {
  const char* name;
  zero::CollectiveOp op;
  double bus_factor(int world) const {  // nccl-tests' busbw conventions
    const double n = world;
    return op == zero::CollectiveOp::kAllReduce ? 2.0 * (n - 1) / n : (n - 1) / n;
  }
};

}  // namespace

int main(int argc, char** argv) {
  zero::set_log_sink(zero::stderr_log_sink);
  std::size_t max_bytes = std::size_t{64} << 20;
  zero::DType dtype = zero::DType::kFloat32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--max_bytes") == 0)
      max_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--dtype") == 0)
      dtype = zero::parse_dtype(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s (known: --max_bytes N, --dtype fp32|bf16|fp16)\n",
                   argv[i]);
      return 2;
    }
  }
  try {
    auto comm = zero::make_communicator(zero::DeviceKind::kCpu);
    const int world = comm->world_size();
    zero::set_log_rank(comm->rank(), world);
    const Op ops[] = {{"all_reduce", zero::CollectiveOp::kAllReduce},
                      {"reduce_scatter", zero::CollectiveOp::kReduceScatter},
                      {"all_gather", zero::CollectiveOp::kAllGather}};
    if (comm->rank() == 0) {
      std::printf(
          "# %s communicator, %d ranks, %s; sizes are the full buffer (all_reduce input, "
          "reduce_scatter input, all_gather output)\n",
          std::string(comm->backend()).c_str(), world, std::string(zero::name_of(dtype)).c_str());
      std::printf("%-15s %12s %10s %12s %12s\n", "op", "bytes", "time_us", "algbw_GB/s",
                  "busbw_GB/s");
    }
    const std::size_t element = zero::size_of(dtype);
    std::vector<char> input(max_bytes), output(max_bytes);
    for (const Op& op : ops) {
      for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
        const std::size_t count = bytes / element;
        const std::size_t per_rank = count / world;
        if (per_rank == 0) continue;
        auto issue = [&] {
          switch (op.op) {
            case zero::CollectiveOp::kAllReduce:
              comm->all_reduce(input.data(), output.data(), count, dtype, zero::ReduceOp::kSum);
              break;
            case zero::CollectiveOp::kReduceScatter:
              comm->reduce_scatter(input.data(), output.data(), per_rank, dtype,
                                   zero::ReduceOp::kSum);
              break;
            default: comm->all_gather(input.data(), output.data(), per_rank, dtype); break;
          }
        };
        // Same iteration count on every rank: derived from the size, never from local timing.
        const int iterations =
            static_cast<int>(std::clamp<std::size_t>((256u << 20) / bytes, 5, 200));
        issue();
        comm->synchronize();
        comm->barrier();
        comm->synchronize();
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) issue();
        comm->synchronize();
        const float seconds = static_cast<float>(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
            iterations);
        float slowest = seconds;
        comm->all_reduce(&seconds, &slowest, 1, zero::DType::kFloat32, zero::ReduceOp::kMax);
        comm->synchronize();
        if (comm->rank() == 0) {
          const double algbw = static_cast<double>(bytes) / slowest / 1e9;
          std::printf("%-15s %12zu %10.1f %12.3f %12.3f\n", op.name, bytes, slowest * 1e6, algbw,
                      algbw * op.bus_factor(world));
        }
      }
    }
  } catch (const std::exception& error) {
    zero::log_error(error.what());
    zero::abort_job(1);
  }
  zero::finalize_communication();
  return 0;
}
