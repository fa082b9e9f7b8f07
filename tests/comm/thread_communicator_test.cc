// The thread-backed communicator at world sizes 1..8: every collective against the reference,
// sums in rank order bit for bit whatever the streams' timing, collectives as stream work of the
// given device context, mismatch detection, timeouts that name the rank behind.
#include "zero/comm/thread_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "../common/forwarding_context.h"
#include "collective_checks.h"
#include "zero/core/cpu_context.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"

namespace zero {
namespace {

class ThreadCommunicatorWorlds : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCommunicatorWorlds, EveryCollectiveMatchesReference) {
  // 1M-element buffers at every world size would dominate the suite; they run at 4 ranks (and
  // under MPI at 2 and 4).
  const std::size_t max_count = GetParam() == 4 ? std::size_t{1} << 20 : 1023;
  run_ranks(GetParam(),
            [&](Communicator& comm) { testing::check_every_collective(comm, max_count); });
}

INSTANTIATE_TEST_SUITE_P(World, ThreadCommunicatorWorlds, ::testing::Range(1, 9));

TEST(ThreadCommunicator, RandomFloatSumsAreBitIdenticalOnEveryRank) {
  constexpr int kWorld = 5;
  constexpr std::size_t kCount = 1000;
  std::vector<std::vector<float>> results(kWorld);
  run_ranks(kWorld, [&](Communicator& comm) {
    std::vector<float> data(kCount);
    std::uint32_t state = 77u + comm.rank();
    for (float& x : data) {
      state = state * 1664525u + 1013904223u;
      x = static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
    }
    comm.all_reduce(data.data(), data.data(), kCount, DType::kFloat32, ReduceOp::kSum);
    comm.synchronize();
    results[comm.rank()] = data;
  });
  for (int r = 1; r < kWorld; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
}

// Rank r's element i: magnitudes from 2^-8 to 2^24 with both signs, so fp32 sums of them depend
// on the order they are added in.
float order_sensitive_value(int rank, std::size_t index) {
  std::uint32_t state = 2654435761u * static_cast<std::uint32_t>(index + 1) + 97u * rank;
  state ^= state >> 13;
  state *= 1274126177u;
  const int exponent = static_cast<int>(state % 33) - 8;
  const float mantissa = 1.0f + static_cast<float>((state >> 8) & 0xffff) / 65536.0f;
  return std::ldexp((state & 0x80000000u) != 0 ? -mantissa : mantissa, exponent);
}

// `value` rounded to `dtype` and back.
float rounded_to(DType dtype, float value) {
  std::vector<char> narrow(size_of(dtype));
  convert(&value, DType::kFloat32, narrow.data(), dtype, 1);
  convert(narrow.data(), dtype, &value, DType::kFloat32, 1);
  return value;
}

// Σ over ranks 0, 1, ... (or the reverse) of element `index` as `dtype` values, in fp32, rounded
// once to `dtype`.
float ordered_sum(int world, std::size_t index, DType dtype, bool reverse = false) {
  float total = 0.0f;
  for (int k = 0; k < world; ++k) {
    const float value =
        rounded_to(dtype, order_sensitive_value(reverse ? world - 1 - k : k, index));
    total = k == 0 ? value : total + value;
  }
  return rounded_to(dtype, total);
}

std::vector<char> order_sensitive_input(int rank, std::size_t count, DType dtype) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = order_sensitive_value(rank, i);
  std::vector<char> buffer(count * size_of(dtype));
  convert(values.data(), DType::kFloat32, buffer.data(), dtype, count);
  return buffer;
}

// all_reduce out of place and in place, and reduce_scatter in place (recv = send + rank·count),
// of order-sensitive values: every element equals the rank-order fp32 sum computed here, bit for
// bit, on a context whose streams are delayed at random (other timings, same bits).
class ThreadCommunicatorOrder : public ::testing::TestWithParam<int> {};

TEST_P(ThreadCommunicatorOrder, SumsAreTheRankOrderSumBitwiseWhateverTheTiming) {
  const int world = GetParam();
  constexpr std::size_t kCount = 4099;
  std::size_t order_matters = 0;
  for (std::size_t i = 0; i < kCount; ++i)
    if (ordered_sum(world, i, DType::kFloat32) != ordered_sum(world, i, DType::kFloat32, true))
      ++order_matters;
  // Two terms add the same either way round; from three on, the order shows in the bits.
  if (world >= 3) {
    ASSERT_GT(order_matters, kCount / 10) << "the sums must depend on the order";
  }
  for (const std::uint64_t seed : {0u, 11u, 12u}) {
    std::unique_ptr<DeviceContext> context = make_cpu_context(
        CpuContextOptions{.stress = {seed, std::chrono::microseconds(seed == 0 ? 0 : 300)}});
    run_ranks(
        world,
        [&](Communicator& comm) {
          for (const DType dtype : {DType::kFloat32, DType::kBFloat16}) {
            SCOPED_TRACE(std::string(name_of(dtype)) + " seed " + std::to_string(seed));
            const std::vector<char> input = order_sensitive_input(comm.rank(), kCount, dtype);
            std::vector<char> out(input.size()), in_place = input;
            comm.all_reduce(input.data(), out.data(), kCount, dtype, ReduceOp::kSum);
            comm.all_reduce(in_place.data(), in_place.data(), kCount, dtype, ReduceOp::kSum);
            const std::size_t block = kCount / world;
            std::vector<char> scattered = order_sensitive_input(comm.rank(), block * world, dtype);
            char* own = scattered.data() + comm.rank() * block * size_of(dtype);
            comm.reduce_scatter(scattered.data(), own, block, dtype, ReduceOp::kSum);
            comm.synchronize();
            const std::vector<float> all = testing::to_floats(out.data(), dtype, kCount);
            const std::vector<float> all_in_place =
                testing::to_floats(in_place.data(), dtype, kCount);
            const std::vector<float> mine = testing::to_floats(own, dtype, block);
            // Counted, not asserted: a rank that left early would leave its peers waiting.
            std::size_t wrong = 0, wrong_in_place = 0, wrong_scattered = 0;
            for (std::size_t i = 0; i < kCount; ++i) {
              wrong += all[i] != ordered_sum(world, i, dtype);
              wrong_in_place += all_in_place[i] != all[i];
            }
            for (std::size_t i = 0; i < block; ++i)
              wrong_scattered += mine[i] != ordered_sum(world, comm.rank() * block + i, dtype);
            EXPECT_EQ(wrong, 0u) << "all_reduce";
            EXPECT_EQ(wrong_in_place, 0u) << "in-place all_reduce";
            EXPECT_EQ(wrong_scattered, 0u) << "in-place reduce_scatter";
          }
        },
        {}, context.get());
  }
}

INSTANTIATE_TEST_SUITE_P(World, ThreadCommunicatorOrder, ::testing::Values(2, 3, 4));

// A CPU context that counts the operations a communicator enqueues through it.
class CountingContext final : public testing::ForwardingContext {
 public:
  CountingContext() : ForwardingContext(make_cpu_context()) {}
  std::unique_ptr<Stream> make_stream(std::string name) override {
    ++streams;
    return ForwardingContext::make_stream(std::move(name));
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    ++copies;
    ForwardingContext::copy(stream, source, destination, size_bytes);
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    ++axpys;
    ForwardingContext::axpy(stream, x, x_dtype, y, y_dtype, count, alpha);
  }
  std::atomic<int> streams{0}, copies{0}, axpys{0};
};

// The collectives are the given context's stream work: a stream of its own per rank, its copies
// (an all_gather: one per block but the rank's own, in place) and its axpy (a sum: one per peer).
TEST(ThreadCommunicator, CollectivesAreStreamWorkOfTheGivenContext) {
  constexpr int kWorld = 4;
  CountingContext context;
  run_ranks(
      kWorld,
      [](Communicator& comm) {
        EXPECT_EQ(comm.buffers(), DeviceKind::kCpu);
        std::vector<float> gathered(kWorld, 0.0f);
        gathered[comm.rank()] = static_cast<float>(comm.rank());
        comm.all_gather(&gathered[comm.rank()], gathered.data(), 1, DType::kFloat32);
        comm.synchronize();
        EXPECT_EQ(gathered, (std::vector<float>{0, 1, 2, 3}));
      },
      {}, &context);
  EXPECT_EQ(context.streams, kWorld);
  EXPECT_EQ(context.copies, kWorld * (kWorld - 1));
  EXPECT_EQ(context.axpys, 0);
  context.copies = 0;
  run_ranks(
      kWorld,
      [](Communicator& comm) {
        float x = 1.0f;
        comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum);
        comm.synchronize();
        EXPECT_EQ(x, static_cast<float>(kWorld));
      },
      {}, &context);
  EXPECT_EQ(context.axpys, kWorld * (kWorld - 1));
  EXPECT_EQ(context.copies, 2 * kWorld);  // the first block into the fp32 sum, the sum into recv
}

