// Adam/AdamW, SGD and Lamb over the engine's shard chunks on the host (their step_on is
// device_step.cc's), and the optimizer factory.
#include "zero/optim/optimizers.h"

#include <cstdint>
#include <string>

#include "zero/core/error.h"

namespace zero::optim {

Adam::Adam(const config::OptimizerConfig& options)
    : options_(options),
      adam_w_mode_(options.type == config::OptimizerType::kAdamW || options.adam_w_mode) {}

AdamHyperparams Adam::hyperparams(const OptimizerStep& step) const {
  AdamHyperparams hyper;
  hyper.lr = step.lr;
  hyper.beta1 = step.beta1;
  hyper.beta2 = options_.betas[1];
  hyper.eps = options_.eps;
  hyper.weight_decay = options_.weight_decay;
  hyper.adam_w_mode = adam_w_mode_;
  hyper.bias_correction = options_.bias_correction;
  hyper.step = step.step;
  hyper.grad_scale = step.grad_scale;
  return hyper;
}

void Adam::step(std::span<ShardChunk> chunks, const OptimizerStep& step) {
  AdamHyperparams hyper = hyperparams(step);
  hyper.threads = cpu_optimizer_threads();
  for (ShardChunk& chunk : chunks) {
    if (chunk.params_16bit != nullptr)
      adam_step(chunk.params, chunk.grads, chunk.state, chunk.state_slice(1), chunk.num_elements,
                hyper, chunk.params_16bit, chunk.params_16bit_dtype);
    else
      adam_step(chunk.params, chunk.grads, chunk.state, chunk.state_slice(1), chunk.num_elements,
                hyper);
  }
}

Sgd::Sgd(const config::OptimizerConfig& options) : options_(options) {
  ZERO_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
             "SGD: nesterov needs momentum > 0 and dampening = 0");
}

std::vector<std::string> Sgd::state_names() const {
  if (options_.momentum == 0.0) return {};
  return {"momentum_buffer"};
}

SgdHyperparams Sgd::hyperparams(const OptimizerStep& step) const {
  SgdHyperparams hyper;
  hyper.lr = step.lr;
  hyper.momentum = options_.momentum;
  hyper.dampening = options_.dampening;
  hyper.weight_decay = options_.weight_decay;
  hyper.nesterov = options_.nesterov;
  hyper.first_step = step.step == 1;
  hyper.grad_scale = step.grad_scale;
  return hyper;
}

void Sgd::step(std::span<ShardChunk> chunks, const OptimizerStep& step) {
  SgdHyperparams hyper = hyperparams(step);
  hyper.threads = cpu_optimizer_threads();
  for (ShardChunk& chunk : chunks) {
    if (chunk.params_16bit != nullptr)
      sgd_step(chunk.params, chunk.grads, chunk.state, chunk.num_elements, hyper,
               chunk.params_16bit, chunk.params_16bit_dtype);
    else
      sgd_step(chunk.params, chunk.grads, chunk.state, chunk.num_elements, hyper);
  }
}

Lamb::Lamb(const config::OptimizerConfig& options) : options_(options) {}

LambHyperparams Lamb::hyperparams(const OptimizerStep& step) const {
  LambHyperparams hyper;
  hyper.lr = step.lr;
  hyper.beta1 = step.beta1;
  hyper.beta2 = options_.betas[1];
  hyper.eps = options_.eps;
  hyper.weight_decay = options_.weight_decay;
  hyper.bias_correction = options_.bias_correction;
  hyper.step = step.step;
  hyper.grad_scale = step.grad_scale;
  hyper.max_coeff = options_.max_coeff;
  hyper.min_coeff = options_.min_coeff;
  return hyper;
}

void Lamb::step(std::span<ShardChunk> chunks, const OptimizerStep& step) {
  LambHyperparams hyper = hyperparams(step);
  hyper.threads = cpu_optimizer_threads();
  // Per-tensor Σp² and Σu² over this rank's pieces, then over all ranks: [p0, u0, p1, u1, ...].
  std::vector<float> sums(2 * static_cast<std::size_t>(step.num_tensors), 0.0f);
  for (ShardChunk& chunk : chunks) {
    for (const TensorSegment& segment : chunk.segments) {
      const std::size_t at = segment.offset_elements;
      const SumsOfSquares piece =
          lamb_moments(chunk.params + at, chunk.grads + at, chunk.state + at,
                       chunk.state_slice(1) + at, segment.num_elements, hyper);
      sums[2 * segment.tensor] += static_cast<float>(piece.params);
      sums[2 * segment.tensor + 1] += static_cast<float>(piece.update);
    }
  }
  if (step.all_reduce_sum) step.all_reduce_sum(sums.data(), sums.size());
  for (ShardChunk& chunk : chunks) {
    for (const TensorSegment& segment : chunk.segments) {
      const std::size_t at = segment.offset_elements;
      const double ratio =
          lamb_trust_ratio(sums[2 * segment.tensor], sums[2 * segment.tensor + 1], hyper);
      if (chunk.params_16bit != nullptr)
        lamb_apply(chunk.params + at, chunk.state + at, chunk.state_slice(1) + at,
                   segment.num_elements, hyper, ratio,
                   static_cast<std::uint16_t*>(chunk.params_16bit) + at, chunk.params_16bit_dtype);
      else
        lamb_apply(chunk.params + at, chunk.state + at, chunk.state_slice(1) + at,
                   segment.num_elements, hyper, ratio);
    }
    // Elements outside the segments (padding) are not updated; their 16-bit copy is still the
    // chunk's (the contract covers all num_elements, as Adam's and SGD's passes and the CUDA
    // kernels write them).
    if (chunk.params_16bit == nullptr) continue;
    std::size_t next = 0;
    auto copy_gap = [&](std::size_t end) {
      if (end > next)
        convert(chunk.params + next, DType::kFloat32,
                static_cast<std::uint16_t*>(chunk.params_16bit) + next, chunk.params_16bit_dtype,
                end - next);
    };
    for (const TensorSegment& segment : chunk.segments) {
      copy_gap(segment.offset_elements);
      next = segment.offset_elements + segment.num_elements;
    }
    copy_gap(chunk.num_elements);
  }
}

std::unique_ptr<Optimizer> make_optimizer(const config::OptimizerConfig& options) {
  switch (options.type) {
    case config::OptimizerType::kAdam:
    case config::OptimizerType::kAdamW: return std::make_unique<Adam>(options);
    case config::OptimizerType::kSgd: return std::make_unique<Sgd>(options);
    case config::OptimizerType::kLamb: return std::make_unique<Lamb>(options);
    case config::OptimizerType::kNone: break;
  }
  ZERO_THROW("optimizer.type is none (no \"optimizer\" section); known: Adam, AdamW, SGD, Lamb");
}

}  // namespace zero::optim
