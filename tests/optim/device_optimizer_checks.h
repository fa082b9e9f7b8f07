// Optimizer::step_on on any backend against the optimizer's own CPU kernels (Optimizer::step on
// host copies, optim/src/kernels.cc: the oracle): Adam, AdamW, SGD (plain, momentum, nesterov)
// and Lamb over two chunks (one 16-byte aligned, one not), odd sizes, three steps, fp32/bf16/fp16
// gradients, with and without a bf16/fp16 parameter copy. tests/optim/device_optimizer_test.cc
// runs them on the CPU context, optim_cuda_test.cc on CUDA, optim_cuda_emulation_test.cc through
// the CUDA step's host twins.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/engine/optimizer.h"
#include "zero/optim/optimizers.h"

namespace zero::testing {

struct DeviceOptimizerCase {
  std::string name;
  config::OptimizerConfig options;
};

inline std::vector<DeviceOptimizerCase> device_optimizer_cases() {
  std::vector<DeviceOptimizerCase> cases;
  config::OptimizerConfig adamw;
  adamw.type = config::OptimizerType::kAdamW;
  adamw.lr = 1e-3;
  adamw.weight_decay = 0.01;
  cases.push_back({"AdamW", adamw});
  config::OptimizerConfig adam = adamw;
  adam.type = config::OptimizerType::kAdam;
  adam.adam_w_mode = false;
  adam.bias_correction = true;
  cases.push_back({"Adam-L2", adam});
  config::OptimizerConfig adam_no_bias = adamw;
  adam_no_bias.bias_correction = false;
  adam_no_bias.betas = {0.8, 0.95};
  cases.push_back({"AdamW-no-bias-correction", adam_no_bias});
  config::OptimizerConfig sgd;
  sgd.type = config::OptimizerType::kSgd;
  sgd.lr = 1e-2;
  sgd.weight_decay = 1e-3;
  cases.push_back({"SGD", sgd});
  config::OptimizerConfig momentum = sgd;
  momentum.momentum = 0.9;
  momentum.dampening = 0.1;
  cases.push_back({"SGD-momentum", momentum});
  config::OptimizerConfig nesterov = sgd;
  nesterov.momentum = 0.9;
  nesterov.nesterov = true;
  cases.push_back({"SGD-nesterov", nesterov});
  config::OptimizerConfig lamb;
  lamb.type = config::OptimizerType::kLamb;
  lamb.lr = 1e-3;
  lamb.weight_decay = 0.01;
  cases.push_back({"Lamb", lamb});
  config::OptimizerConfig lamb_clamped = lamb;
  lamb_clamped.max_coeff = 0.5;  // every trust ratio hits the clamp
  lamb_clamped.bias_correction = false;
  cases.push_back({"Lamb-clamped", lamb_clamped});
  return cases;
}

// |actual - expected| <= tolerance · max(|expected|, rms(expected)), element by element. The floor
// is the array's RMS, not a constant: an element that is a small difference of larger terms (Adam's
// m = β1·m + (1-β1)·g at step 2, terms ~0.1, result ~1e-4) carries rounding of the terms' size,
// which differs with FMA contraction (nvcc contracts a·b + c, the CPU build need not). Seen on an
// H100: m -1.2453190e-4 vs -1.2452155e-4, 1.4 ulps of its terms, over a 1e-3 constant floor's 1e-8.
inline void expect_relative(const std::vector<float>& actual, const std::vector<float>& expected,
                            double tolerance, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double squares = 0.0;
  for (float value : expected) squares += static_cast<double>(value) * value;
  const double rms = expected.empty() ? 0.0 : std::sqrt(squares / expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double bound = tolerance * std::max(std::fabs(static_cast<double>(expected[i])), rms);
    ASSERT_LE(std::fabs(static_cast<double>(actual[i]) - expected[i]), bound)
        << what << " element " << i << ": " << actual[i] << " vs " << expected[i];
  }
}

// One chunk's arrays on the host (the oracle's) and on the device (`misalign` elements past an
// allocation's start, so 1 takes the kernels' scalar path).
struct ChunkBuffers {
  std::size_t count = 0;
  std::size_t misalign = 0;
  std::vector<float> params, state;
  std::vector<TensorSegment> segments;
  Buffer device_params, device_grads, device_state, device_copy;
};

template <typename T>
T* at(const Buffer& buffer, std::size_t offset) {
  return buffer.data_as<T>() + offset;
}

inline void upload(DeviceContext& context, const void* host, void* device, std::size_t bytes) {
  if (bytes == 0) return;
  Buffer staging =
      context.allocator(MemorySpace::kHost).allocate(bytes, MemoryCategory::kWorkspace);
  std::memcpy(staging.data(), host, bytes);
  context.copy(context.copy_stream(), staging.data(), device, bytes);
  context.copy_stream().synchronize();
}

inline void download(DeviceContext& context, const void* device, void* host, std::size_t bytes) {
  if (bytes == 0) return;
  Buffer staging =
      context.allocator(MemorySpace::kHost).allocate(bytes, MemoryCategory::kWorkspace);
  context.copy(context.copy_stream(), device, staging.data(), bytes);
  context.copy_stream().synchronize();
  std::memcpy(host, staging.data(), bytes);
}

// Fills both chunks: tensors chunk 0 = [t0 | t1 | 2 padding], chunk 1 = [t1 | t2 | 1 padding] (t1
// spans both chunks, so its Lamb norm is summed over two pieces), random parameters and state on
// the host, and the device buffers (misaligned by chunk.misalign elements) with their copies.
inline void set_up_chunks(DeviceContext& context, std::vector<ChunkBuffers>& chunks, int states,
                          std::mt19937& random, std::normal_distribution<float>& normal) {
  Allocator& device = context.allocator(MemorySpace::kDevice);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    ChunkBuffers& chunk = chunks[c];
    const std::size_t n = chunk.count;
    const std::size_t padding = std::min<std::size_t>(n, c == 0 ? 2 : 1);
    const std::size_t first = (n - padding) / 3;
    const int first_tensor = c == 0 ? 0 : 1;
    if (first > 0) chunk.segments.push_back({0, first, first_tensor});
    if (n - padding > first)
      chunk.segments.push_back({first, n - padding - first, first_tensor + 1});
    chunk.params.resize(n);
    for (float& p : chunk.params) p = normal(random);
    chunk.state.assign(static_cast<std::size_t>(states) * n, 0.0f);
    for (std::size_t i = 0; i < n && states == 2; ++i) {
      chunk.state[i] = 0.1f * normal(random);
      chunk.state[n + i] = 0.01f * std::fabs(normal(random));
    }
    const std::size_t padded = n + chunk.misalign;
    chunk.device_params = device.allocate(padded * sizeof(float), MemoryCategory::kMasterParams);
    chunk.device_grads = device.allocate(padded * sizeof(float), MemoryCategory::kGradShard);
    chunk.device_state = device.allocate(
        std::max<std::size_t>(1, static_cast<std::size_t>(states) * n + chunk.misalign) *
            sizeof(float),
        MemoryCategory::kOptimizerState);
    chunk.device_copy = device.allocate(padded * 2, MemoryCategory::kParams);
    upload(context, chunk.params.data(), at<float>(chunk.device_params, chunk.misalign),
           n * sizeof(float));
    upload(context, chunk.state.data(), at<float>(chunk.device_state, chunk.misalign),
           chunk.state.size() * sizeof(float));
  }
}

