// dtype conversions: exhaustive 16-bit round trips and rounding against known values.
#include "zero/core/dtype.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "zero/core/error.h"

namespace zero {
namespace {

TEST(DType, NamesAndParse) {
  EXPECT_EQ(name_of(DType::kBFloat16), "bf16");
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBFloat16);
  EXPECT_EQ(parse_dtype("half"), DType::kFloat16);
  EXPECT_EQ(parse_dtype("fp32"), DType::kFloat32);
  EXPECT_EQ(size_of(DType::kFloat16), 2u);
  try {
    parse_dtype("fp8");
    FAIL() << "fp8 accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'fp8'"), std::string::npos);
  }
}

TEST(DType, EveryFp16ValueRoundTrips) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const Float16 value{static_cast<std::uint16_t>(bits)};
    const float widened = to_float(value);
    if (std::isnan(widened)) {
      EXPECT_TRUE(std::isnan(to_float(to_fp16(widened)))) << bits;
      continue;
    }
    EXPECT_EQ(to_fp16(widened).bits, bits) << "fp16 bits " << bits;
  }
}

TEST(DType, EveryBf16ValueRoundTrips) {
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const BFloat16 value{static_cast<std::uint16_t>(bits)};
    const float widened = to_float(value);
    if (std::isnan(widened)) {
      EXPECT_TRUE(std::isnan(to_float(to_bf16(widened))));
      continue;
    }
    EXPECT_EQ(to_bf16(widened).bits, bits) << "bf16 bits " << bits;
  }
}

// Rounding to nearest even, checked against the value computed by exact arithmetic: the result
// must be the nearest representable value, ties to the even mantissa.
TEST(DType, Fp16RoundsToNearestEven) {
  EXPECT_EQ(to_fp16(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_fp16(65504.0f).bits, 0x7bff);   // max normal
  EXPECT_EQ(to_fp16(65519.99f).bits, 0x7bff);  // rounds down to max
  EXPECT_EQ(to_fp16(65520.0f).bits, 0x7c00);   // tie rounds to even: inf
  EXPECT_EQ(to_fp16(1e9f).bits, 0x7c00);
  EXPECT_EQ(to_fp16(-1e9f).bits, 0xfc00);
  EXPECT_EQ(to_fp16(0x1p-24f).bits, 0x0001);    // smallest subnormal
  EXPECT_EQ(to_fp16(0x1p-25f).bits, 0x0000);    // tie with 0: even is 0
  EXPECT_EQ(to_fp16(0x1.8p-25f).bits, 0x0001);  // above the tie
  EXPECT_EQ(to_fp16(-0.0f).bits, 0x8000);
  EXPECT_EQ(to_fp16(1.0f + 0x1p-11f).bits, 0x3c00);      // tie between 1 and 1+2^-10: even (1)
  EXPECT_EQ(to_fp16(1.0f + 3 * 0x1p-11f).bits, 0x3c02);  // tie: rounds up to even
  EXPECT_EQ(to_fp16(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_TRUE(std::isnan(to_float(to_fp16(std::nanf("")))));
  // Random values: the result is the nearest fp16 neighbour.
  std::uint32_t state = 12345;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;
    const float x = std::ldexp(static_cast<float>(state >> 8) / (1 << 24) * 2.0f - 1.0f,
                               static_cast<int>(state % 40) - 26);
    const Float16 rounded = to_fp16(x);
    const float r = to_float(rounded);
    if (std::isinf(r)) continue;
    const float up = to_float(Float16{static_cast<std::uint16_t>(rounded.bits + 1)});
    const float down = to_float(Float16{static_cast<std::uint16_t>(rounded.bits - 1)});
    EXPECT_LE(std::fabs(static_cast<double>(r) - x), std::fabs(static_cast<double>(up) - x)) << x;
    if ((rounded.bits & 0x7fff) != 0)
      EXPECT_LE(std::fabs(static_cast<double>(r) - x), std::fabs(static_cast<double>(down) - x))
          << x;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0x3f808000u)).bits, 0x3f80);  // tie: even
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0x3f818000u)).bits, 0x3f82);  // tie: even (up)
  EXPECT_EQ(to_bf16(std::bit_cast<float>(0x3f808001u)).bits, 0x3f81);  // above tie
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // overflows to inf
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::nanf("")))));
}

TEST(DType, ConvertBuffersAllDirections) {
  const std::vector<float> values = {0.0f, 1.5f, -2.25f, 3.0e4f, 1.0e-3f, -7.0f, 0.1f};
  for (DType via : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    std::vector<char> narrow(values.size() * size_of(via));
    convert(values.data(), DType::kFloat32, narrow.data(), via, values.size());
    std::vector<float> back(values.size());
    convert(narrow.data(), via, back.data(), DType::kFloat32, values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      float expected = values[i];
      if (via == DType::kBFloat16) expected = to_float(to_bf16(values[i]));
      if (via == DType::kFloat16) expected = to_float(to_fp16(values[i]));
      EXPECT_EQ(back[i], expected) << name_of(via) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace zero