TEST(ThreadCommunicator, MismatchedCollectivesFailNamingBothCalls) {
  try {
    run_ranks(3, [](Communicator& comm) {
      float x = 1.0f;
      comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum);
      if (comm.rank() == 2)
        comm.barrier();
      else
        comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum);
      comm.synchronize();
    });
    FAIL() << "mismatch not detected";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("ranks disagree on collective #2"), std::string::npos) << message;
    EXPECT_NE(message.find("barrier"), std::string::npos) << message;
    EXPECT_NE(message.find("all_reduce(count=1, fp32, sum)"), std::string::npos) << message;
  }
}

TEST(ThreadCommunicator, LabelsTellSameShapedCallsApartGroupingRanks) {
  try {
    run_ranks(4, [](Communicator& comm) {
      float x = 1.0f;
      comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum,
                      comm.rank() == 1 ? "gather block.2" : "gather block.1");
      comm.synchronize();
    });
    FAIL() << "label mismatch not detected";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("ranks disagree on collective #1"), std::string::npos) << message;
    EXPECT_NE(message.find("ranks 0, 2, 3 called #1 all_reduce(count=1, fp32, sum) "
                           "'gather block.1'"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("rank 1 called #1 all_reduce(count=1, fp32, sum) 'gather block.2'"),
              std::string::npos)
        << message;
  }
}

