// Fused optimizer kernels: one grid-stride pass per step, four elements per thread through 128-bit
// fp32 loads (64-bit for 16-bit arrays) when every array is aligned for it, a scalar tail through
// the same element function (ggml-cuda's opt-step-adamw.cu, DeepSpeed's multi_tensor_adam).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "optimizer_kernels.h"
#include "zero/core/cuda_check.h"

namespace zero::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVector = 4;  // elements per thread in the vector loop

int blocks_for(std::size_t work_items) {
  return static_cast<int>(std::max<std::size_t>(
      1, std::min<std::size_t>((work_items + kThreads - 1) / kThreads, 65535)));
}

__device__ __forceinline__ float to_float(float value) { return value; }
__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }
__device__ __forceinline__ float to_float(__half value) { return __half2float(value); }

template <typename T>
__device__ __forceinline__ T from_float(float value);
template <>
__device__ __forceinline__ float from_float<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float value) {
  return __float2half_rn(value);
}

// Four consecutive elements in one memory access: float4 (128 bits) for fp32, uint2 (64 bits) for
// 16-bit types. `data` is aligned to the access size (the launcher checks).
template <typename T>
struct Pack4 {
  using Storage = uint2;
};
template <>
struct Pack4<float> {
  using Storage = float4;
};

template <typename T>
__device__ __forceinline__ void load4(const T* data, float out[kVector]) {
  const typename Pack4<T>::Storage raw = *reinterpret_cast<const typename Pack4<T>::Storage*>(data);
  const T* values = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int k = 0; k < kVector; ++k) out[k] = to_float(values[k]);
}

template <typename T>
__device__ __forceinline__ void store4(T* data, const float in[kVector]) {
  typename Pack4<T>::Storage raw;
  T* values = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int k = 0; k < kVector; ++k) values[k] = from_float<T>(in[k]);
  *reinterpret_cast<typename Pack4<T>::Storage*>(data) = raw;
}

// The element rules. Each has the CPU kernel's expression order (optim/src/kernels.cc); nvcc may
// contract a·b + c into an FMA as GCC does for the CPU's AVX2/AVX-512 clones, so results agree
// to rounding, not bit for bit.
struct AdamRule {
  static constexpr int kStates = 2;
  static constexpr bool kReadsGrads = true;
  static constexpr bool kWritesStates = true;
  AdamCoefficients c;
  __host__ __device__ __forceinline__ void operator()(float& p, float grad, float& m,
                                                      float& v) const {
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
  __host__ __device__ __forceinline__ void operator()(float& p, float grad, float&, float&) const {
    p -= c.lr * (grad * c.grad_scale + c.weight_decay * p);
  }
};

struct SgdMomentumRule {
  static constexpr int kStates = 1;
  static constexpr bool kReadsGrads = true;
  static constexpr bool kWritesStates = true;
  SgdCoefficients c;
  __host__ __device__ __forceinline__ void operator()(float& p, float grad, float& buffer,
                                                      float&) const {
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
  __host__ __device__ __forceinline__ void operator()(float& p, float, float& m, float& v) const {
    const float u = m / (sqrtf(v) + eps) + weight_decay * p;
    p -= step * u;
  }
};

// Lamb pass 1 on one element: the moments, and p², u² added to the sums.
__host__ __device__ __forceinline__ void lamb_moments_element(const LambCoefficients& c, float p,
                                                              float grad, float& m, float& v,
                                                              double& params_sum,
                                                              double& update_sum) {
  const float g = grad * c.grad_scale;
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * g * g;
  const float u = m / (sqrtf(v) + c.eps) + c.weight_decay * p;
  params_sum += static_cast<double>(p) * p;
  update_sum += static_cast<double>(u) * u;
}

// One pass of `rule` over the arrays: grads of type G, the optional copy of type P.
template <typename G, typename P, typename Rule>
__global__ void update_kernel(float* __restrict__ params, const G* __restrict__ grads,
                              float* __restrict__ state0, float* __restrict__ state1,
                              P* __restrict__ copy, std::size_t count, Rule rule, bool vectorized) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
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
#pragma unroll
      for (int k = 0; k < kVector; ++k) rule(p[k], g[k], a[k], b[k]);
      store4(params + i, p);
      if constexpr (Rule::kWritesStates && Rule::kStates >= 1) store4(state0 + i, a);
      if constexpr (Rule::kWritesStates && Rule::kStates >= 2) store4(state1 + i, b);
      if (copy != nullptr) store4(copy + i, p);
    }
    head = groups * kVector;
  }
  for (std::size_t i = head + first; i < count; i += stride) {
    float p = params[i], g = 0.0f, a = 0.0f, b = 0.0f;
    if constexpr (Rule::kReadsGrads) g = to_float(grads[i]);
    if constexpr (Rule::kStates >= 1) a = state0[i];
    if constexpr (Rule::kStates >= 2) b = state1[i];
    rule(p, g, a, b);
    params[i] = p;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 1) state0[i] = a;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 2) state1[i] = b;
    if (copy != nullptr) copy[i] = from_float<P>(p);
  }
}

