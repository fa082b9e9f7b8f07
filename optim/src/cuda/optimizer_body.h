// The bodies and launch configuration of the fused optimizer kernels (optimizer_kernels.cu):
// Adam/AdamW, SGD with momentum, Lamb's two passes over flat fp32 shards; one grid-stride pass per
// step, four elements per thread through 128-bit fp32 loads (64-bit for 16-bit arrays) when every
// array is aligned for it, a scalar tail through the same element rule (ggml-cuda's
// opt-step-adamw.cu, DeepSpeed's multi_tensor_adam). Templated on the thread
// (zero/core/kernel_thread.h) and the storage types, so the CPU emulation test runs them over
// their launch grids; in emulation a vector access checks its alignment. C++17 for nvcc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../coefficients.h"
#include "zero/core/dtype.h"
#include "zero/core/kernel_thread.h"

namespace zero::optim::cuda {

// The arrays of one pass over `count` elements, all device memory (or mapped pinned memory).
// state0/state1: the optimizer's state slices (Adam/Lamb: exp_avg, exp_avg_sq; SGD: the
// momentum buffer in state0). params_16bit may be null (no copy).
struct OptimizerArrays {
  float* params = nullptr;
  const void* grads = nullptr;
  DType grads_dtype = DType::kFloat32;
  float* state0 = nullptr;
  float* state1 = nullptr;
  void* params_16bit = nullptr;
  DType params_16bit_dtype = DType::kBFloat16;
  std::size_t count = 0;
};

constexpr int kOptimizerThreads = 256;
constexpr int kVector = 4;  // elements per thread in the vector loop

inline bool aligned(const void* data, std::size_t bytes) {
  return data == nullptr || reinterpret_cast<std::uintptr_t>(data) % bytes == 0;
}

// Whether every array can take the vector loop's accesses (16 bytes per fp32 array, 8 per 16-bit).
inline bool vectorizable(const OptimizerArrays& a) {
  const std::size_t grads_access = a.grads_dtype == DType::kFloat32 ? 16 : 8;
  return aligned(a.params, 16) && aligned(a.grads, grads_access) && aligned(a.state0, 16) &&
         aligned(a.state1, 16) && aligned(a.params_16bit, 8);
}

// Blocks of 256 threads, at most 65535: a thread per group of four elements when vectorised,
// else per element (the loops stride over the rest).
inline kernels::LaunchConfig optimizer_launch(std::size_t count, bool vectorized) {
  const std::size_t work = vectorized ? (count + kVector - 1) / kVector : count;
  return kernels::linear_launch(
      kernels::blocks_for(static_cast<std::int64_t>(work), kOptimizerThreads, 65535),
      kOptimizerThreads);
}

#if defined(__CUDACC__)
// Four consecutive elements in one memory access: float4 (128 bits) for fp32, uint2 (64 bits) for
// 16-bit types.
template <typename T>
struct Pack4 {
  using Storage = uint2;
};
template <>
struct Pack4<float> {
  using Storage = float4;
};
#endif

// Four consecutive elements from `data`, aligned to the access size (vectorizable checks).
template <typename T>
ZERO_HOST_DEVICE_INLINE void load4(const T* data, float out[kVector]) {
#if defined(__CUDA_ARCH__)
  const typename Pack4<T>::Storage raw = *reinterpret_cast<const typename Pack4<T>::Storage*>(data);
  const T* values = reinterpret_cast<const T*>(&raw);
#else
  kernels::require_aligned(data, kVector * sizeof(T), "load4");
  const T* values = data;
#endif
  ZERO_UNROLL for (int k = 0; k < kVector; ++k) out[k] = kernels::Element<T>::widen(values[k]);
}

template <typename T>
ZERO_HOST_DEVICE_INLINE void store4(T* data, const float in[kVector]) {
#if defined(__CUDA_ARCH__)
  typename Pack4<T>::Storage raw;
  T* values = reinterpret_cast<T*>(&raw);
#else
  kernels::require_aligned(data, kVector * sizeof(T), "store4");
  T* values = data;
#endif
  ZERO_UNROLL for (int k = 0; k < kVector; ++k) values[k] = kernels::Element<T>::narrow(in[k]);
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<typename Pack4<T>::Storage*>(data) = raw;
#endif
}

// The element rules, over the coefficients the CPU kernels take (coefficients.h). Each has the CPU
// kernel's expression order (optim/src/kernels.cc); nvcc may contract a·b + c into an FMA, which
// the CPU build does not, so results agree to rounding, not bit for bit.
struct AdamRule {
  static constexpr int kStates = 2;
  static constexpr bool kReadsGrads = true;
  static constexpr bool kWritesStates = true;
  AdamCoefficients c;
  ZERO_HOST_DEVICE_INLINE void operator()(float& p, float grad, float& m, float& v) const {
    const float g = grad * c.grad_scale + c.l2 * p;
    m = c.beta1 * m + c.one_minus_beta1 * g;
    v = c.beta2 * v + c.one_minus_beta2 * g * g;
    const float denom = sqrtf(v) * c.inv_sqrt_bc2 + c.eps;  // sqrtf: IEEE on host and device
    p = p * c.decay - c.step_size * (m / denom);
  }
};

struct SgdPlainRule {
  static constexpr int kStates = 0;
  static constexpr bool kReadsGrads = true;
  static constexpr bool kWritesStates = false;
  SgdCoefficients c;
  ZERO_HOST_DEVICE_INLINE void operator()(float& p, float grad, float&, float&) const {
    p -= c.lr * (grad * c.grad_scale + c.weight_decay * p);
  }
};

struct SgdMomentumRule {
  static constexpr int kStates = 1;
  static constexpr bool kReadsGrads = true;
  static constexpr bool kWritesStates = true;
  SgdCoefficients c;
  ZERO_HOST_DEVICE_INLINE void operator()(float& p, float grad, float& buffer, float&) const {
    const float g = grad * c.grad_scale + c.weight_decay * p;
    const float b = c.first_step ? g : c.momentum * buffer + c.one_minus_dampening * g;
    buffer = b;
    p -= c.lr * (c.nesterov ? g + c.momentum * b : b);
  }
};

struct LambApplyRule {
  static constexpr int kStates = 2;
  static constexpr bool kReadsGrads = false;
  static constexpr bool kWritesStates = false;
  float eps, weight_decay, step;
  ZERO_HOST_DEVICE_INLINE void operator()(float& p, float, float& m, float& v) const {
    const float u = m / (sqrtf(v) + eps) + weight_decay * p;
    p -= step * u;
  }
};

// Lamb pass 1 on one element: the moments, and p², u² added to the sums.
ZERO_HOST_DEVICE_INLINE void lamb_moments_element(const LambCoefficients& c, float p, float grad,
                                                  float& m, float& v, double& params_sum,
                                                  double& update_sum) {
  const float g = grad * c.grad_scale;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const float u = m / (sqrtf(v) + c.eps) + c.weight_decay * p;
  params_sum += static_cast<double>(p) * p;
  update_sum += static_cast<double>(u) * u;
}

// One pass of `rule` over the arrays: grads of type G, the optional copy of type P.
template <typename Thread, typename G, typename P, typename Rule>
ZERO_HOST_DEVICE void update_body(const Thread& thread, float* params, const G* grads,
                                  float* state0, float* state1, P* copy, std::size_t count,
                                  const Rule& rule, bool vectorized) {
  using kernels::Element;
  const std::size_t stride = kernels::grid_stride(thread);
  const std::size_t first = kernels::grid_stride_first(thread);
  std::size_t head = 0;
  if (vectorized) {
    const std::size_t groups = count / kVector;
    for (std::size_t group = first; group < groups; group += stride) {
      const std::size_t i = group * kVector;
      float p[kVector], g[kVector] = {}, a[kVector] = {}, b[kVector] = {};
      load4(params + i, p);
      if constexpr (Rule::kReadsGrads) load4(grads + i, g);
      if constexpr (Rule::kStates >= 1) load4(state0 + i, a);
      if constexpr (Rule::kStates >= 2) load4(state1 + i, b);
      ZERO_UNROLL for (int k = 0; k < kVector; ++k) rule(p[k], g[k], a[k], b[k]);
      store4(params + i, p);
      if constexpr (Rule::kWritesStates && Rule::kStates >= 1) store4(state0 + i, a);
      if constexpr (Rule::kWritesStates && Rule::kStates >= 2) store4(state1 + i, b);
      if (copy != nullptr) store4(copy + i, p);
    }
    head = groups * kVector;
  }
  for (std::size_t i = head + first; i < count; i += stride) {
    float p = params[i], g = 0.0f, a = 0.0f, b = 0.0f;
    if constexpr (Rule::kReadsGrads) g = Element<G>::widen(grads[i]);
    if constexpr (Rule::kStates >= 1) a = state0[i];
    if constexpr (Rule::kStates >= 2) b = state1[i];
    rule(p, g, a, b);
    params[i] = p;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 1) state0[i] = a;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 2) state1[i] = b;
    if (copy != nullptr) copy[i] = Element<P>::narrow(p);
  }
}

