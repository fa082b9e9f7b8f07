// EngineOptions: what the ZeRO engine is told to do, field for field with DeepSpeed's JSON keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "zero/config/ds_config.h"
#include "zero/core/dtype.h"
#include "zero/core/swap_store.h"

namespace zero {

// The ZeRO engine's settings. The "zero_optimization" section IS the config's struct (EngineOptions
// derives from config::ZeroOptimizationConfig: options.stage, options.reduce_bucket_size, ...),
// and "fp16", "bf16", "optimizer" and "scheduler" are the config's structs, so every DeepSpeed
// setting is declared once (zero/config/ds_config.h) and from_config assigns sections ("aio" alone
// is mapped, into the swap store's settings). Sizes are in elements, as in DeepSpeed; a bucket
// size of 0 means the smallest bucket (one alignment quantum).
struct EngineOptions : config::ZeroOptimizationConfig {
  // The library default overlaps communication at every stage (a resolved DeepSpeed config says
  // true for stage 3 and false otherwise unless set).
  EngineOptions() { overlap_comm = true; }

  // Top-level training keys.
  int gradient_accumulation_steps = 1;
  double gradient_clipping = 0.0;  // global norm; 0 disables
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  // "fp16": parameters and gradients in fp16, fp32 master weights and moments, the dynamic loss
  // scaler (deepspeed/runtime/fp16/loss_scaler.py): loss_scale 0 is dynamic (initial
  // 2^initial_scale_power, loss_scale_window, hysteresis, consecutive_hysteresis,
  // min_loss_scale), > 0 a static scale. "bf16": parameters and gradients in bf16, fp32 master
  // weights and moments, no loss scaling. Where each state lives: state_policy()
  // (zero/engine/memory_formula.h).
  config::Fp16Config fp16;
  config::Bf16Config bf16;
  // data_types.grad_accum_dtype: absent, fp16 accumulates in fp16 and bf16 in fp32 (DeepSpeed).
  std::optional<DType> grad_accum_dtype;
  // "optimizer" and "scheduler" as the DeepSpeed config holds them. Unlike a config without an
  // "optimizer" section (type kNone), the engine's default is AdamW (lr 1e-3, betas 0.9/0.999,
  // eps 1e-8, no weight decay); the default scheduler is none (the optimizer's lr throughout).
  config::OptimizerConfig optimizer{.type = config::OptimizerType::kAdamW};
  config::SchedulerConfig scheduler;
  // "aio": the NVMe swap store's I/O settings (offload_optimizer / offload_param device nvme), in
  // the store's own struct (zero/core/swap_store.h), mapped from the config's by from_config.
  AioSettings aio;
  // Not a DeepSpeed key: shards are padded to world_size × alignment_elements (64-byte shards in
  // fp32).
  std::size_t alignment_elements = 16;
};

// Throws zero::Error naming the field when an option is out of range.
void validate(const EngineOptions& options);

}  // namespace zero