// Lamb pass 1 with the per-block sums of p² and u² added to sums[0], sums[1].
template <typename G>
__global__ void lamb_moments_kernel(const float* __restrict__ params, const G* __restrict__ grads,
                                    float* __restrict__ m, float* __restrict__ v, std::size_t count,
                                    LambCoefficients c, double* sums, bool vectorized) {
  __shared__ double partial[2][kThreads];
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  double params_sum = 0.0, update_sum = 0.0;
  auto element = [&](float p, float grad, float& mi, float& vi) {
    lamb_moments_element(c, p, grad, mi, vi, params_sum, update_sum);
  };
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
#pragma unroll
      for (int k = 0; k < kVector; ++k) element(p[k], g[k], a[k], b[k]);
      store4(m + i, a);
      store4(v + i, b);
    }
    head = groups * kVector;
  }
  for (std::size_t i = head + first; i < count; i += stride) {
    float a = m[i], b = v[i];
    element(params[i], to_float(grads[i]), a, b);
    m[i] = a;
    v[i] = b;
  }
  partial[0][threadIdx.x] = params_sum;
  partial[1][threadIdx.x] = update_sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      partial[0][threadIdx.x] += partial[0][threadIdx.x + half];
      partial[1][threadIdx.x] += partial[1][threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(&sums[0], partial[0][0]);
    atomicAdd(&sums[1], partial[1][0]);
  }
}

bool aligned(const void* data, std::size_t bytes) {
  return data == nullptr || reinterpret_cast<std::uintptr_t>(data) % bytes == 0;
}

// Whether every array can take the vector loop's accesses (16 bytes per fp32 array, 8 per 16-bit).
bool vectorizable(const OptimizerArrays& a) {
  const std::size_t grads_access = a.grads_dtype == DType::kFloat32 ? 16 : 8;
  return aligned(a.params, 16) && aligned(a.grads, grads_access) && aligned(a.state0, 16) &&
         aligned(a.state1, 16) && aligned(a.params_16bit, 8);
}

template <typename G, typename P, typename Rule>
void launch_typed(const OptimizerArrays& a, const Rule& rule, cudaStream_t stream) {
  const bool vectorized = vectorizable(a);
  const std::size_t work = vectorized ? (a.count + kVector - 1) / kVector : a.count;
  update_kernel<G, P, Rule><<<blocks_for(work), kThreads, 0, stream>>>(
      a.params, static_cast<const G*>(a.grads), a.state0, a.state1, static_cast<P*>(a.params_16bit),
      a.count, rule, vectorized);
}

template <typename G, typename Rule>
void launch_with_grads(const OptimizerArrays& a, const Rule& rule, cudaStream_t stream) {
  if (a.params_16bit != nullptr && a.params_16bit_dtype == DType::kFloat16)
    launch_typed<G, __half>(a, rule, stream);
  else
    launch_typed<G, __nv_bfloat16>(a, rule, stream);  // also the no-copy case (null pointer)
}

