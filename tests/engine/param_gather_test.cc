// ParamGatherer on its own (world 1, CPU context): the gathered values, the release of buffers,
// prefetch along the recorded order under the bucket and the live cap, the trace's invalidation,
// persistence and the re-gather after a step. The shards come from a recording ParamShardSource.
#include "engine/param_gather.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/engine/options.h"

namespace zero {
namespace {

// Unit u's shard from the test's values, recording the units handed to an all-gather in order.
class RecordingShards final : public ParamShardSource {
 public:
  const void* param_shard(UnitId u, void*) override {
    sourced.push_back(u);
    return shards[static_cast<std::size_t>(u)].data();
  }
  std::vector<std::vector<float>> shards;
  std::vector<UnitId> sourced;
};

class ParamGathererTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements; unit u's shard holds u * 100 + i.
  ParamGatherer& make(std::vector<std::size_t> sizes, bool param_shard = true) {
    for (std::size_t u = 0; u < sizes.size(); ++u) {
      std::vector<float> values(sizes[u]);
      for (std::size_t i = 0; i < sizes[u]; ++i) values[i] = static_cast<float>(u * 100 + i);
      source_.shards.push_back(std::move(values));
    }
    gatherer_ = std::make_unique<ParamGatherer>(ParamGatherSetup{
        .context = *context_,
        .communicator = *communicator_,
        .options = options_,
        .comm_done = comm_done_,
        .compute = DType::kFloat32,
        .param_shard = param_shard,
        .skip_collectives = false,
        .shards = source_,
    });
    std::vector<ParamGatherer::UnitShape> shapes;
    for (std::size_t u = 0; u < sizes.size(); ++u)
      shapes.push_back({"unit" + std::to_string(u), sizes[u], sizes[u], sizes[u]});
    gatherer_->set_units(std::move(shapes));
    return *gatherer_;
  }

  // Queued all-gathers write the gatherer's buffers: drained before they are freed.
  void TearDown() override { comm_done_.synchronize(); }

  // One micro-step gathering and releasing `order` in turn.
  void micro_step(const std::vector<UnitId>& order) {
    for (UnitId u : order) {
      gatherer_->gather(u);
      gatherer_->release(u);
    }
    gatherer_->end_micro_step();
  }

  EngineOptions options_ = [] {
    EngineOptions options;
    options.stage = 3;
    options.overlap_comm = true;
    options.param_persistence_threshold = 0;
    return options;
  }();
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
  std::unique_ptr<Communicator> communicator_ =
      make_local_communicator(CommOptions::from_environment(), context_.get());
  Event comm_done_;
  RecordingShards source_;
  std::vector<UnitId>& sourced_ = source_.sourced;  // units handed to an all-gather, in order
  std::unique_ptr<ParamGatherer> gatherer_;
};

TEST_F(ParamGathererTest, GatherHoldsTheShardsValuesUntilTheLastRelease) {
  ParamGatherer& gatherer = make({4, 6});
  const auto* values = static_cast<const float*>(gatherer.gather(1));
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(values[i], 100.0f + static_cast<float>(i));
  EXPECT_EQ(gatherer.gather(1), values);  // a second user shares the buffer
  EXPECT_EQ(sourced_, std::vector<UnitId>{1});
  EXPECT_EQ(gatherer.live_elements(), 6U);
  gatherer.release(1);
  EXPECT_EQ(gatherer.live_elements(), 6U);
  gatherer.release(1);
  EXPECT_EQ(gatherer.live_elements(), 0U);
  EXPECT_THROW(gatherer.release(1), Error);
  EXPECT_THROW(gatherer.release(2), Error);
}

TEST_F(ParamGathererTest, TheSecondMicroStepPrefetchesAlongTheFirstOnesOrder) {
  ParamGatherer& gatherer = make({4, 4, 4});
  micro_step({2, 0, 1});
  EXPECT_EQ(sourced_, (std::vector<UnitId>{2, 0, 1}));
  sourced_.clear();
  gatherer.gather(2);  // issues 0 and 1 behind it
  EXPECT_EQ(sourced_, (std::vector<UnitId>{2, 0, 1}));
  EXPECT_EQ(gatherer.live_elements(), 12U);
  gatherer.release(2);
  gatherer.gather(0);
  gatherer.release(0);
  gatherer.gather(1);
  gatherer.release(1);
  gatherer.end_micro_step();
  EXPECT_EQ(sourced_.size(), 3U);  // nothing gathered twice
  EXPECT_EQ(gatherer.live_elements(), 0U);
}

TEST_F(ParamGathererTest, PrefetchStaysUnderTheLiveCapAndTheBucket) {
  options_.max_live_parameters = 8;
  ParamGatherer& gatherer = make({4, 4, 4});
  micro_step({0, 1, 2});
  sourced_.clear();
  gatherer.gather(0);  // 0 and 1 fill the cap: 2 waits
  EXPECT_EQ(sourced_, (std::vector<UnitId>{0, 1}));
  EXPECT_EQ(gatherer.live_elements(), 8U);
  gatherer.release(0);
  gatherer.end_micro_step();  // 1 was prefetched and not used: freed
  EXPECT_EQ(gatherer.live_elements(), 0U);

  options_.max_live_parameters = 1'000;
  options_.prefetch_bucket_size = 4;  // the test comes before each unit: one unit per gather
  sourced_.clear();
  gatherer.gather(0);
  EXPECT_EQ(sourced_, (std::vector<UnitId>{0, 1}));
}

TEST_F(ParamGathererTest, AnOrderThatDepartsFromTheTraceStopsPrefetchAndIsRecordedAgain) {
  ParamGatherer& gatherer = make({4, 4, 4});
  micro_step({0, 1, 2});
  sourced_.clear();
  micro_step({1, 0, 2});  // departs at once: no prefetch
  EXPECT_EQ(sourced_, (std::vector<UnitId>{1, 0, 2}));
  micro_step({1, 0, 2});  // recorded again
  sourced_.clear();
  gatherer.gather(1);
  EXPECT_EQ(sourced_, (std::vector<UnitId>{1, 0, 2}));
}

TEST_F(ParamGathererTest, PersistentUnitsStayGatheredAndAreRegatheredAfterTheStep) {
  options_.param_persistence_threshold = 5;
  ParamGatherer& gatherer = make({4, 8});
  EXPECT_TRUE(gatherer.persistent(0));
  EXPECT_FALSE(gatherer.persistent(1));
  micro_step({0, 1});
  EXPECT_EQ(gatherer.live_elements(), 4U);
  sourced_.clear();
  source_.shards[0][0] = -1.0f;  // the step updated the shard
  gatherer.regather_persistent();
  EXPECT_EQ(sourced_, std::vector<UnitId>{0});
  EXPECT_EQ(static_cast<const float*>(gatherer.gather(0))[0], -1.0f);
  EXPECT_THROW(gatherer.regather_persistent(), Error);  // unit 0 is held
  gatherer.release(0);
}

TEST_F(ParamGathererTest, BelowStageThreeOnlyTheUsersAreCounted) {
  options_.param_persistence_threshold = 5;
  ParamGatherer& gatherer = make({4}, /*param_shard=*/false);
  EXPECT_FALSE(gatherer.persistent(0));
  EXPECT_THROW(gatherer.gather(0), Error);
  gatherer.hold(0);
  gatherer.release(0);
  EXPECT_THROW(gatherer.release(0), Error);
  gatherer.end_micro_step();
  EXPECT_TRUE(sourced_.empty());
  EXPECT_EQ(gatherer.live_elements(), 0U);
}

}  // namespace
}  // namespace zero
