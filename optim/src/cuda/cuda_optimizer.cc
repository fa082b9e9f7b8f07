// optim/'s optimizers on a CUDA context: the coefficients from coefficients.h (the CPU kernels'
// own), the fused kernels of optimizer_kernels.cu or their host twins, and Lamb's per-tensor norms
// between its two passes.
#include "cuda_optimizer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "optimizer_kernels.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_ops.h"
#include "zero/core/error.h"

namespace zero::optim::cuda {
namespace {

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
  if (states >= 2) a.state1 = chunk.state_slice(1) + offset;
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

class DevicePasses final : public Passes {
 public:
  DevicePasses(DeviceContext& context, Stream& stream)
      : stream_(stream),
        native_(static_cast<cudaStream_t>(cuda_stream_handle(stream))),
        device_(context.allocator(MemorySpace::kDevice)),
        pinned_(context.allocator(MemorySpace::kHostPinned)) {}
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

// The checks of every chunk for a step keeping `states` fp32 values per element.
void check_chunks(std::span<ShardChunk> chunks, int states, std::string_view optimizer) {
  for (std::size_t i = 0; i < chunks.size(); ++i) check_chunk(chunks[i], i, states, optimizer);
}

// Lamb: pass 1 per segment into per-segment sums, per-tensor sums in float on the host in
// chunk and segment order (as optim::Lamb::step), all-reduced, pass 2 per segment.
void lamb_step(Passes& passes, const LambHyperparams& hyper, std::span<ShardChunk> chunks,
               const OptimizerStep& step) {
  std::size_t num_segments = 0;
  for (const ShardChunk& chunk : chunks) num_segments += chunk.segments.size();
  for (const ShardChunk& chunk : chunks)
    for (const TensorSegment& segment : chunk.segments)
      ZERO_CHECK(segment.tensor >= 0 && segment.tensor < step.num_tensors,
                 "Lamb step on CUDA: segment of tensor ", segment.tensor,
                 " outside OptimizerStep::num_tensors = ", step.num_tensors);
  const LambCoefficients coefficients = lamb_coefficients(hyper);
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
  const double step_size = lamb_step_size(hyper);
  const auto eps = static_cast<float>(hyper.eps);
  const auto decay = static_cast<float>(hyper.weight_decay);
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
          lamb_trust_ratio(sums[2 * segment.tensor], sums[2 * segment.tensor + 1], hyper);
      copy_gap(segment.offset_elements);
      passes.lamb_apply(arrays_of(chunk, segment.offset_elements, segment.num_elements, 2), eps,
                        decay, static_cast<float>(step_size * ratio));
      covered = std::max(covered, segment.offset_elements + segment.num_elements);
    }
    copy_gap(chunk.num_elements);
  }
}

}  // namespace

std::unique_ptr<Passes> device_passes(DeviceContext& context, Stream& stream) {
  return std::make_unique<DevicePasses>(context, stream);
}

std::unique_ptr<Passes> host_passes() { return std::make_unique<HostPasses>(); }

void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep&, const AdamHyperparams& hyper) {
  check_chunks(chunks, 2, optimizer);
  const AdamCoefficients coefficients = adam_coefficients(hyper);
  for (const ShardChunk& chunk : chunks)
    if (chunk.num_elements > 0)
      passes.adam(arrays_of(chunk, 0, chunk.num_elements, 2), coefficients);
}

void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep&, const SgdHyperparams& hyper) {
  const int states = hyper.momentum != 0.0 ? 1 : 0;
  check_chunks(chunks, states, optimizer);
  const SgdCoefficients coefficients = sgd_coefficients(hyper);
  for (const ShardChunk& chunk : chunks)
    if (chunk.num_elements > 0)
      passes.sgd(arrays_of(chunk, 0, chunk.num_elements, states), coefficients);
}

void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep& step, const LambHyperparams& hyper) {
  check_chunks(chunks, 2, optimizer);
  lamb_step(passes, hyper, chunks, step);
}

}  // namespace zero::optim::cuda
