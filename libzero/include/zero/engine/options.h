// EngineOptions: what the ZeRO engine is told to do, field for field with DeepSpeed's JSON keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "zero/core/dtype.h"

namespace zero {

// "optimizer": {"type": ..., "params": {...}}. Fields a type does not use are ignored.
struct OptimizerOptions {
  std::string type = "AdamW";  // "Adam", "AdamW", "SGD", "Lamb" (case-insensitive)
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  // DeepSpeed's adam_w_mode: true applies decoupled weight decay (AdamW), false adds
  // weight_decay · p to the gradient (L2, torch.optim.Adam). Type "AdamW" forces true.
  bool adam_w_mode = true;
  bool bias_correction = true;
  double momentum = 0.0;    // SGD
  double dampening = 0.0;   // SGD
  bool nesterov = false;    // SGD
  double max_coeff = 10.0;  // Lamb: trust ratio clamp
  double min_coeff = 0.01;
};

// "scheduler": {"type": ..., "params": {...}} with DeepSpeed's parameter names and defaults.
struct SchedulerOptions {
  std::string type;  // "" (none), "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle",
                     // "LRRangeTest"
  // WarmupLR / WarmupDecayLR / WarmupCosineLR
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 1e-3;
  std::int64_t warmup_num_steps = 1000;
  std::string warmup_type = "log";   // "log" or "linear"
  std::int64_t total_num_steps = 0;  // WarmupDecayLR, WarmupCosineLR
  double warmup_min_ratio = 0.0;     // WarmupCosineLR
  double cos_min_ratio = 0.0001;     // WarmupCosineLR
  // OneCycle
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  std::int64_t cycle_first_step_size = 2000;
  std::int64_t cycle_second_step_size = -1;  // -1: same as the first
  std::int64_t cycle_first_stair_count = 0;
  std::int64_t cycle_second_stair_count = -1;
  std::int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  // LRRangeTest
  double lr_range_test_min_lr = 1e-3;
  std::int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

// "fp16": {...}: the dynamic loss scaler (deepspeed/runtime/fp16/loss_scaler.py).
struct LossScalerOptions {
  bool enabled = false;          // fp16.enabled
  double loss_scale = 0.0;       // 0: dynamic; otherwise a static scale
  int initial_scale_power = 16;  // initial dynamic scale 2^power
  int loss_scale_window = 1000;  // steps without overflow before the scale grows
  int hysteresis = 2;            // overflows tolerated before the scale shrinks
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool raise_error_at_min_scale = true;  // DeepSpeed errors when overflowing at the minimum
};

// The ZeRO engine's settings ("zero_optimization" and the top-level training keys). Sizes are
// in elements, as in DeepSpeed.
struct EngineOptions {
  int stage = 0;  // zero_optimization.stage: 0..3
  int gradient_accumulation_steps = 1;
  std::size_t reduce_bucket_size = 500'000'000;     // elements reduced per collective
  std::size_t allgather_bucket_size = 500'000'000;  // elements gathered per collective (1, 2)
  bool overlap_comm = true;          // collectives run on the comm stream while compute goes on
  bool contiguous_gradients = true;  // gradients are copied into a contiguous bucket
  bool reduce_scatter = true;        // false: all-reduce then keep the own shard (stages 1, 2)
  std::size_t prefetch_bucket_size = 50'000'000;      // stage3_prefetch_bucket_size
  std::size_t max_live_parameters = 1'000'000'000;    // stage3_max_live_parameters
  std::size_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold
  double gradient_clipping = 0.0;                     // global norm; 0 disables
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  DType compute_dtype = DType::kFloat32;  // fp32 only on the CPU engine for now
  LossScalerOptions fp16;
  OptimizerOptions optimizer;
  SchedulerOptions scheduler;
  // Not DeepSpeed keys. Shards are padded to world_size × alignment_elements (64-byte shards).
  std::size_t alignment_elements = 16;
};

// Throws zero::Error naming the field when an option is out of range.
void validate(const EngineOptions& options);

}  // namespace zero
