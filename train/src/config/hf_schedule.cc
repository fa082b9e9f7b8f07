// Hugging Face's learning-rate schedules (transformers/optimization.py), for `zero train` runs
// whose DeepSpeed config has no "scheduler" section (as the HF Trainer then creates its own).
#include "zero/train/hf_schedule.h"

#include <cmath>
#include <memory>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zero/core/error.h"
#include "zero/core/suggest.h"

namespace zero::train {
namespace {

// Hugging Face's λ(k) schedules (transformers/optimization.py, get_scheduler's defaults:
// cosine_with_restarts has one cycle, polynomial decays to lr_end = 1e-7 with power 1,
// inverse_sqrt's timescale is the warmup, or 10,000 without one).
class HfSchedule : public LrSchedule {
 public:
  enum class Kind {
    kLinear,
    kCosine,
    kCosineWithRestarts,
    kPolynomial,
    kConstant,
    kConstantWithWarmup,
    kInverseSqrt
  };
  HfSchedule(Kind kind, std::string name, double base_lr, std::int64_t warmup, std::int64_t total)
      : kind_(kind), name_(std::move(name)), base_(base_lr), warmup_(warmup), total_(total) {}
  std::string_view name() const override { return name_; }
  void step() override { ++k_; }
  double lr() const override { return base_ * lambda(k_); }
  std::int64_t last_batch_iteration() const override { return k_ - 1; }
  void set_last_batch_iteration(std::int64_t iteration) override { k_ = iteration + 1; }

  static constexpr double kPolynomialLrEnd = 1e-7;

 private:
  double lambda(std::int64_t k) const {
    const double step = static_cast<double>(k);
    if (kind_ == Kind::kConstant) return 1.0;
    if (k < warmup_) return step / static_cast<double>(std::max<std::int64_t>(1, warmup_));
    const double span = static_cast<double>(std::max<std::int64_t>(1, total_ - warmup_));
    const double progress = static_cast<double>(k - warmup_) / span;
    switch (kind_) {
      case Kind::kConstantWithWarmup: return 1.0;
      case Kind::kLinear: return std::max(0.0, static_cast<double>(total_ - k) / span);
      case Kind::kCosine:
        return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * 0.5 * 2.0 * progress)));
      case Kind::kCosineWithRestarts:
        if (progress >= 1.0) return 0.0;
        return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * std::fmod(progress, 1.0))));
      case Kind::kPolynomial: {
        // transformers divides by zero when warmup == total; here the decay is then over.
        if (k > total_ || total_ <= warmup_) return kPolynomialLrEnd / base_;
        const double decay_steps = static_cast<double>(total_ - warmup_);
        const double remaining = 1.0 - static_cast<double>(k - warmup_) / decay_steps;
        return ((base_ - kPolynomialLrEnd) * remaining + kPolynomialLrEnd) / base_;
      }
      case Kind::kInverseSqrt: {
        const double timescale = warmup_ > 0 ? static_cast<double>(warmup_) : 10'000.0;
        const double shift = timescale - static_cast<double>(warmup_);
        return 1.0 / std::sqrt((step + shift) / timescale);
      }
      case Kind::kConstant: break;
    }
    return 1.0;
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
  static constexpr std::pair<std::string_view, Kind> kKinds[] = {
      {"linear", Kind::kLinear},
      {"cosine", Kind::kCosine},
      {"cosine_with_restarts", Kind::kCosineWithRestarts},
      {"polynomial", Kind::kPolynomial},
      {"constant", Kind::kConstant},
      {"constant_with_warmup", Kind::kConstantWithWarmup},
      {"inverse_sqrt", Kind::kInverseSqrt}};
  for (const auto& [name, kind] : kKinds) {
    if (type != name) continue;
    if (kind == Kind::kPolynomial && !(base_lr > HfSchedule::kPolynomialLrEnd))
      throw Error(
          "--lr_scheduler_type polynomial: lr_end (1e-07) must be smaller than the "
          "initial lr (" +
          std::to_string(base_lr) + ")");
    return std::make_unique<HfSchedule>(kind, std::string(type), base_lr, warmup_steps,
                                        total_steps);
  }
  std::vector<std::string_view> names;
  std::string list;
  for (const auto& entry : kKinds) {
    names.push_back(entry.first);
    list += (list.empty() ? "" : ", ") + std::string(entry.first);
  }
  const std::optional<std::string> nearest = nearest_name(type, names);
  throw Error("'" + std::string(type) + "' is not a supported scheduler type (" + list + ")" +
              (nearest ? "; did you mean '" + *nearest + "'?" : ""));
}

}  // namespace zero::train
