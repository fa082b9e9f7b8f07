// Fused optimizer kernels over flat fp32 shards (optimizer_kernels.cu): Adam/AdamW, SGD with
// momentum, Lamb's two passes. One pass reads the gradient (fp32 or 16-bit, unscale/clip factor
// folded in), updates the fp32 master parameters and moments in place and writes an optional
// 16-bit copy of the parameters. The coefficients are computed on the host exactly as
// optim/src/kernels.cc computes them, so the element arithmetic is the CPU kernels' (internal;
// C++17 so nvcc compiles it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "zero/core/dtype.h"

namespace zero::cuda {

// g = grad·grad_scale + l2·p; m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²;
// p = p·decay - step_size · m / (sqrt(v)·inv_sqrt_bc2 + eps)
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;     // lr / bc1
  float inv_sqrt_bc2;  // 1 / sqrt(bc2)
  float decay;         // 1 - lr·wd (AdamW) or 1
  float l2;            // wd (Adam) or 0
  float grad_scale;
};

// torch.optim.SGD: g = grad·grad_scale + wd·p; buf = g (first) or μ buf + (1-dampening) g;
// p -= lr · (nesterov ? g + μ buf : buf); without momentum p -= lr · g.
struct SgdCoefficients {
  float lr, momentum, one_minus_dampening, weight_decay, grad_scale;
  bool has_momentum;
  bool first_step;
  bool nesterov;
};

// Lamb pass 1: moments as Adam (no bias correction inside), u = m / (sqrt(v) + eps) + wd·p.
struct LambCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, grad_scale;
};

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

// Each launch checks cudaGetLastError and throws zero::Error on a launch failure.
void launch_adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients,
                 cudaStream_t stream);
void launch_sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients,
                cudaStream_t stream);
// Lamb pass 1: updates the moments; sums[0] += Σ p², sums[1] += Σ u² (two device doubles the
// caller zeroes on the same stream; summed in double, in an order that varies run to run).
void launch_lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                         double* sums, cudaStream_t stream);
// Lamb pass 2: p -= step · (m / (sqrt(v) + eps) + wd·p), and the 16-bit copy.
void launch_lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay, float step,
                       cudaStream_t stream);

// Host twins of the passes above (host memory): the kernels' own element rules in their scalar
// order, so the host-side arithmetic of a device step (coefficients, expressions, 16-bit
// handling, Lamb's bookkeeping) is testable without a device (cuda_optimizer.h's
// optimizer_step_on_host).
void host_adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients);
void host_sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients);
// sums[0] += Σ p², sums[1] += Σ u² (host doubles, element order).
void host_lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                       double* sums);
void host_lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay, float step);

}  // namespace zero::cuda