// How the device under test takes a step over the device chunks; empty: Optimizer::step_on on
// the context's compute stream.
using DeviceStep = std::function<void(Optimizer& optimizer, std::span<ShardChunk> chunks,
                                      const OptimizerStep& step)>;

// Runs `steps` steps of `options` on `context` and on the host, comparing params and state
// (fp32 within 1e-5 relative) and the 16-bit copy (bit for bit against converting the device's
// own fp32 result) after each step.
inline void check_device_optimizer(DeviceContext& context, const config::OptimizerConfig& options,
                                   DType grads_dtype, bool with_copy, DType copy_dtype,
                                   std::size_t count_a, std::size_t count_b,
                                   const DeviceStep& device_step, int steps = 3) {
  auto device_optimizer = optim::make_optimizer(options);
  auto host_optimizer = optim::make_optimizer(options);
  const int states = host_optimizer->states_per_element();
  std::mt19937 random(static_cast<unsigned>(count_a * 7919 + count_b));
  std::normal_distribution<float> normal(0.0f, 1.0f);

  std::vector<ChunkBuffers> chunks(2);
  chunks[0].count = count_a;
  chunks[1].count = count_b;
  chunks[1].misalign = 1;
  set_up_chunks(context, chunks, states, random, normal);

  for (int step = 1; step <= steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<ShardChunk> host_chunks(chunks.size()), device_chunks(chunks.size());
    std::vector<std::vector<float>> host_grads(chunks.size());
    for (std::size_t c = 0; c < chunks.size(); ++c) {
      ChunkBuffers& chunk = chunks[c];
      const std::size_t n = chunk.count;
      std::vector<float> grads(n);
      for (float& g : grads) g = normal(random);
      // The oracle reads what the device reads: 16-bit gradients widened exactly.
      host_grads[c].resize(n);
      if (grads_dtype == DType::kFloat32) {
        host_grads[c] = grads;
        upload(context, grads.data(), at<float>(chunk.device_grads, chunk.misalign),
               n * sizeof(float));
      } else {
        std::vector<std::uint16_t> narrow(n);
        convert(grads.data(), DType::kFloat32, narrow.data(), grads_dtype, n);
        convert(narrow.data(), grads_dtype, host_grads[c].data(), DType::kFloat32, n);
        upload(context, narrow.data(), at<std::uint16_t>(chunk.device_grads, chunk.misalign),
               n * 2);
      }
      ShardChunk& host = host_chunks[c];
      host.params = chunk.params.data();
      host.grads = host_grads[c].data();
      host.state = states > 0 ? chunk.state.data() : nullptr;
      host.num_elements = n;
      host.segments = chunk.segments;
      ShardChunk& on_device = device_chunks[c];
      on_device.params = at<float>(chunk.device_params, chunk.misalign);
      if (grads_dtype == DType::kFloat32) {
        on_device.grads = at<float>(chunk.device_grads, chunk.misalign);
      } else {
        on_device.grads_16bit = at<std::uint16_t>(chunk.device_grads, chunk.misalign);
        on_device.grads_16bit_dtype = grads_dtype;
      }
      on_device.state = states > 0 ? at<float>(chunk.device_state, chunk.misalign) : nullptr;
      on_device.num_elements = n;
      on_device.segments = chunk.segments;
      if (with_copy) {
        on_device.params_16bit = at<std::uint16_t>(chunk.device_copy, chunk.misalign);
        on_device.params_16bit_dtype = copy_dtype;
      }
    }
    OptimizerStep args;
    args.step = step;
    args.lr = options.lr * (1.0 + 0.1 * step);  // a schedule's lr
    args.beta1 = options.betas[0];
    args.grad_scale = 0.5 / step;  // unscale and clip
    args.num_tensors = 3;
    // A stand-in for the all-reduce over two ranks holding the same shard: the result doubles.
    args.all_reduce_sum = [](float* values, std::size_t count) {
      for (std::size_t i = 0; i < count; ++i) values[i] *= 2.0f;
    };
    host_optimizer->step(host_chunks, args);
    if (device_step)
      device_step(*device_optimizer, device_chunks, args);
    else
      device_optimizer->step_on(context, context.compute_stream(), device_chunks, args);
    context.compute_stream().synchronize();

    for (std::size_t c = 0; c < chunks.size(); ++c) {
      ChunkBuffers& chunk = chunks[c];
      const std::size_t n = chunk.count;
      const std::string where = "chunk " + std::to_string(c) + " (" + std::to_string(n) +
                                " elements, misaligned by " + std::to_string(chunk.misalign) + ")";
      std::vector<float> params(n), state(chunk.state.size());
      download(context, at<float>(chunk.device_params, chunk.misalign), params.data(),
               n * sizeof(float));
      download(context, at<float>(chunk.device_state, chunk.misalign), state.data(),
               state.size() * sizeof(float));
      expect_relative(params, chunk.params, 1e-5, where + " params");
      expect_relative(state, chunk.state, 1e-5, where + " state");
      if (with_copy) {
        std::vector<std::uint16_t> copy(n), expected(n);
        download(context, at<std::uint16_t>(chunk.device_copy, chunk.misalign), copy.data(), n * 2);
        convert(params.data(), DType::kFloat32, expected.data(), copy_dtype, n);
        for (std::size_t i = 0; i < n; ++i)
          ASSERT_EQ(copy[i], expected[i])
              << where << " " << name_of(copy_dtype) << " copy element " << i;
      }
      // The device's state continues from the device's values, the oracle's from its own.
    }
  }
}

