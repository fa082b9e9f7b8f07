// The thread-backed communicator at world sizes 1..8: every collective against the reference,
// deterministic results, mismatch detection, timeouts that name the rank behind.
#include "zero/comm/thread_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "collective_checks.h"
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
