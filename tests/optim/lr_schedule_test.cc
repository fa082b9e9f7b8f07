// LR schedules at chosen points worked by hand from DeepSpeed 0.19's lr_schedules.py, and its
// stepping contract. Every step of every schedule is checked against DeepSpeed's own code in
// lr_schedule_golden_test.cc (label golden).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "zero/config/ds_config.h"
#include "zero/core/error.h"
#include "zero/optim/lr_schedules.h"

namespace zero::optim {
namespace {

config::SchedulerConfig warmup(std::string_view type, std::string_view kind) {
  config::SchedulerConfig options;
  options.type = config::scheduler_type_from_name(type);
  options.warmup_min_lr = 1e-4;
  options.warmup_max_lr = 1e-2;
  options.warmup_num_steps = 10;
  options.warmup_type = config::warmup_type_from_name(kind);
  options.total_num_steps = 30;
  return options;
}

TEST(Schedules, WarmupLrLogAndLinear) {
  const config::SchedulerConfig log = warmup("WarmupLR", "log");
  EXPECT_DOUBLE_EQ(schedule_lr(log, 0, 0), 1e-4);
  EXPECT_DOUBLE_EQ(schedule_lr(log, 0, 4), 1e-4 + (1e-2 - 1e-4) * std::log(5.0) / std::log(10.0));
  EXPECT_DOUBLE_EQ(schedule_lr(log, 0, 10), 1e-2);
  EXPECT_DOUBLE_EQ(schedule_lr(log, 0, 500), 1e-2);
  const config::SchedulerConfig linear = warmup("WarmupLR", "linear");
  EXPECT_DOUBLE_EQ(schedule_lr(linear, 0, 5), 1e-4 + (1e-2 - 1e-4) * 0.5);
}

// DeepSpeed's WarmupLR(warmup_max_lr=None) warms up to the optimizer's lr; WarmupDecayLR's
// default is 0.001.
TEST(Schedules, WarmupLrWithoutMaxWarmsUpToTheOptimizerLr) {
  auto resolve = [](std::string_view scheduler) {
    const std::string json = R"({"train_batch_size": 1, "optimizer": {"type": "AdamW",
        "params": {"lr": 4e-3}}, "scheduler": )" +
                             std::string(scheduler) + "}";
    return config::resolve_config(json, {}, "test").config.scheduler;
  };
  EXPECT_DOUBLE_EQ(
      resolve(R"({"type": "WarmupLR", "params": {"warmup_num_steps": 8}})").warmup_max_lr, 4e-3);
  EXPECT_DOUBLE_EQ(
      resolve(R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 20}})").warmup_max_lr,
      1e-3);
}

TEST(Schedules, WarmupDecayLrDecaysLinearlyToZeroAtTotal) {
  const config::SchedulerConfig options = warmup("WarmupDecayLR", "linear");
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 10), 1e-4 + (1e-2 - 1e-4) * 20.0 / 20.0);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 20), 1e-4 + (1e-2 - 1e-4) * 10.0 / 20.0);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 30), 1e-4);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 40), 1e-4);
}

TEST(Schedules, WarmupCosineLrScalesTheOptimizerLr) {
  config::SchedulerConfig options = warmup("WarmupCosineLR", "linear");
  options.warmup_min_ratio = 0.1;
  options.cos_min_ratio = 0.01;
  EXPECT_DOUBLE_EQ(schedule_lr(options, 3e-3, 0), 3e-3 * 0.1);
  const double cosine = (1 + std::cos(std::numbers::pi * 1.0 / 20.0)) / 2;
  EXPECT_DOUBLE_EQ(schedule_lr(options, 3e-3, 10), 3e-3 * (0.01 + 0.99 * cosine));
  EXPECT_NEAR(schedule_lr(options, 3e-3, 29), 3e-3 * 0.01, 1e-12);
  // Past total_num_steps the cosine stays at its floor (progress is capped at 1).
  for (std::int64_t i : {30, 45, 49, 200}) EXPECT_NEAR(schedule_lr(options, 3e-3, i), 3e-5, 1e-15);
}