struct LambSumsShared {
  double partial[2][kOptimizerThreads];
};

// Lamb pass 1 with the per-block sums of p² and u² added to sums[0], sums[1].
template <typename Thread, typename G>
ZERO_HOST_DEVICE void lamb_moments_body(const Thread& thread, LambSumsShared& shared,
                                        const float* params, const G* grads, float* m, float* v,
                                        std::size_t count, const LambCoefficients& c, double* sums,
                                        bool vectorized) {
  const std::size_t stride = kernels::grid_stride(thread);
  const std::size_t first = kernels::grid_stride_first(thread);
  const unsigned t = thread.thread_index().x;
  double params_sum = 0.0, update_sum = 0.0;
  std::size_t head = 0;
  if (vectorized) {
    const std::size_t groups = count / kVector;
    for (std::size_t group = first; group < groups; group += stride) {
      const std::size_t i = group * kVector;
      float p[kVector], g[kVector], a[kVector], b[kVector];
      load4(params + i, p);
      load4(grads + i, g);
      load4(m + i, a);
      load4(v + i, b);
      ZERO_UNROLL for (int k = 0; k < kVector; ++k)
          lamb_moments_element(c, p[k], g[k], a[k], b[k], params_sum, update_sum);
      store4(m + i, a);
      store4(v + i, b);
    }
    head = groups * kVector;
  }
  for (std::size_t i = head + first; i < count; i += stride) {
    float a = m[i], b = v[i];
    lamb_moments_element(c, params[i], kernels::Element<G>::widen(grads[i]), a, b, params_sum,
                         update_sum);
    m[i] = a;
    v[i] = b;
  }
  const auto params_partial = thread.shared(shared.partial[0]);
  const auto update_partial = thread.shared(shared.partial[1]);
  params_partial[t] = params_sum;
  update_partial[t] = update_sum;
  thread.sync_block();
  for (int half = kOptimizerThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(t) < half) {
      params_partial[t] += params_partial[t + half];
      update_partial[t] += update_partial[t + half];
    }
    thread.sync_block();
  }
  if (t == 0) {
    thread.atomic_add(&sums[0], params_partial[0]);
    thread.atomic_add(&sums[1], update_partial[0]);
  }
}

}  // namespace zero::optim::cuda
