// DeepSpeed's batch rule: train_batch_size = micro_batch × accumulation × world_size.
#include <optional>
#include <string>

#include "auto_fill.h"

namespace zero::config::detail {

namespace {

// The value at `key` when present and valid; `invalid` is set when present but unusable (the
// reader has reported why).
std::optional<std::int64_t> read_batch_value(ObjectReader& top, std::string_view key,
                                             bool& invalid) {
  // DeepSpeed reads these with dict.get: an explicit null is the same as an absent key.
  const Json* given = top.find(key);
  if (given == nullptr || given->is_null()) return std::nullopt;
  std::int64_t value = 0;
  if (!top.read(key, value, 1)) {
    invalid = true;
    return std::nullopt;
  }
  return value;
}

std::string text(std::int64_t value) { return std::to_string(value); }

}  // namespace

void resolve_batch(ObjectReader& top, Diagnostics& diagnostics, DeepSpeedConfig& config) {
  bool invalid = false;
  const auto train = read_batch_value(top, "train_batch_size", invalid);
  const auto micro = read_batch_value(top, "train_micro_batch_size_per_gpu", invalid);
  const auto accumulation = read_batch_value(top, "gradient_accumulation_steps", invalid);
  if (invalid) return;
  const std::int64_t world = config.world_size;
  std::int64_t t = train.value_or(0), m = micro.value_or(0), g = accumulation.value_or(0);
  std::string derivation;  // how DeepSpeed derived the missing member, for the messages
  if (train && micro && accumulation) {
  } else if (train && micro) {
    g = t / m / world;
    derivation = "gradient_accumulation_steps = train_batch_size " + text(t) +
                 " // train_micro_batch_size_per_gpu " + text(m) + " // world_size " + text(world) +
                 " = " + text(g);
  } else if (train && accumulation) {
    m = t / world / g;
    derivation = "train_micro_batch_size_per_gpu = train_batch_size " + text(t) +
                 " // world_size " + text(world) + " // gradient_accumulation_steps " + text(g) +
                 " = " + text(m);
  } else if (micro && accumulation) {
    if (__builtin_mul_overflow(m, g, &t) || __builtin_mul_overflow(t, world, &t)) {
      diagnostics.errors.push_back("train_batch_size: train_micro_batch_size_per_gpu " + text(m) +
                                   " × gradient_accumulation_steps " + text(g) + " × world_size " +
                                   text(world) + " overflows a 64-bit integer");
      return;
    }
  } else if (train) {
    g = 1;
    m = t / world;
    derivation = "train_micro_batch_size_per_gpu = train_batch_size " + text(t) +
                 " // world_size " + text(world) + " = " + text(m) +
                 ", with gradient_accumulation_steps 1";
  } else if (micro) {
    g = 1;
    if (__builtin_mul_overflow(m, world, &t)) {
      diagnostics.errors.push_back("train_batch_size: train_micro_batch_size_per_gpu " + text(m) +
                                   " × world_size " + text(world) + " overflows a 64-bit integer");
      return;
    }
  } else {
    diagnostics.errors.push_back(
        "train_batch_size: no batch size given; DeepSpeed needs train_batch_size or "
        "train_micro_batch_size_per_gpu (or set train_micro_batch_size_per_gpu to \"auto\" and "
        "pass --per_device_train_batch_size)");
    return;
  }
  const std::string because = derivation.empty() ? "" : " (DeepSpeed derives " + derivation + ")";
  if (m < 1) {
    diagnostics.errors.push_back("train_micro_batch_size_per_gpu: must be at least 1, got " +
                                 text(m) + because);
    return;
  }
  if (g < 1) {
    diagnostics.errors.push_back("gradient_accumulation_steps: must be at least 1, got " + text(g) +
                                 because);
    return;
  }
  std::int64_t product = 0;
  if (__builtin_mul_overflow(m, g, &product) || __builtin_mul_overflow(product, world, &product) ||
      product != t) {
    diagnostics.errors.push_back(
        "train_batch_size: " + text(t) + " is not train_micro_batch_size_per_gpu " + text(m) +
        " × gradient_accumulation_steps " + text(g) + " × world_size " + text(world) +
        (product == t ? std::string() : " = " + text(product)) + because +
        "; choose values whose product is train_batch_size, or give only two of the three");
    return;
  }
  config.train_batch_size = t;
  config.train_micro_batch_size_per_gpu = m;
  config.gradient_accumulation_steps = g;
}

}  // namespace zero::config::detail
