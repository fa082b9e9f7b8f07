// Hugging Face's learning-rate schedules (transformers/optimization.py), for `zero train` runs
// whose DeepSpeed config has no "scheduler" section (as the HF Trainer then creates its own).
#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <string_view>

#include "zero/core/error.h"
#include "zero/train/trainer.h"

namespace zero::train {
namespace {

// Hugging Face's λ(k) schedules (transformers/optimization.py).
class HfSchedule : public LrSchedule {
 public:
  enum class Kind { kLinear, kCosine, kConstant, kConstantWithWarmup };
  HfSchedule(Kind kind, std::string name, double base_lr, std::int64_t warmup, std::int64_t total)
      : kind_(kind), name_(std::move(name)), base_(base_lr), warmup_(warmup), total_(total) {}
  std::string_view name() const override { return name_; }
  void step() override { ++k_; }
  double lr() const override { return base_ * lambda(k_); }
  std::int64_t last_batch_iteration() const override { return k_ - 1; }
  void set_last_batch_iteration(std::int64_t iteration) override { k_ = iteration + 1; }

 private:
  double lambda(std::int64_t k) const {
    const double step = static_cast<double>(k);
    if (kind_ == Kind::kConstant) return 1.0;
    if (k < warmup_) return step / static_cast<double>(std::max<std::int64_t>(1, warmup_));
    if (kind_ == Kind::kConstantWithWarmup) return 1.0;
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_ - warmup_));
    if (kind_ == Kind::kLinear) return std::max(0.0, static_cast<double>(total_ - k) / span);
    const double progress = static_cast<double>(k - warmup_) / span;
    return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  Kind kind_;
  std::string name_;
  double base_;
  std::int64_t warmup_, total_;
  std::int64_t k_ = 0;
};

}  // namespace

std::unique_ptr<LrSchedule> make_hf_schedule(std::string_view type, double base_lr,
                                             std::int64_t warmup_steps, std::int64_t total_steps) {
  using Kind = HfSchedule::Kind;
  Kind kind;
  if (type == "linear" || type == "polynomial") {
    kind = Kind::kLinear;
  } else if (type == "cosine" || type == "cosine_with_restarts") {
    kind = Kind::kCosine;
  } else if (type == "constant") {
    kind = Kind::kConstant;
  } else if (type == "constant_with_warmup") {
    kind = Kind::kConstantWithWarmup;
  } else {
    throw Error("'" + std::string(type) +
                "' is not a supported scheduler type (linear, cosine, cosine_with_restarts, "
                "polynomial, constant, constant_with_warmup)");
  }
  return std::make_unique<HfSchedule>(kind, std::string(type), base_lr, warmup_steps, total_steps);
}

}  // namespace zero::train