TEST(ThreadCommunicator, LabelsAreCutToTheirLimitAndThenCompared) {
  const std::string long_label(40, 'x');
  std::vector<std::string> seen(2);
  run_ranks(2, [&](Communicator& comm) {
    float x = 1.0f;
    // Differ only past the limit: the cut labels agree, so the call goes through.
    comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum,
                    long_label + std::to_string(comm.rank()));
    comm.synchronize();
    EXPECT_EQ(x, 2.0f);
  });
  CollectiveInfo info;
  info.label = long_label.substr(0, kMaxCollectiveLabel);
  EXPECT_EQ(info.to_string(), "#0 barrier '" + long_label.substr(0, kMaxCollectiveLabel) + "'");
}

TEST(ThreadCommunicator, SkippedCollectiveTimesOutNamingTheRankBehind) {
  CommOptions options;
  options.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  try {
    run_ranks(
        4,
        [](Communicator& comm) {
          float x = 1.0f;
          comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum);
          if (comm.rank() == 1) {
            std::this_thread::sleep_for(std::chrono::seconds(2));  // "computing", skipped #2
            return;
          }
          comm.all_gather(&x, std::vector<float>(4).data(), 1, DType::kFloat32);
          comm.synchronize();
        },
        options);
    FAIL() << "skip not detected";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("#2 all_gather"), std::string::npos) << message;
    EXPECT_NE(message.find("timed out"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1: last arrived at #1 all_reduce"), std::string::npos) << message;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ThreadCommunicator, CollectivesAreOrderedOnTheCommunicationStream) {
  run_ranks(2, [](Communicator& comm) {
    std::vector<float> a(1000, 1.0f), b(1000, 2.0f);
    comm.all_reduce(a.data(), a.data(), a.size(), DType::kFloat32, ReduceOp::kSum);
    comm.all_reduce(b.data(), b.data(), b.size(), DType::kFloat32, ReduceOp::kSum);
    Event done = comm.stream().record();
    done.synchronize();
    EXPECT_EQ(a[999], 2.0f);
    EXPECT_EQ(b[0], 4.0f);
    EXPECT_EQ(comm.sequence(), 2u);
  });
}

TEST(LocalCommunicator, IsIdentity) {
  auto comm = make_local_communicator();
  EXPECT_EQ(comm->world_size(), 1);
  testing::check_every_collective(*comm, 1023);
  EXPECT_THROW(comm->broadcast(nullptr, nullptr, 0, DType::kFloat32, 1), Error);
  EXPECT_EQ(comm->buffers(), DeviceKind::kCpu);
}

TEST(LocalCommunicator, CopiesThroughAGivenContextOnOneOfItsStreams) {
  std::unique_ptr<DeviceContext> context = make_cpu_context();
  auto comm = make_local_communicator(CommOptions::from_environment(), context.get());
  EXPECT_EQ(comm->buffers(), DeviceKind::kCpu);
  testing::check_every_collective(*comm, 1023);
}

}  // namespace
}  // namespace zero
