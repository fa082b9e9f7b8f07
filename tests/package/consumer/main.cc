// Uses zero::core from an install tree: a sharded flat layout and a world-of-one all_reduce; then
// says whether the program has the CUDA backend (zero::cuda linked) and, without it, the error a
// CUDA device context gives.
#include <cstdio>
#include <exception>

#include "zero/comm/communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device.h"
#include "zero/core/flat_buffer.h"

int main() {
  zero::FlatLayout layout({{"weight", {3, 5}}, {"bias", {5}}}, /*world_size=*/4, /*alignment=*/2);
  zero::MemoryLedger ledger;
  zero::HostAllocator host(ledger);
  zero::FlatBuffer buffer(layout, zero::DType::kFloat32, host, zero::MemoryCategory::kParams);
  auto bias = buffer.view<float>("bias");
  for (float& x : bias.span()) x = 2.0f;
  auto comm = zero::make_local_communicator();
  comm->all_reduce(bias.data, bias.data, 5, zero::DType::kFloat32, zero::ReduceOp::kSum);
  comm->synchronize();
  const zero::ElementRange shard = layout.shard(3);
  std::printf("consumer ok: padded=%zu shard3=[%zu,%zu) bias=%g\n", layout.padded_num_elements(),
              shard.begin, shard.end, bias.span()[4]);
  if (zero::cuda_compiled()) {
    std::printf("cuda backend: linked, %d device(s) visible\n", zero::cuda_device_count());
  } else {
    try {
      zero::make_device_context(zero::Device::cuda(0));
      std::printf("cuda backend: absent, yet cuda:0 has a context\n");
      return 1;
    } catch (const std::exception& error) {
      std::printf("cuda backend: absent (%s)\n", error.what());
    }
  }
  return layout.padded_num_elements() == 24 && shard.begin == 18 && bias.span()[4] == 2.0f ? 0 : 1;
}
