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

// OneCycle's position in the cycle: 0 at the minimum, 1 at the peak.
double one_cycle_scale(const config::SchedulerConfig& o, std::int64_t i) {
  const auto first = static_cast<double>(o.cycle_first_step_size);
  const double total = first + one_cycle_second(o);
  const double ratio = first / total;
  const double batch = static_cast<double>(i + 1);
  const double cycle = std::floor(1.0 + batch / total);
  const double x = 1.0 + batch / total - cycle;
  return x <= ratio ? x / ratio : (x - 1.0) / (ratio - 1.0);
}

double one_cycle_total(const config::SchedulerConfig& o) {
  return static_cast<double>(o.cycle_first_step_size) + one_cycle_second(o);
}

}  // namespace

double schedule_lr(const config::SchedulerConfig& o, double base_lr, std::int64_t i) {
  ZERO_CHECK(i >= 0, "schedule_lr: last_batch_iteration must be >= 0, got ", i);
  const std::int64_t warmup = std::max<std::int64_t>(2, o.warmup_num_steps);
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
        const auto real_last = static_cast<double>(i - warmup + 1);
        const auto real_total = static_cast<double>(o.total_num_steps - warmup);
        const double cosine = (1.0 + std::cos(std::numbers::pi * real_last / real_total)) / 2.0;
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
      double interval = static_cast<double>(i) / static_cast<double>(o.lr_range_test_step_size);
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
  double lr() const override {
    if (last_ >= 0) return schedule_lr(options_, base_lr_, last_);
    if (options_.type == SchedulerType::kOneCycle) return options_.cycle_min_lr;
    if (options_.type == SchedulerType::kLRRangeTest) return options_.lr_range_test_min_lr;
    return base_lr_;
  }
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
