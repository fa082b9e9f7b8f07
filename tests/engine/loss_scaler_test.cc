// The dynamic loss scaler against DeepSpeed's DynamicLossScaler, and the engine skipping a step
// (and the LR schedule) on fp16 overflow.
#include "zero/engine/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_model.h"
#include "zero/comm/thread_communicator.h"

namespace zero::testing {
namespace {

config::Fp16Config dynamic(int power, int window, int hysteresis) {
  config::Fp16Config options;
  options.enabled = true;
  options.initial_scale_power = power;
  options.loss_scale_window = window;
  options.hysteresis = hysteresis;
  options.min_loss_scale = 1;
  return options;
}

TEST(LossScaler, GrowsAfterWindowShrinksAfterHysteresis) {
  LossScaler scaler(dynamic(4, 3, 2));
  EXPECT_EQ(scaler.scale(), 16.0);
  // DeepSpeed: (cur_iter - last_overflow_iter) % window == 0 → double; last_overflow starts -1.
  scaler.update(false);  // iter 0: (0+1) % 3 != 0
  scaler.update(false);  // iter 1: 2 % 3
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.update(false);  // iter 2: 3 % 3 == 0 → 32
  EXPECT_EQ(scaler.scale(), 32.0);
  scaler.update(true);  // hysteresis 2 → 1, scale kept
  EXPECT_EQ(scaler.scale(), 32.0);
  scaler.update(true);  // hysteresis exhausted → 16
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.update(false);  // iter 5, last overflow 4: 1 % 3
  scaler.update(false);  // 2 % 3
  scaler.update(false);  // 3 % 3 → 32, hysteresis restored
  EXPECT_EQ(scaler.scale(), 32.0);
  scaler.update(true);  // restored hysteresis absorbs one overflow
  EXPECT_EQ(scaler.scale(), 32.0);
}

TEST(LossScaler, ConsecutiveHysteresisRestoresOnEveryGoodStep) {
  config::Fp16Config options = dynamic(4, 100, 2);
  options.consecutive_hysteresis = true;
  LossScaler scaler(options);
  scaler.update(true);   // 2 → 1
  scaler.update(false);  // restored to 2
  scaler.update(true);   // 2 → 1 again, no shrink
  EXPECT_EQ(scaler.scale(), 16.0);
}

TEST(LossScaler, OverflowAtMinimumScaleIsAnError) {
  LossScaler scaler(dynamic(1, 100, 1));
  scaler.update(true);  // 2 → 1
  EXPECT_EQ(scaler.scale(), 1.0);
  EXPECT_THROW(scaler.update(true), Error);
  LossScaler kept(dynamic(1, 100, 1), /*raise_error_at_min_scale=*/false);
  kept.update(true);
  kept.update(true);
  EXPECT_EQ(kept.scale(), 1.0);
}

TEST(LossScaler, StaticScaleNeverMoves) {
  config::Fp16Config options;
  options.enabled = true;
  options.loss_scale = 128;
  LossScaler scaler(options);
  scaler.update(true);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 128.0);
}

TEST(EngineLossScaling, OverflowSkipsStepAndScheduleAndHalvesScale) {
  run_ranks(2, [](Communicator& comm) {
    EngineOptions options = parity_options(2, 1);
    options.fp16 = dynamic(8, 1000, 1);
    std::unique_ptr<Engine> engine = make_engine(options, comm);
    TinyStack model;
    model.register_units(*engine);
    model.micro_step(*engine, make_batch({}, 0, comm.rank() * 4, 4));
    EXPECT_TRUE(engine->step());
    const double lr_before = engine->lr();
    const std::vector<std::vector<float>> before = gathered_parameters(*engine);
    // An inf gradient on rank 1 only: the overflow is found by the all-reduced check.
    const UnitId head = engine->unit("head");
    for (UnitId u : model.units()) {
      GatheredUnit p = engine->gather(u);
      GradientBuffer g = engine->grads(u);
      if (u == head && comm.rank() == 1) g.data[3] = std::numeric_limits<float>::infinity();
      p.release();
    }
    for (auto it = model.units().rbegin(); it != model.units().rend(); ++it)
      engine->reduce_grads(*it);
    EXPECT_FALSE(engine->step());
    EXPECT_TRUE(engine->last_step_overflowed());
    EXPECT_EQ(engine->loss_scale(), 128.0);
    EXPECT_EQ(engine->lr(), lr_before);
    EXPECT_EQ(engine->training_state().skipped_steps, 1);
    EXPECT_EQ(engine->training_state().global_steps, 2);
    EXPECT_EQ(gathered_parameters(*engine), before);
    // Training continues normally afterwards, gradients unscaled by the loss scale.
    model.micro_step(*engine, make_batch({}, 1, comm.rank() * 4, 4));
    EXPECT_TRUE(engine->step());
    EXPECT_TRUE(std::isfinite(engine->global_grad_norm()));
  });
}

TEST(EngineLossScaling, ScaledGradientsGiveTheUnscaledTrajectory) {
  TrainResult plain, scaled;
  run_ranks(2, [&](Communicator& comm) {
    TrainResult result = train_stack(comm, parity_options(3, 1), 5, 8);
    if (comm.rank() == 0) plain = result;
  });
  run_ranks(2, [&](Communicator& comm) {
    EngineOptions options = parity_options(3, 1);
    options.fp16.enabled = true;
    options.fp16.loss_scale = 1024;
    TrainResult result = train_stack(comm, options, 5, 8);
    if (comm.rank() == 0) scaled = result;
  });
  for (std::size_t s = 0; s < plain.losses.size(); ++s)
    EXPECT_NEAR(scaled.losses[s], plain.losses[s], 1e-6);
}

}  // namespace
}  // namespace zero::testing
