// GradReducer on its own (world 1, CPU context, a StateStorage): buckets flushed when full and at
// the end of a micro-step, the post-scale into the owned gradients (added at stages 2-3, written
// once at the boundary at stages 0-1), the host pieces handed to a recording
// HostGradientReceiver, and the per-micro-step bookkeeping of reduced units.
#include "engine/grad_reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/state_storage.h"
#include "state_storage_util.h"
#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/engine/options.h"
#include "zero/engine/state_policy.h"

namespace zero {
namespace {

// Records the pieces handed to the host (unit, offset, count, block) and counts the flushes.
class RecordingReceiver final : public HostGradientReceiver {
 public:
  struct Piece {
    UnitId unit;
    std::size_t offset, count, block;
    bool operator==(const Piece&) const = default;
  };
  void before_flush() override { ++flushes; }
  void unpack(const void*, std::size_t count, std::vector<HostGradPiece> handed, bool,
              float) override {
    for (const HostGradPiece& piece : handed)
      pieces.push_back({piece.unit, piece.offset, piece.count, count});
  }
  std::vector<Piece> pieces;
  int flushes = 0;
};

class GradReducerTest : public ::testing::Test {
 protected:
  // Units of `sizes` elements at `stage` (one unit per sub-group: with partial_offload_, the
  // first on the device, the rest in the host partition), a bucket of `bucket` elements. The
  // owned (and, stages 0-1, full) gradients of unit u start at u * 1000.
  GradReducer& make(int stage, std::vector<std::size_t> sizes, std::size_t bucket) {
    options_.stage = stage;
    if (partial_offload_) {
      options_.offload_optimizer.device = config::OffloadDevice::kCpu;
      options_.offload_optimizer.ratio = 0.5;
      options_.sub_group_size = 1;
    }
    policy_ = state_policy(options_);
    storage_ = testing::allocated_storage(*context_, options_, policy_, sizes, 0, 1, 1,
                                          SwapStoreFactory{}, [](std::size_t) { return 1; });
    context_->compute_stream().synchronize();  // the storage's zeroing, before the values
    for (UnitId u = 0; u < static_cast<UnitId>(sizes.size()); ++u) {
      const auto initial = static_cast<float>(u * 1000);
      const std::size_t count = sizes[static_cast<std::size_t>(u)];
      std::fill_n(static_cast<float*>(storage_->owned_grads(u)), count, initial);
      if (policy_.full_grads)
        std::fill_n(static_cast<float*>(storage_->full_grads(u)), count, initial);
    }
    reducer_ = std::make_unique<GradReducer>(GradReduceSetup{
        .context = *context_,
        .communicator = *communicator_,
        .options = options_,
        .policy = policy_,
        .comm_done = comm_done_,
        .skip_collectives = false,
        .storage = *storage_,
        .host = host_,
    });
    std::vector<GradReducer::UnitShape> shapes;
    for (std::size_t u = 0; u < sizes.size(); ++u)
      shapes.push_back({"unit" + std::to_string(u), sizes[u], sizes[u]});
    reducer_->set_units(std::move(shapes));
    reducer_->allocate(BucketSize{.bucket_elements = bucket, .receive_elements = 0});
    return *reducer_;
  }

  // Unit u's owned gradients (fp32).
  std::vector<float> owned(UnitId u) {
    const auto* values = static_cast<const float*>(storage_->owned_grads(u));
    return {values, values + storage_->unit(u).owned_count};
  }

  // A transient gradient buffer of unit u (stages 2-3) holding `value` + i.
  std::shared_ptr<Buffer> transient(UnitId u, float value) {
    const std::size_t n = storage_->unit(u).padded;
    auto buffer =
        std::make_shared<Buffer>(context_->allocator(MemorySpace::kDevice)
                                     .allocate(n * sizeof(float), MemoryCategory::kGrads));
    for (std::size_t i = 0; i < n; ++i) buffer->data_as<float>()[i] = value + static_cast<float>(i);
    return buffer;
  }

  void TearDown() override { comm_done_.synchronize(); }

