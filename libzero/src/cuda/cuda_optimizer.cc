// The CUDA backend's optimizer step: the coefficients exactly as optim/src/kernels.cc computes
// them (double arithmetic, rounded to float once), the fused kernels of optimizer_kernels.cu, and
// Lamb's per-tensor norms between its two passes.
#include "cuda_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "optimizer_kernels.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/error.h"

namespace zero::cuda {
namespace {

AdamCoefficients adam_coefficients(const OptimizerRule& rule, const OptimizerStep& step) {
  const auto t = static_cast<double>(step.step);
  const double bc1 = rule.bias_correction ? 1.0 - std::pow(step.beta1, t) : 1.0;
  const double bc2 = rule.bias_correction ? 1.0 - std::pow(rule.beta2, t) : 1.0;
  return {static_cast<float>(step.beta1),
          static_cast<float>(1.0 - step.beta1),
          static_cast<float>(rule.beta2),
          static_cast<float>(1.0 - rule.beta2),
          static_cast<float>(rule.eps),
          static_cast<float>(step.lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          static_cast<float>(rule.adam_w_mode ? 1.0 - step.lr * rule.weight_decay : 1.0),
          static_cast<float>(rule.adam_w_mode ? 0.0 : rule.weight_decay),
          static_cast<float>(step.grad_scale)};
}

SgdCoefficients sgd_coefficients(const OptimizerRule& rule, const OptimizerStep& step) {
  return {static_cast<float>(step.lr),
          static_cast<float>(rule.momentum),
          static_cast<float>(1.0 - rule.dampening),
          static_cast<float>(rule.weight_decay),
          static_cast<float>(step.grad_scale),
          rule.momentum != 0.0,
          step.step == 1,
          rule.nesterov};
}

LambCoefficients lamb_coefficients(const OptimizerRule& rule, const OptimizerStep& step) {
  return {static_cast<float>(step.beta1),     static_cast<float>(1.0 - step.beta1),
          static_cast<float>(rule.beta2),     static_cast<float>(1.0 - rule.beta2),
          static_cast<float>(rule.eps),       static_cast<float>(rule.weight_decay),
          static_cast<float>(step.grad_scale)};
}

double lamb_step_size(const OptimizerRule& rule, const OptimizerStep& step) {
  if (!rule.bias_correction) return step.lr;
  const auto t = static_cast<double>(step.step);
  const double bc1 = 1.0 - std::pow(step.beta1, t);
  const double bc2 = 1.0 - std::pow(rule.beta2, t);
  return step.lr * std::sqrt(bc2) / bc1;
}

double lamb_trust_ratio(double params_sum_of_squares, double update_sum_of_squares,
                        const OptimizerRule& rule) {
  const double w_norm = std::sqrt(params_sum_of_squares);
  const double u_norm = std::sqrt(update_sum_of_squares);
  if (w_norm == 0.0 || u_norm == 0.0) return 1.0;
  return std::clamp(w_norm / u_norm, rule.min_coeff, rule.max_coeff);
}

int expected_states(const OptimizerRule& rule) {
  switch (rule.kind) {
    case OptimizerRule::Kind::kAdam:
    case OptimizerRule::Kind::kLamb: return 2;
    case OptimizerRule::Kind::kSgd: return rule.momentum != 0.0 ? 1 : 0;
  }
  return 0;
}

// The arrays of `chunk` from element `offset`, `count` elements.
OptimizerArrays arrays_of(const ShardChunk& chunk, std::size_t offset, std::size_t count,
                          int states) {
  OptimizerArrays a;
  a.params = chunk.params + offset;
  if (chunk.grads_16bit != nullptr) {
    a.grads = static_cast<const std::uint16_t*>(chunk.grads_16bit) + offset;
    a.grads_dtype = chunk.grads_16bit_dtype;
  } else {
    a.grads = chunk.grads + offset;
    a.grads_dtype = DType::kFloat32;
  }
  if (states >= 1) a.state0 = chunk.state + offset;
  if (states >= 2) a.state1 = chunk.state + chunk.num_elements + offset;
  if (chunk.params_16bit != nullptr) {
    a.params_16bit = static_cast<std::uint16_t*>(chunk.params_16bit) + offset;
    a.params_16bit_dtype = chunk.params_16bit_dtype;
  }
  a.count = count;
  return a;
}

void check_chunk(const ShardChunk& chunk, std::size_t index, int states,
                 std::string_view optimizer) {
  if (chunk.num_elements == 0) return;
  ZERO_CHECK(chunk.params != nullptr, optimizer, " step on CUDA: chunk ", index, " has no params");
  ZERO_CHECK((chunk.grads != nullptr) != (chunk.grads_16bit != nullptr), optimizer,
             " step on CUDA: chunk ", index,
             " needs exactly one of grads (fp32) and grads_16bit (has ",
             chunk.grads != nullptr ? "both" : "neither", ")");
  ZERO_CHECK(chunk.grads_16bit == nullptr || chunk.grads_16bit_dtype != DType::kFloat32, optimizer,
             " step on CUDA: chunk ", index,
             " grads_16bit_dtype is fp32 (fp32 gradients go in grads)");
  ZERO_CHECK(chunk.params_16bit == nullptr || chunk.params_16bit_dtype != DType::kFloat32,
             optimizer, " step on CUDA: chunk ", index,
             " params_16bit_dtype is fp32 (the copy is bf16 or fp16)");
  ZERO_CHECK(states == 0 || chunk.state != nullptr, optimizer, " step on CUDA: chunk ", index,
             " has no state (", states, " fp32 values per element expected)");
  for (const TensorSegment& segment : chunk.segments)
    ZERO_CHECK(segment.offset_elements + segment.num_elements <= chunk.num_elements, optimizer,
               " step on CUDA: chunk ", index, " segment of tensor ", segment.tensor, " [",
               segment.offset_elements, ", ", segment.offset_elements + segment.num_elements,
               ") exceeds its ", chunk.num_elements, " elements");
}

// Where the passes run: the device (kernels on a stream) or the host (the kernels' element rules
// in host loops, for tests without a device). Everything else in a step is shared.
class Passes {
 public:
  virtual ~Passes() = default;
  virtual void adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients) = 0;
  virtual void sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients) = 0;
  // Lamb: room for `segments` pairs of sums, zeroed; pass 1 of segment k into pair k; then the
  // pairs on the host (after a host wait on the device); float scratch the host and the
  // all-reduce can address; pass 2; the 16-bit copy of `count` elements no segment covers.
  virtual void lamb_begin(std::size_t segments) = 0;
  virtual void lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                            std::size_t segment) = 0;
  virtual const double* lamb_segment_sums() = 0;
  virtual float* lamb_tensor_sums(std::size_t count) = 0;
  virtual void lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay,
                          float step) = 0;
  virtual void copy_params(const float* params, void* copy, DType dtype, std::size_t count) = 0;
};