template <typename Rule>
void launch_rule(const OptimizerArrays& a, const Rule& rule, cudaStream_t stream) {
  if (a.count == 0) return;
  ZERO_CHECK(a.params_16bit == nullptr || a.params_16bit_dtype != DType::kFloat32,
             "optimizer kernel: the parameter copy must be bf16 or fp16");
  if (!Rule::kReadsGrads) {
    launch_with_grads<float>(a, rule, stream);
  } else {
    switch (a.grads_dtype) {
      case DType::kFloat32: launch_with_grads<float>(a, rule, stream); break;
      case DType::kBFloat16: launch_with_grads<__nv_bfloat16>(a, rule, stream); break;
      case DType::kFloat16: launch_with_grads<__half>(a, rule, stream); break;
    }
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

// The host twin of update_kernel's scalar loop: the same rule per element, 16-bit values through
// zero's conversions (the device's rounding, tested exhaustively in core_test).
float host_load(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<const float*>(data)[i];
    case DType::kBFloat16: return to_float(static_cast<const BFloat16*>(data)[i]);
    case DType::kFloat16: return to_float(static_cast<const Float16*>(data)[i]);
  }
  return 0.0f;
}

template <typename Rule>
void host_rule(const OptimizerArrays& a, const Rule& rule) {
  for (std::size_t i = 0; i < a.count; ++i) {
    float p = a.params[i], g = 0.0f, s0 = 0.0f, s1 = 0.0f;
    if constexpr (Rule::kReadsGrads) g = host_load(a.grads, a.grads_dtype, i);
    if constexpr (Rule::kStates >= 1) s0 = a.state0[i];
    if constexpr (Rule::kStates >= 2) s1 = a.state1[i];
    rule(p, g, s0, s1);
    a.params[i] = p;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 1) a.state0[i] = s0;
    if constexpr (Rule::kWritesStates && Rule::kStates >= 2) a.state1[i] = s1;
    if (a.params_16bit != nullptr)
      convert(&p, DType::kFloat32, static_cast<char*>(a.params_16bit) + 2 * i, a.params_16bit_dtype,
              1);
  }
}

}  // namespace

void host_adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients) {
  host_rule(arrays, AdamRule{coefficients});
}

void host_sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients) {
  if (coefficients.has_momentum)
    host_rule(arrays, SgdMomentumRule{coefficients});
  else
    host_rule(arrays, SgdPlainRule{coefficients});
}

void host_lamb_moments(const OptimizerArrays& a, const LambCoefficients& coefficients,
                       double* sums) {
  for (std::size_t i = 0; i < a.count; ++i)
    lamb_moments_element(coefficients, a.params[i], host_load(a.grads, a.grads_dtype, i),
                         a.state0[i], a.state1[i], sums[0], sums[1]);
}

void host_lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay, float step) {
  host_rule(arrays, LambApplyRule{eps, weight_decay, step});
}

void launch_adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients,
                 cudaStream_t stream) {
  launch_rule(arrays, AdamRule{coefficients}, stream);
}

void launch_sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients,
                cudaStream_t stream) {
  if (coefficients.has_momentum)
    launch_rule(arrays, SgdMomentumRule{coefficients}, stream);
  else
    launch_rule(arrays, SgdPlainRule{coefficients}, stream);
}

void launch_lamb_moments(const OptimizerArrays& a, const LambCoefficients& coefficients,
                         double* sums, cudaStream_t stream) {
  if (a.count == 0) return;
  const bool vectorized = vectorizable(a);
  const std::size_t work = vectorized ? (a.count + kVector - 1) / kVector : a.count;
  switch (a.grads_dtype) {
    case DType::kFloat32:
      lamb_moments_kernel<<<blocks_for(work), kThreads, 0, stream>>>(
          a.params, static_cast<const float*>(a.grads), a.state0, a.state1, a.count, coefficients,
          sums, vectorized);
      break;
    case DType::kBFloat16:
      lamb_moments_kernel<<<blocks_for(work), kThreads, 0, stream>>>(
          a.params, static_cast<const __nv_bfloat16*>(a.grads), a.state0, a.state1, a.count,
          coefficients, sums, vectorized);
      break;
    case DType::kFloat16:
      lamb_moments_kernel<<<blocks_for(work), kThreads, 0, stream>>>(
          a.params, static_cast<const __half*>(a.grads), a.state0, a.state1, a.count, coefficients,
          sums, vectorized);
      break;
  }
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void launch_lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay, float step,
                       cudaStream_t stream) {
  OptimizerArrays a = arrays;
  a.grads = nullptr;  // not read
  a.grads_dtype = DType::kFloat32;
  launch_rule(a, LambApplyRule{eps, weight_decay, step}, stream);
}

}  // namespace zero::cuda