// Sizes of the two chunks of a check.
struct ChunkSizes {
  std::size_t a, b;
};
inline const std::vector<ChunkSizes> kDeviceOptimizerSizes = {
    {1, 1}, {22, 7}, {1023, 4099}, {65536 + 5, 3}};

// The whole matrix on `context`: every case × gradient dtype × copy, at sizes with tails.
inline void check_device_optimizers(DeviceContext& context,
                                    const std::vector<ChunkSizes>& sizes = kDeviceOptimizerSizes,
                                    const DeviceStep& device_step = {}) {
  for (const DeviceOptimizerCase& c : device_optimizer_cases()) {
    for (DType grads : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      for (int copy = 0; copy < 3; ++copy) {
        const DType copy_dtype = copy == 2 ? DType::kFloat16 : DType::kBFloat16;
        for (const ChunkSizes& size : sizes) {
          SCOPED_TRACE(c.name + ", grads " + std::string(name_of(grads)) + ", copy " +
                       (copy == 0 ? std::string("none") : std::string(name_of(copy_dtype))) +
                       ", sizes " + std::to_string(size.a) + "+" + std::to_string(size.b));
          check_device_optimizer(context, c.options, grads, copy != 0, copy_dtype, size.a, size.b,
                                 device_step);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

}  // namespace zero::testing
