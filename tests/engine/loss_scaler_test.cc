// The dynamic loss scaler step by step as DeepSpeed 0.19's DynamicLossScaler (DeepSpeed's own
// class runs in loss_scaler_golden_test; the engine skipping steps on fp16 overflow is in
// gpt2_mixed_precision_test).
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
  // DeepSpeed 0.19: a good step at iteration i doubles when stable_interval = i - last - 1 is a
  // positive multiple of the window; last_overflow starts at -1.
  scaler.update(false);  // iter 0: stable 0
  scaler.update(false);  // iter 1: 1
  scaler.update(false);  // iter 2: 2
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.update(false);  // iter 3: 3 % 3 == 0 → 32
  EXPECT_EQ(scaler.scale(), 32.0);
  scaler.update(true);  // iter 4: hysteresis 2 → 1, scale kept
  EXPECT_EQ(scaler.scale(), 32.0);
  scaler.update(true);  // iter 5: hysteresis exhausted → 16
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.update(false);  // iter 6, last overflow 5: stable 0
  scaler.update(false);  // 1
  scaler.update(false);  // 2
  EXPECT_EQ(scaler.scale(), 16.0);
  scaler.update(false);  // 3 → 32, hysteresis restored
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

}  // namespace
}  // namespace zero::testing