  EngineOptions options_ = [] {
    EngineOptions options;
    options.gradient_accumulation_steps = 2;
    options.overlap_comm = true;
    options.alignment_elements = 1;
    return options;
  }();
  bool partial_offload_ = false;
  StatePolicy policy_;
  std::unique_ptr<DeviceContext> context_ = make_cpu_context();
  std::unique_ptr<Communicator> communicator_ =
      make_local_communicator(CommOptions::from_environment(), context_.get());
  Event comm_done_;
  std::unique_ptr<StateStorage> storage_;
  RecordingReceiver host_;
  int& flushes_ = host_.flushes;
  std::vector<RecordingReceiver::Piece>& host_pieces_ = host_.pieces;
  std::unique_ptr<GradReducer> reducer_;
};

TEST_F(GradReducerTest, Stage2AddsEachMicroStepsGradientsScaledByTheAccumulation) {
  GradReducer& reducer = make(2, {6, 3}, 4);
  for (int micro = 0; micro < 2; ++micro) {
    EXPECT_FALSE(reducer.reduce(0, transient(0, 10.0f), micro == 1));
    EXPECT_EQ(flushes_, 3 * micro + 1);  // 6 elements through a bucket of 4: one full bucket
    EXPECT_TRUE(reducer.reduce(1, transient(1, 20.0f), micro == 1));
    EXPECT_EQ(flushes_, 3 * micro + 2);
    reducer.end_micro_step(micro == 1);
    EXPECT_EQ(flushes_, 3 * micro + 3);  // the rest at the end of every micro-step
  }
  comm_done_.synchronize();
  // Two micro-steps of (value + i) × 1/2 each, added to the initial u * 1000.
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(owned(0)[i], 10.0f + static_cast<float>(i));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(owned(1)[i], 1020.0f + static_cast<float>(i));
}

TEST_F(GradReducerTest, Stage0ReducesTheFullGradientsOnlyAtTheBoundary) {
  GradReducer& reducer = make(0, {4, 2}, 8);
  EXPECT_FALSE(reducer.reduce(0, nullptr, false));
  EXPECT_TRUE(reducer.reduce(1, nullptr, false));
  reducer.end_micro_step(false);
  EXPECT_EQ(flushes_, 0);
  reducer.reduce(0, nullptr, true);
  reducer.reduce(1, nullptr, true);
  EXPECT_EQ(flushes_, 0);  // both fit the bucket
  reducer.end_micro_step(true);
  EXPECT_EQ(flushes_, 1);
  comm_done_.synchronize();
  EXPECT_EQ(owned(0), std::vector<float>(4, 0.0f));  // written once: × 1/2, not added
  EXPECT_EQ(owned(1), std::vector<float>(2, 500.0f));
}

TEST_F(GradReducerTest, HostUnitsGoToTheReceiverWithTheirOffsets) {
  partial_offload_ = true;
  GradReducer& reducer = make(2, {3, 5}, 4);
  reducer.reduce(0, transient(0, 1.0f), true);
  reducer.reduce(1, transient(1, 2.0f), true);
  reducer.end_micro_step(true);
  comm_done_.synchronize();
  // Bucket 1: unit 0 [0, 3) on the device, unit 1 [0, 1) to the host; bucket 2: unit 1 [1, 5).
  ASSERT_TRUE(storage_->on_device(0));
  ASSERT_FALSE(storage_->on_device(1));
  EXPECT_EQ(host_pieces_, (std::vector<RecordingReceiver::Piece>{{1, 0, 1, 4}, {1, 1, 4, 4}}));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(owned(0)[i], 0.5f * (1.0f + static_cast<float>(i)));
  EXPECT_EQ(owned(1), std::vector<float>(5, 1000.0f));  // the receiver's, not written here
}

TEST_F(GradReducerTest, EachUnitIsReducedOncePerMicroStep) {
  GradReducer& reducer = make(2, {2, 2}, 4);
  EXPECT_FALSE(reducer.reduced(0));
  reducer.reduce(0, transient(0, 0.0f), false);
  EXPECT_TRUE(reducer.reduced(0));
  EXPECT_EQ(reducer.reduced_units(), 1);
  EXPECT_THROW(reducer.reduce(0, transient(0, 0.0f), false), Error);
  EXPECT_THROW(reducer.reduce(2, nullptr, false), Error);
  EXPECT_THROW(static_cast<void>(reducer.reduced(-1)), Error);
  reducer.reduce(1, transient(1, 0.0f), false);
  reducer.end_micro_step(false);
  EXPECT_FALSE(reducer.reduced(0));
  EXPECT_EQ(reducer.reduced_units(), 0);
  EXPECT_THROW(reducer.set_units({}), Error);
}

}  // namespace
}  // namespace zero
