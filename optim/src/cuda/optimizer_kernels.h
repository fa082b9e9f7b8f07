// Fused optimizer kernels over flat fp32 shards (optimizer_kernels.cu): Adam/AdamW, SGD with
// momentum, Lamb's two passes. One pass reads the gradient (fp32 or 16-bit, unscale/clip factor
// folded in), updates the fp32 master parameters and moments in place and writes an optional
// 16-bit copy of the parameters. The coefficients are the CPU kernels' own (coefficients.h), so the
// element arithmetic is theirs (internal; C++17 so nvcc compiles it).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "optimizer_body.h"
#include "zero/core/dtype.h"

namespace zero::optim::cuda {

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
// HostPasses).
void host_adam(const OptimizerArrays& arrays, const AdamCoefficients& coefficients);
void host_sgd(const OptimizerArrays& arrays, const SgdCoefficients& coefficients);
// sums[0] += Σ p², sums[1] += Σ u² (host doubles, element order).
void host_lamb_moments(const OptimizerArrays& arrays, const LambCoefficients& coefficients,
                       double* sums);
void host_lamb_apply(const OptimizerArrays& arrays, float eps, float weight_decay, float step);

}  // namespace zero::optim::cuda
