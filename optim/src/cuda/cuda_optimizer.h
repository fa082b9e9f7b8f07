// optim/'s optimizers on a CUDA context: a step's coefficients (the CPU kernels' own,
// coefficients.h), the chunks' checks and Lamb's per-tensor norms between its two passes, with the
// passes run as the fused kernels of optimizer_kernels.cu on the context's stream, or as their
// host twins so the whole step is testable without a device (internal).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "optimizer_body.h"
#include "zero/core/device_context.h"
#include "zero/core/optimizer.h"
#include "zero/optim/kernels.h"

namespace zero::optim::cuda {

// Where the passes of a step run: the device (kernels on a stream) or the host (the kernels'
// element rules in host loops). Everything else in a step is shared.
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

// The fused kernels on `stream` of CUDA `context` (its cudaStream_t), Lamb's scratch from the
// context's device and pinned allocators (OptimizerStep::all_reduce_sum gets page-locked host
// memory, which host and device can address).
std::unique_ptr<Passes> device_passes(DeviceContext& context, Stream& stream);
// The kernels' host twins (optimizer_kernels.h) over host memory, at once.
std::unique_ptr<Passes> host_passes();

// One step of Adam/AdamW, SGD or Lamb with this step's `hyper` through `passes`; `optimizer`
// names it in errors. Adam/AdamW and SGD are one pass per chunk, no host wait. Lamb runs pass 1
// per tensor segment, waits on the host for the per-segment norms (the trust ratios need them
// all-reduced), then pass 2 per segment. Throws zero::Error for a chunk the kernels cannot take
// (no params, both or neither gradient field, a 16-bit field of dtype fp32, no state, a segment
// past its end).
void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep& step, const AdamHyperparams& hyper);
void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep& step, const SgdHyperparams& hyper);
void fused_step(Passes& passes, std::string_view optimizer, std::span<ShardChunk> chunks,
                const OptimizerStep& step, const LambHyperparams& hyper);

}  // namespace zero::optim::cuda