TEST(Schedules, OneCycleGoesUpDownThenDecays) {
  config::SchedulerConfig options;
  options.type = config::SchedulerType::kOneCycle;
  options.cycle_min_lr = 1e-3;
  options.cycle_max_lr = 1e-2;
  options.cycle_first_step_size = 5;
  options.cycle_second_step_size = 5;
  options.decay_step_size = 2;
  options.decay_lr_rate = 0.5;
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 4), 1e-2);  // (i + 1) / 5 = 1: the peak
  EXPECT_NEAR(schedule_lr(options, 0, 8), 1e-3 + 9e-3 * 0.2, 1e-15);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 11), 1e-3 / (1 + 0.5 * 1.0));
  EXPECT_DOUBLE_EQ(one_cycle_beta1(options, 4), options.cycle_min_mom);
  config::SchedulerConfig same = options;
  same.cycle_second_step_size = -1;  // the default: the same as the first
  for (std::int64_t i : {3, 7, 9, 10, 12})
    EXPECT_DOUBLE_EQ(schedule_lr(same, 0, i), schedule_lr(options, 0, i)) << i;
}

TEST(Schedules, LrRangeTest) {
  config::SchedulerConfig options;
  options.type = config::SchedulerType::kLRRangeTest;
  options.lr_range_test_min_lr = 1e-3;
  options.lr_range_test_step_size = 4;
  options.lr_range_test_step_rate = 0.5;
  // interval = (last_batch_iteration + 1) / step_size
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 6), 1e-3 * (1 + 0.5 * 7.0 / 4.0));
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, -1), 1e-3);
  options.lr_range_test_staircase = true;
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 6), 1e-3 * 1.5);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 2), 1e-3);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 3), 1e-3 * 1.5);
}

TEST(Schedules, OneCycleStairs) {
  config::SchedulerConfig options;
  options.type = config::SchedulerType::kOneCycle;
  options.cycle_min_lr = 1e-3;
  options.cycle_max_lr = 1e-2;
  options.cycle_first_step_size = 8;
  options.cycle_second_step_size = 6;
  options.cycle_first_stair_count = 4;
  options.cycle_second_stair_count = 3;
  // Rising: position (i + 1) of 8 floored to quarters; falling: (14 - position) of 6 to thirds.
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 0), 1e-3);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 2), 1e-3 + 9e-3 * 0.25);
  EXPECT_DOUBLE_EQ(schedule_lr(options, 0, 7), 1e-2);
  EXPECT_NEAR(schedule_lr(options, 0, 9), 1e-3 + 9e-3 * 2.0 / 3.0, 1e-15);
}

TEST(Schedules, SteppingFollowsDeepSpeed) {
  // The warmup family's constructor sets warmup_min_lr (get_lr() at -1), and step 0 is at
  // warmup_min_lr too: DeepSpeed's first two optimizer steps run at warmup_min_lr.
  auto schedule = make_lr_schedule(warmup("WarmupDecayLR", "log"), 5e-3);
  EXPECT_EQ(schedule->last_batch_iteration(), -1);
  EXPECT_DOUBLE_EQ(schedule->lr(), 1e-4);
  schedule->step();
  EXPECT_EQ(schedule->last_batch_iteration(), 0);
  EXPECT_DOUBLE_EQ(schedule->lr(), 1e-4);
  // WarmupCosineLR's constructor sets lr 0 (its get_lr() at -1).
  EXPECT_DOUBLE_EQ(make_lr_schedule(warmup("WarmupCosineLR", "log"), 5e-3)->lr(), 0.0);
  config::SchedulerConfig cycle;
  cycle.type = config::SchedulerType::kOneCycle;
  cycle.cycle_min_lr = 2e-3;
  cycle.cycle_max_lr = 1e-2;
  EXPECT_DOUBLE_EQ(make_lr_schedule(cycle, 5e-3)->lr(), 2e-3);
  EXPECT_EQ(make_lr_schedule(config::SchedulerConfig{}, 1e-3), nullptr);
  EXPECT_EQ(config::scheduler_type_from_name(""), config::SchedulerType::kNone);
  EXPECT_EQ(config::scheduler_type_from_name("OneCycle"), config::SchedulerType::kOneCycle);
  EXPECT_THROW(config::scheduler_type_from_name("Cosine"), Error);
  EXPECT_THROW(config::warmup_type_from_name("cosine"), Error);
  EXPECT_THROW(schedule_lr(config::SchedulerConfig{}, 1e-3, 0), Error);
}

}  // namespace
}  // namespace zero::optim