class DevicePasses final : public Passes {
 public:
  DevicePasses(Stream& stream, cudaStream_t native_stream, Allocator& device, Allocator& pinned)
      : stream_(stream), native_(native_stream), device_(device), pinned_(pinned) {}
  void adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients) override {
    launch_adam(arrays, coefficients, native_);
  }
  void sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients) override {
    launch_sgd(arrays, coefficients, native_);
  }
  void lamb_begin(std::size_t segments) override {
    segments_ = segments;
    if (segments == 0) return;
    const std::size_t bytes = 2 * segments * sizeof(double);
    segment_sums_ = device_.allocate(bytes, MemoryCategory::kWorkspace);
    host_segment_sums_ = pinned_.allocate(bytes, MemoryCategory::kWorkspace);
    ZERO_CUDA_CHECK(cudaMemsetAsync(segment_sums_.data(), 0, bytes, native_));
  }
  void lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                    std::size_t segment) override {
    launch_lamb_moments(arrays, coefficients, segment_sums_.data_as<double>() + 2 * segment,
                        native_);
  }
  const double* lamb_segment_sums() override {
    if (segments_ > 0)
      ZERO_CUDA_CHECK(cudaMemcpyAsync(host_segment_sums_.data(), segment_sums_.data(),
                                      2 * segments_ * sizeof(double), cudaMemcpyDeviceToHost,
                                      native_));
    // A host wait: the trust ratios need every rank's norms, all-reduced by the caller's function.
    stream_.synchronize();
    return host_segment_sums_.data_as<double>();
  }
  float* lamb_tensor_sums(std::size_t count) override {
    tensor_sums_ = pinned_.allocate(std::max<std::size_t>(1, count) * sizeof(float),
                                    MemoryCategory::kWorkspace);
    return tensor_sums_.data_as<float>();
  }
  void lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay,
                  float step) override {
    launch_lamb_apply(arrays, eps, weight_decay, step, native_);
  }
  void copy_params(const float* params, void* copy, DType dtype, std::size_t count) override {
    convert_on_device(params, DType::kFloat32, copy, dtype, count, native_);
  }

 private:
  Stream& stream_;
  cudaStream_t native_;
  Allocator& device_;
  Allocator& pinned_;
  std::size_t segments_ = 0;
  // Scratch, read by nothing queued after the host wait in lamb_segment_sums().
  Buffer segment_sums_, host_segment_sums_, tensor_sums_;
};

