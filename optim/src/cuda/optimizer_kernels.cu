// Fused optimizer kernels and their launchers; the kernels' bodies, element rules and launch
// configuration are optimizer_body.h's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "optimizer_kernels.h"
#include "zero/core/cuda_check.h"
#include "zero/core/cuda_elements.h"

namespace zero::optim::cuda {
namespace {

using kernels::DeviceThread;

template <typename G, typename P, typename Rule>
__global__ void update_kernel(float* __restrict__ params, const G* __restrict__ grads,
                              float* __restrict__ state0, float* __restrict__ state1,
                              P* __restrict__ copy, std::size_t count, Rule rule, bool vectorized) {
  update_body(DeviceThread{}, params, grads, state0, state1, copy, count, rule, vectorized);
}

template <typename G>
__global__ void lamb_moments_kernel(const float* __restrict__ params, const G* __restrict__ grads,
                                    float* __restrict__ m, float* __restrict__ v, std::size_t count,
                                    LambCoefficients c, double* sums, bool vectorized) {
  __shared__ LambSumsShared shared;
  lamb_moments_body(DeviceThread{}, shared, params, grads, m, v, count, c, sums, vectorized);
}

template <typename G, typename P, typename Rule>
void launch_typed(const OptimizerArrays& a, const Rule& rule, cudaStream_t stream) {
  const bool vectorized = vectorizable(a);
  kernels::launch_kernel(update_kernel<G, P, Rule>, optimizer_launch(a.count, vectorized), stream,
                         a.params, static_cast<const G*>(a.grads), a.state0, a.state1,
                         static_cast<P*>(a.params_16bit), a.count, rule, vectorized);
}

template <typename G>
void launch_lamb_moments_typed(const OptimizerArrays& a, const LambCoefficients& coefficients,
                               double* sums, cudaStream_t stream) {
  const bool vectorized = vectorizable(a);
  kernels::launch_kernel(lamb_moments_kernel<G>, optimizer_launch(a.count, vectorized), stream,
                         static_cast<const float*>(a.params), static_cast<const G*>(a.grads),
                         a.state0, a.state1, a.count, coefficients, sums, vectorized);
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
// zero's conversions (the device's rounding, tested exhaustively in dtype_test).
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
  switch (a.grads_dtype) {
    case DType::kFloat32: launch_lamb_moments_typed<float>(a, coefficients, sums, stream); break;
    case DType::kBFloat16:
      launch_lamb_moments_typed<__nv_bfloat16>(a, coefficients, sums, stream);
      break;
    case DType::kFloat16: launch_lamb_moments_typed<__half>(a, coefficients, sums, stream); break;
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

}  // namespace zero::optim::cuda
