// Optimizer kernels over flat fp32 arrays: vectorised (OpenMP over contiguous chunks, each chunk
// an AVX-512/AVX2/scalar clone chosen at load time) beside scalar references used as test oracles.
//
// Determinism: every kernel gives bitwise the same result for any thread count (chunks only
// decide who computes an element, never how; Lamb's sums of squares are taken over fixed blocks
// of kSumBlockElements and added in block order), and the element-wise kernels (Adam, SGD,
// lamb_apply) are bitwise equal to their scalar references (no contraction into FMA: the vector
// body, the tail and the reference do the same IEEE operations in the same order).
#pragma once

#include <cstddef>
#include <cstdint>

#include "zero/core/dtype.h"

namespace zero::optim {

// The threads a kernel uses when its hyperparameters say `threads = 0` (the default), resolved
// on every call: ZERO_CPU_OPTIMIZER_THREADS when set (a positive integer; each process reads its
// own environment, so each local rank can be given its own count), else OpenMP's count for the
// calling thread (omp_get_max_threads(): OMP_NUM_THREADS, or the CPUs the process started with)
// capped at the CPUs the calling thread may run on now (after zero::bind_cores_to_rank, this
// local rank's share). Throws zero::Error naming the variable when its value is not a positive
// integer. The worker threads of a kernel are kept inside the calling thread's CPU set (a worker
// found outside it, e.g. one OpenMP started before the binding, is moved in), so the optimizer
// stays on its local rank's cores.
int cpu_optimizer_threads();
// The rule above without the environment: `setting` is the variable's value (null when unset).
int resolve_cpu_optimizer_threads(const char* setting, int openmp_threads, int allowed_cpus);

// Shards below this many elements per thread run on fewer threads (one for < 2 × this).
inline constexpr std::size_t kMinElementsPerThread = std::size_t{1} << 14;
// Lamb's sums of squares: per block of this many elements (8 lane sums, element i in lane i mod 8,
// added in lane order), then the blocks in order.
inline constexpr std::size_t kSumBlockElements = 4096;

struct AdamHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool adam_w_mode = true;  // decoupled decay (AdamW) vs L2 added to the gradient (Adam)
  bool bias_correction = true;
  std::int64_t step = 1;    // 1-based count of steps taken, including this one
  double grad_scale = 1.0;  // gradients are multiplied by this first
  int threads = 0;          // 0: cpu_optimizer_threads()
};

// One Adam/AdamW step, DeepSpeed cpu_adam's arithmetic (= torch.optim.Adam/AdamW):
//   g = scale·grad (+ wd·p if !adam_w_mode); m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²
//   p -= lr·wd·p (adam_w_mode); p -= (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps)
void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
               std::size_t count, const AdamHyperparams& hyper);
void adam_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const AdamHyperparams& hyper);
// adam_step that also writes the updated parameters as `half_dtype` (kBFloat16 or kFloat16,
// rounded to nearest even as zero::convert) into `half_params` (count 16-bit values) in the same
// pass: bitwise the same as adam_step followed by convert(). Throws zero::Error for kFloat32.
void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
               std::size_t count, const AdamHyperparams& hyper, void* half_params,
               DType half_dtype);

struct SgdHyperparams {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool first_step = true;  // the momentum buffer starts as the first gradient (torch.optim.SGD)
  double grad_scale = 1.0;
  int threads = 0;  // 0: cpu_optimizer_threads()
};

// torch.optim.SGD: g = scale·grad + wd·p; buf = g (first) or μ buf + (1-dampening) g;
// g = g + μ buf (nesterov) or buf; p -= lr g. `momentum_buffer` may be null when μ = 0.
void sgd_step(float* params, const float* grads, float* momentum_buffer, std::size_t count,
              const SgdHyperparams& hyper);
void sgd_step_reference(float* params, const float* grads, float* momentum_buffer,
                        std::size_t count, const SgdHyperparams& hyper);
// sgd_step that also writes the updated parameters as `half_dtype` into `half_params`, as the
// fused adam_step does.
void sgd_step(float* params, const float* grads, float* momentum_buffer, std::size_t count,
              const SgdHyperparams& hyper, void* half_params, DType half_dtype);

struct LambHyperparams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  std::int64_t step = 1;
  double grad_scale = 1.0;
  double max_coeff = 10.0;
  double min_coeff = 0.01;
  int threads = 0;  // 0: cpu_optimizer_threads()
};

// Lamb with DeepSpeed FusedLamb's arithmetic (eps outside the sqrt), in two passes so per-tensor
// norms can be all-reduced between them: pass 1 updates the moments (as Adam) and returns Σp² and
// Σu² of the update u = m / (sqrt(v) + eps) + wd·p; pass 2 applies
// p -= step_size · clamp(‖p‖/‖u‖, min_coeff, max_coeff) · u, with step_size = lr·sqrt(bc2)/bc1
// (lr without bias correction) and coefficient 1 when either norm is 0.
struct SumsOfSquares {
  double params = 0.0;
  double update = 0.0;
};
SumsOfSquares lamb_moments(const float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, std::size_t count, const LambHyperparams& hyper);
void lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                const LambHyperparams& hyper, double trust_ratio);
// lamb_apply that also writes the updated parameters as `half_dtype` into `half_params`, as the
// fused adam_step does.
void lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                const LambHyperparams& hyper, double trust_ratio, void* half_params,
                DType half_dtype);
// The trust ratio from the global sums of squares of one tensor.
double lamb_trust_ratio(double params_sum_of_squares, double update_sum_of_squares,
                        const LambHyperparams& hyper);
// Whole-tensor scalar reference of one Lamb step (unsharded).
void lamb_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const LambHyperparams& hyper);

}  // namespace zero::optim
