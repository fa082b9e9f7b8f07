// FlatLayout / FlatBuffer views, padding, and the shard-range function at every world size.
#include "zero/core/flat_buffer.h"

#include <gtest/gtest.h>

#include "zero/core/error.h"

namespace zero {
namespace {

TEST(Partition, PaddingAndShardsCoverExactlyOnce) {
  for (int world = 1; world <= 8; ++world) {
    for (std::size_t alignment : {1u, 4u, 128u}) {
      for (std::size_t n : {0u, 1u, 22u, 1023u, 1u << 20}) {
        const std::size_t padded = padded_num_elements(n, world, alignment);
        EXPECT_GE(padded, n);
        EXPECT_EQ(padded % (world * alignment), 0u);
        EXPECT_LT(padded - n, world * alignment);
        std::size_t covered = 0;
        for (int rank = 0; rank < world; ++rank) {
          const ElementRange shard = shard_range(padded, world, rank);
          EXPECT_EQ(shard.begin, covered);
          EXPECT_EQ(shard.size(), padded / world);
          EXPECT_EQ(shard.size() % alignment, 0u);
          covered = shard.end;
        }
        EXPECT_EQ(covered, padded);
      }
    }
  }
}

TEST(Partition, RejectsBadArguments) {
  EXPECT_THROW(padded_num_elements(10, 0, 1), Error);
  EXPECT_THROW(padded_num_elements(10, 2, 0), Error);
  EXPECT_THROW(shard_range(10, 3, 0), Error);
  EXPECT_THROW(shard_range(12, 3, 3), Error);
  EXPECT_THROW(shard_range(12, 3, -1), Error);
}

TEST(Partition, Intersect) {
  EXPECT_EQ(intersect({0, 10}, {5, 20}), (ElementRange{5, 10}));
  EXPECT_TRUE(intersect({0, 10}, {10, 20}).empty());
  EXPECT_TRUE(intersect({8, 10}, {0, 3}).empty());
}

TEST(FlatBuffer, NamedViewsAndZeroedPadding) {
  FlatLayout layout({{"wte", {5, 3}}, {"bias", {3}}, {"scalar", {}}}, /*world_size=*/4,
                    /*alignment=*/2);
  EXPECT_EQ(layout.num_elements(), 19u);
  EXPECT_EQ(layout.padded_num_elements(), 24u);
  EXPECT_EQ(layout.slot("bias").offset_elements, 15u);
  EXPECT_EQ(layout.slot("scalar").num_elements, 1u);
  EXPECT_EQ(layout.shard(3), (ElementRange{18, 24}));

  MemoryLedger ledger;
  HostAllocator host(ledger);
  FlatBuffer buffer(layout, DType::kFloat32, host, MemoryCategory::kParams);
  EXPECT_EQ(ledger.entry(MemorySpace::kHost, MemoryCategory::kParams).current_bytes, 24 * 4);
  auto bias = buffer.view<float>("bias");
  ASSERT_EQ(bias.span().size(), 3u);
  bias.span()[2] = 7.0f;
  EXPECT_EQ(static_cast<float*>(buffer.data())[17], 7.0f);
  for (std::size_t i = 19; i < 24; ++i) EXPECT_EQ(static_cast<float*>(buffer.data())[i], 0.0f);
  EXPECT_THROW(buffer.view<std::uint16_t>("bias"), Error);
  try {
    layout.slot("bais");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("wte, bias, scalar"), std::string::npos)
        << error.what();
  }
}

TEST(FlatBuffer, RejectsBadLayouts) {
  EXPECT_THROW(FlatLayout({{"a", {2}}, {"a", {3}}}, 1, 1), Error);
  EXPECT_THROW(FlatLayout({{"", {2}}}, 1, 1), Error);
  EXPECT_THROW(FlatLayout({{"a", {2, -1}}}, 1, 1), Error);
}

TEST(FlatBuffer, Bf16Buffer) {
  MemoryLedger ledger;
  PlanningAllocator planner(ledger, MemorySpace::kDevice);
  FlatBuffer planned(FlatLayout({{"w", {1000}}}, 8, 16), DType::kBFloat16, planner,
                     MemoryCategory::kParamShard);
  EXPECT_EQ(planned.data(), nullptr);
  EXPECT_EQ(ledger.entry(MemorySpace::kDevice, MemoryCategory::kParamShard).current_bytes,
            1024 * 2);
}

}  // namespace
}  // namespace zero