class HostPasses final : public Passes {
 public:
  void adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients) override {
    host_adam(arrays, coefficients);
  }
  void sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients) override {
    host_sgd(arrays, coefficients);
  }
  void lamb_begin(std::size_t segments) override { segment_sums_.assign(2 * segments, 0.0); }
  void lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                    std::size_t segment) override {
    host_lamb_moments(arrays, coefficients, segment_sums_.data() + 2 * segment);
  }
  const double* lamb_segment_sums() override { return segment_sums_.data(); }
  float* lamb_tensor_sums(std::size_t count) override {
    tensor_sums_.assign(std::max<std::size_t>(1, count), 0.0f);
    return tensor_sums_.data();
  }
  void lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay,
                  float step) override {
    host_lamb_apply(arrays, eps, weight_decay, step);
  }
  void copy_params(const float* params, void* copy, DType dtype, std::size_t count) override {
    convert(params, DType::kFloat32, copy, dtype, count);
  }

 private:
  std::vector<double> segment_sums_;
  std::vector<float> tensor_sums_;
};

// Lamb: pass 1 per segment into per-segment sums, per-tensor sums in float on the host in
// chunk and segment order (as optim::Lamb::step), all-reduced, pass 2 per segment.
void lamb_step(Passes& passes, const OptimizerRule& rule, std::span<ShardChunk> chunks,
               const OptimizerStep& step) {
  std::size_t num_segments = 0;
  for (const ShardChunk& chunk : chunks) num_segments += chunk.segments.size();
  for (const ShardChunk& chunk : chunks)
    for (const TensorSegment& segment : chunk.segments)
      ZERO_CHECK(segment.tensor >= 0 && segment.tensor < step.num_tensors,
                 "Lamb step on CUDA: segment of tensor ", segment.tensor,
                 " outside OptimizerStep::num_tensors = ", step.num_tensors);
  const LambCoefficients coefficients = lamb_coefficients(rule, step);
  passes.lamb_begin(num_segments);
  std::size_t k = 0;
  for (const ShardChunk& chunk : chunks)
    for (const TensorSegment& segment : chunk.segments)
      passes.lamb_moments(arrays_of(chunk, segment.offset_elements, segment.num_elements, 2),
                          coefficients, k++);
  const double* pieces = passes.lamb_segment_sums();
  const auto num_sums = 2 * static_cast<std::size_t>(std::max(0, step.num_tensors));
  float* sums = passes.lamb_tensor_sums(num_sums);
  std::fill(sums, sums + num_sums, 0.0f);
  k = 0;
  for (const ShardChunk& chunk : chunks)
    for (const TensorSegment& segment : chunk.segments) {
      sums[2 * segment.tensor] += static_cast<float>(pieces[2 * k]);
      sums[2 * segment.tensor + 1] += static_cast<float>(pieces[2 * k + 1]);
      ++k;
    }
  if (step.all_reduce_sum) step.all_reduce_sum(sums, num_sums);
  const double step_size = lamb_step_size(rule, step);
  const auto eps = static_cast<float>(rule.eps);
  const auto decay = static_cast<float>(rule.weight_decay);
  for (const ShardChunk& chunk : chunks) {
    std::size_t covered = 0;  // the 16-bit copy of elements no segment covers (padding)
    auto copy_gap = [&](std::size_t end) {
      if (chunk.params_16bit != nullptr && end > covered)
        passes.copy_params(chunk.params + covered,
                           static_cast<std::uint16_t*>(chunk.params_16bit) + covered,
                           chunk.params_16bit_dtype, end - covered);
    };
    for (const TensorSegment& segment : chunk.segments) {
      const double ratio =
          lamb_trust_ratio(sums[2 * segment.tensor], sums[2 * segment.tensor + 1], rule);
      copy_gap(segment.offset_elements);
      passes.lamb_apply(arrays_of(chunk, segment.offset_elements, segment.num_elements, 2), eps,
                        decay, static_cast<float>(step_size * ratio));
      covered = std::max(covered, segment.offset_elements + segment.num_elements);
    }
    copy_gap(chunk.num_elements);
  }
}

