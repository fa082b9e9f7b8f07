// DeepSpeed's LR schedules as pure functions of last_batch_iteration, and the stateful wrapper.
#include "zero/optim/lr_schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "zero/core/error.h"

namespace zero::optim {
namespace {

using config::SchedulerType;

double warmup_gamma(const config::SchedulerConfig& o, std::int64_t i) {
  const auto warmup = static_cast<double>(std::max<std::int64_t>(2, o.warmup_num_steps));
  if (o.warmup_type == config::WarmupType::kLinear) return static_cast<double>(i) / warmup;
  return std::log(static_cast<double>(i) + 1.0) / std::log(warmup);
}

// OneCycle's second step size: negative means the same as the first.
double one_cycle_second(const config::SchedulerConfig& o) {
  return static_cast<double>(o.cycle_second_step_size < 0 ? o.cycle_first_step_size
                                                          : o.cycle_second_step_size);
}

// OneCycle's position in the cycle: 0 at the minimum, 1 at the peak (DeepSpeed's
// _get_scale_factor, stair counts included: with a stair count the position is floored to
// count steps per half cycle).
double one_cycle_scale(const config::SchedulerConfig& o, std::int64_t i) {
  const auto first = static_cast<double>(o.cycle_first_step_size);
  const double second = one_cycle_second(o);
  const double total = first + second;
  const double ratio = first / total;
  const double batch = static_cast<double>(i + 1);
  const double cycle = std::floor(1.0 + batch / total);
  const double x = 1.0 + batch / total - cycle;
  const std::int64_t second_stairs =
      o.cycle_second_stair_count < 0 ? o.cycle_first_stair_count : o.cycle_second_stair_count;
  const bool rising = x <= ratio;
  const double scale = rising ? x / ratio : (x - 1.0) / (ratio - 1.0);
  const std::int64_t stairs = rising ? o.cycle_first_stair_count : second_stairs;
  if (stairs <= 0) return scale;
  const double position = std::fmod(batch, total);
  const double stair = position <= first
                           ? position * static_cast<double>(stairs) / first
                           : (total - position) * static_cast<double>(stairs) / second;
  return std::floor(stair) / static_cast<double>(stairs);
}

double one_cycle_total(const config::SchedulerConfig& o) {
  return static_cast<double>(o.cycle_first_step_size) + one_cycle_second(o);
}

}  // namespace

double schedule_lr(const config::SchedulerConfig& o, double base_lr, std::int64_t i) {
  ZERO_CHECK(i >= -1, "schedule_lr: last_batch_iteration must be >= -1, got ", i);
  const std::int64_t warmup = std::max<std::int64_t>(2, o.warmup_num_steps);
  // Before the first step (i = -1) the lr is the one DeepSpeed's constructor gives the optimizer:
  // get_lr() at -1, which the warmup family answers with warmup_min_lr and WarmupCosineLR with 0;
  // OneCycle and LRRangeTest's formulas give cycle_min_lr and lr_range_test_min_lr there.
  if (i < 0 && (o.type == SchedulerType::kWarmupLR || o.type == SchedulerType::kWarmupDecayLR))
    return o.warmup_min_lr;
  if (i < 0 && o.type == SchedulerType::kWarmupCosineLR) return 0.0;
  switch (o.type) {
    case SchedulerType::kWarmupLR: {
      const double gamma = i < warmup ? warmup_gamma(o, i) : 1.0;
      return o.warmup_min_lr + (o.warmup_max_lr - o.warmup_min_lr) * gamma;
    }
    case SchedulerType::kWarmupDecayLR: {
      const double gamma =
          i < warmup
              ? warmup_gamma(o, i)
              : std::max(0.0, static_cast<double>(o.total_num_steps - i) /
                                  std::max(1.0, static_cast<double>(o.total_num_steps - warmup)));
      return o.warmup_min_lr + (o.warmup_max_lr - o.warmup_min_lr) * gamma;
    }
    case SchedulerType::kWarmupCosineLR: {
      double ratio;
      if (i < warmup) {
        ratio = o.warmup_min_ratio + (1.0 - o.warmup_min_ratio) * warmup_gamma(o, i);
      } else {
        // Past total_num_steps the progress stays at 1: the lr stays at cos_min_ratio.
        const auto real_last = static_cast<double>(i - warmup + 1);
        const auto real_total =
            static_cast<double>(std::max<std::int64_t>(1, o.total_num_steps - warmup));
        const double progress = std::min(1.0, real_last / real_total);
        const double cosine = (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
        ratio = std::max(0.0, o.cos_min_ratio + (1.0 - o.cos_min_ratio) * cosine);
      }
      return base_lr * ratio;
    }
    case SchedulerType::kOneCycle: {
      const double total = one_cycle_total(o);
      if (static_cast<double>(i) < total)
        return o.cycle_min_lr + (o.cycle_max_lr - o.cycle_min_lr) * one_cycle_scale(o, i);
      if (o.decay_step_size == 0 || o.decay_lr_rate == 0.0) return o.cycle_min_lr;
      const double interval =
          (static_cast<double>(i) - total + 1.0) / static_cast<double>(o.decay_step_size);
      return o.cycle_min_lr / (1.0 + o.decay_lr_rate * interval);
    }
    case SchedulerType::kLRRangeTest: {
      ZERO_CHECK(o.lr_range_test_step_size > 0,
                 "scheduler.params.lr_range_test_step_size must be > 0");
      // DeepSpeed's interval counts the step being taken: (last_batch_iteration + 1) / step_size.
      double interval = static_cast<double>(i + 1) / static_cast<double>(o.lr_range_test_step_size);
      if (o.lr_range_test_staircase) interval = std::floor(interval);
      return o.lr_range_test_min_lr * (1.0 + o.lr_range_test_step_rate * interval);
    }
    case SchedulerType::kNone: break;
  }
  ZERO_THROW("schedule_lr: scheduler.type is none (no schedule); known: WarmupLR, WarmupDecayLR, ",
             "WarmupCosineLR, OneCycle, LRRangeTest");
}

double one_cycle_beta1(const config::SchedulerConfig& o, std::int64_t i) {
  if (static_cast<double>(i) < one_cycle_total(o))
    return o.cycle_max_mom - (o.cycle_max_mom - o.cycle_min_mom) * one_cycle_scale(o, i);
  if (o.decay_step_size == 0 || o.decay_mom_rate == 0.0) return o.cycle_max_mom;
  const double interval =
      (static_cast<double>(i) - one_cycle_total(o) + 1.0) / static_cast<double>(o.decay_step_size);
  return o.cycle_max_mom * (1.0 + o.decay_mom_rate * interval);
}

namespace {

class Schedule final : public LrSchedule {
 public:
  Schedule(const config::SchedulerConfig& options, double base_lr)
      : options_(options), base_lr_(base_lr) {
    (void)schedule_lr(options_, base_lr_, 0);  // validates the parameters
  }
  std::string_view name() const override { return config::name_of(options_.type); }
  void step() override { ++last_; }
  double lr() const override { return schedule_lr(options_, base_lr_, last_); }
  double beta1(double base) const override {
    if (options_.type != SchedulerType::kOneCycle || !options_.cycle_momentum) return base;
    return last_ >= 0 ? one_cycle_beta1(options_, last_) : options_.cycle_min_mom;
  }
  std::int64_t last_batch_iteration() const override { return last_; }
  void set_last_batch_iteration(std::int64_t iteration) override { last_ = iteration; }

 private:
  config::SchedulerConfig options_;
  double base_lr_;
  std::int64_t last_ = -1;
};

}  // namespace

std::unique_ptr<LrSchedule> make_lr_schedule(const config::SchedulerConfig& options,
                                             double base_lr) {
  if (options.type == SchedulerType::kNone) return nullptr;
  return std::make_unique<Schedule>(options, base_lr);
}

}  // namespace zero::optim
