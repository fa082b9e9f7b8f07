// DeepSpeed 0.19's model-state estimators (zero estimate --deepspeed_compat) against the numbers
// DeepSpeed returns and prints: the 7B case (ZeRO-2: 13.04 / 27.71 GB per GPU; ZeRO-3:
// 0.49, 2.12, 15.16) and a grid of sizes, GPUs and nodes. The byte values below were taken from
// deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs and
// stage3.estimate_zero3_model_states_mem_needs (deepspeed 0.19.8); the golden test
// (deepspeed_estimate_golden_test.cc) compares with DeepSpeed itself when it is importable.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "zero/core/error.h"
#include "zero/train/plan.h"

namespace zero::testing {
namespace {

struct GridCase {
  double total_params;
  double largest_layer_params;
  int gpus_per_node;
  int nodes;
  std::vector<std::pair<std::int64_t, std::int64_t>> zero2;  // (cpu, gpu) bytes per row
  std::vector<std::pair<std::int64_t, std::int64_t>> zero3;
};

// clang-format off
const std::vector<GridCase> kGrid = {
    {7000000000.0, 131072000, 8, 1, {{336000000000, 14000000000}, {336000000000, 29750000000}}, {{189000000000, 524288000}, {336000000000, 524288000}, {168000000000, 2274288000}, {336000000000, 2274288000}, {6291456000, 16274288000}, {336000000000, 16274288000}}},
    {124439808, 38597376, 1, 1, {{2986555392, 248879616}, {746638848, 2488796160}}, {{3359874816, 154389504}, {3359874816, 154389504}, {2986555392, 403269120}, {2986555392, 403269120}, {231584256, 2394306048}, {746638848, 2394306048}}},
    {1300000000.0, 100000000.0, 4, 1, {{31200000000, 2600000000}, {31200000000, 8450000000}}, {{35100000000, 400000000}, {35100000000, 400000000}, {31200000000, 1050000000}, {31200000000, 1050000000}, {2400000000, 6250000000}, {31200000000, 6250000000}}},
    {6700000000.0, 260000000.0, 8, 2, {{643200000000, 13400000000}, {321600000000, 20937500000}}, {{90450000000, 1040000000}, {321600000000, 1040000000}, {80400000000, 1877500000}, {321600000000, 1877500000}, {12480000000, 8577500000}, {321600000000, 8577500000}}},
    {13000000000.0, 260000000.0, 8, 4, {{2496000000000, 26000000000}, {624000000000, 33312500000}}, {{87750000000, 1040000000}, {624000000000, 1040000000}, {78000000000, 1852500000}, {624000000000, 1852500000}, {12480000000, 8352500000}, {624000000000, 8352500000}}},
    {70000000000.0, 1000000000.0, 8, 8, {{26880000000000, 140000000000}, {3360000000000, 159687500000}}, {{236250000000, 4000000000}, {3360000000000, 4000000000}, {210000000000, 6187500000}, {3360000000000, 6187500000}, {48000000000, 23687500000}, {3360000000000, 23687500000}}},
    {175000000000.0, 2400000000.0, 16, 64, {{1075200000000000, 350000000000}, {16800000000000, 353076171875}}, {{73828125000, 9600000000}, {16800000000000, 9600000000}, {65625000000, 9941796875}, {16800000000000, 9941796875}, {230400000000, 12676171875}, {16800000000000, 12676171875}}},
    {3000000, 1000000, 2, 3, {{108000000, 6000000}, {36000000, 15000000}}, {{27000000, 4000000}, {36000000, 4000000}, {24000000, 5000000}, {36000000, 5000000}, {12000000, 13000000}, {36000000, 13000000}}},
};
// clang-format on

TEST(DeepSpeedEstimate, GridEqualsDeepSpeedsBytes) {
  for (const GridCase& c : kGrid) {
    const std::string what = std::to_string(c.total_params) + " params, " +
                             std::to_string(c.gpus_per_node) + " GPUs x " +
                             std::to_string(c.nodes) + " nodes";
    const auto zero2 = train::deepspeed_zero2_rows(c.total_params, c.gpus_per_node, c.nodes);
    ASSERT_EQ(zero2.size(), c.zero2.size()) << what;
    for (std::size_t i = 0; i < zero2.size(); ++i) {
      EXPECT_EQ(zero2[i].cpu_bytes, c.zero2[i].first) << what << " zero2 row " << i;
      EXPECT_EQ(zero2[i].gpu_bytes, c.zero2[i].second) << what << " zero2 row " << i;
    }
    const auto zero3 = train::deepspeed_zero3_rows(c.total_params, c.largest_layer_params,
                                                   c.gpus_per_node, c.nodes);
    ASSERT_EQ(zero3.size(), c.zero3.size()) << what;
    for (std::size_t i = 0; i < zero3.size(); ++i) {
      EXPECT_EQ(zero3[i].cpu_bytes, c.zero3[i].first) << what << " zero3 row " << i;
      EXPECT_EQ(zero3[i].gpu_bytes, c.zero3[i].second) << what << " zero3 row " << i;
    }
  }
}

// The numbers, as DeepSpeed prints them for P = 7e9, L = 131,072,000, 8 GPUs x 1 node.
TEST(DeepSpeedEstimate, SevenBillionOnEightGpusPrintsDeepSpeedsTables) {
  EXPECT_EQ(train::deepspeed_zero2_text(7e9, 8, 1),
            "Estimated memory needed for params, optim states and gradients for a:\n"
            "HW: Setup with 1 node, 8 GPUs per node.\n"
            "SW: Model with 7000M total params.\n"
            "  per CPU  |  per GPU |   Options\n"
            "  312.92GB |  13.04GB | offload_optimizer=OffloadDeviceEnum.cpu\n"
            "  312.92GB |  27.71GB | offload_optimizer=none\n");
  EXPECT_EQ(train::deepspeed_zero3_text(7e9, 131072000, 8, 1),
            "Estimated memory needed for params, optim states and gradients for a:\n"
            "HW: Setup with 1 node, 8 GPUs per node.\n"
            "SW: Model with 7000M total params, 131M largest layer params.\n"
            "  per CPU  |  per GPU |   Options\n"
            "  176.02GB |   0.49GB | offload_param=OffloadDeviceEnum.cpu, "
            "offload_optimizer=OffloadDeviceEnum.cpu, zero_init=1\n"
            "  312.92GB |   0.49GB | offload_param=OffloadDeviceEnum.cpu, "
            "offload_optimizer=OffloadDeviceEnum.cpu, zero_init=0\n"
            "  156.46GB |   2.12GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, "
            "zero_init=1\n"
            "  312.92GB |   2.12GB | offload_param=none, offload_optimizer=OffloadDeviceEnum.cpu, "
            "zero_init=0\n"
            "    5.86GB |  15.16GB | offload_param=none, offload_optimizer=none, zero_init=1\n"
            "  312.92GB |  15.16GB | offload_param=none, offload_optimizer=none, zero_init=0\n");
  // Multi-node and single-GPU wording.
  const std::string text = train::deepspeed_zero2_text(1e6, 1, 2);
  EXPECT_NE(text.find("HW: Setup with 2 nodes, 1 GPU per node."), std::string::npos) << text;
  EXPECT_THROW(train::deepspeed_zero2_rows(1e6, 0, 1), Error);
  EXPECT_THROW(train::deepspeed_zero3_rows(1e6, 1e5, 1, 0), Error);
}

}  // namespace
}  // namespace zero::testing
