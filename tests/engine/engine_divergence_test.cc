// Divergence: a rank that gathers a different unit, or skips a gather, fails with an error that
// names the unit and the ranks, well within the watchdog timeout, instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

EngineOptions stage3_options() {
  EngineOptions options = parity_options(3, 1);
  options.param_persistence_threshold = 0;
  return options;
}

std::string run_divergent(bool skip_entirely) {
  // A rank that gathers another unit is caught by the tag check at once, whatever the timeout; a
  // rank that never gathers is caught by the watchdog, so keep that one short.
  CommOptions comm_options;
  comm_options.timeout = std::chrono::seconds(skip_entirely ? 2 : 60);
  try {
    run_ranks(
        4,
        [&](Communicator& comm) {
          std::unique_ptr<Engine> engine = make_engine(stage3_options(), comm);
          TinyStack model;
          model.register_units(*engine);
          engine->initialize();
          const UnitId block1 = engine->unit("block.1");
          const UnitId block2 = engine->unit("block.2");
          // Ranks 0, 2, 3 gather block.1 then block.2; rank 1 skips block.1.
          if (comm.rank() != 1) GatheredUnit first = engine->gather(block1);
          if (skip_entirely && comm.rank() == 1) return;
          GatheredUnit second = engine->gather(block2);
        },
        comm_options);
  } catch (const Error& error) {
    std::printf("%s\n", error.what());
    return error.what();
  }
  return "no error";
}

TEST(EngineDivergence, RankGatheringAnotherUnitIsNamed) {
  const auto start = std::chrono::steady_clock::now();
  const std::string message = run_divergent(false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));  // no timeout
  // Whichever rank reports first: its own unit, then every rank's.
  EXPECT_NE(message.find("failed: ranks disagree on collective #6"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 called #6 all_gather(count=304, fp32) 'gather block.2'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("ranks 0, 2, 3 called #6 all_gather(count=304, fp32) 'gather block.1'"),
            std::string::npos)
      << message;
}

TEST(EngineDivergence, RankThatNeverGathersIsReportedByTheWatchdog) {
  const std::string message = run_divergent(true);
  EXPECT_NE(message.find("gathering unit 'block.1'"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace zero::testing