void run_step(Passes& passes, std::string_view where, const Optimizer& optimizer,
              std::span<ShardChunk> chunks, const OptimizerStep& step) {
  const std::optional<OptimizerRule> rule = optimizer.rule();
  ZERO_CHECK(rule.has_value(), "optimizer '", optimizer.name(),
             "' has no device rule (Optimizer::rule()), so it cannot step on CUDA (", where,
             "); Adam, AdamW, SGD and Lamb can");
  const int states = expected_states(*rule);
  ZERO_CHECK(optimizer.states_per_element() == states, "optimizer '", optimizer.name(), "' keeps ",
             optimizer.states_per_element(), " state values per element but its rule needs ",
             states);
  for (std::size_t i = 0; i < chunks.size(); ++i)
    check_chunk(chunks[i], i, states, optimizer.name());
  switch (rule->kind) {
    case OptimizerRule::Kind::kAdam: {
      const AdamCoefficients coefficients = adam_coefficients(*rule, step);
      for (const ShardChunk& chunk : chunks)
        if (chunk.num_elements > 0)
          passes.adam(arrays_of(chunk, 0, chunk.num_elements, states), coefficients);
      return;
    }
    case OptimizerRule::Kind::kSgd: {
      const SgdCoefficients coefficients = sgd_coefficients(*rule, step);
      for (const ShardChunk& chunk : chunks)
        if (chunk.num_elements > 0)
          passes.sgd(arrays_of(chunk, 0, chunk.num_elements, states), coefficients);
      return;
    }
    case OptimizerRule::Kind::kLamb: lamb_step(passes, *rule, chunks, step); return;
  }
}

}  // namespace

void optimizer_step(Stream& stream, cudaStream_t native_stream, Allocator& device,
                    Allocator& pinned, const Optimizer& optimizer, std::span<ShardChunk> chunks,
                    const OptimizerStep& step) {
  DevicePasses passes(stream, native_stream, device, pinned);
  run_step(passes, "stream '" + stream.name() + "'", optimizer, chunks, step);
}

void optimizer_step_on_host(const Optimizer& optimizer, std::span<ShardChunk> chunks,
                            const OptimizerStep& step) {
  HostPasses passes;
  run_step(passes, "host emulation", optimizer, chunks, step);
}

}  // namespace zero::cuda
