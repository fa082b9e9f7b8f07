// Optimizer kernels: one OpenMP region over contiguous chunks, each chunk run by a function the
// compiler clones for AVX-512, AVX2 and plain x86-64 (vector main loop, scalar tail), picked at
// load time. Scalar references beside them are the test oracles.
#include "zero/optim/kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace zero::optim {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZERO_SIMD_CLONES \
  __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#else
#define ZERO_SIMD_CLONES
#endif

constexpr std::size_t kMinChunk = 1 << 14;  // below this, threads cost more than they save
constexpr std::size_t kChunkAlign = 16;     // chunk starts on 64-byte boundaries

// Calls body(begin, end, thread) on disjoint chunks covering [0, count), one per thread.
template <typename Body>
void for_chunks(std::size_t count, int max_threads, Body&& body) {
  const int threads =
      static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(1, max_threads)),
                                             std::max<std::size_t>(1, count / kMinChunk)));
  if (threads <= 1) {
    body(std::size_t{0}, count, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const auto thread = static_cast<std::size_t>(omp_get_thread_num());
    const auto team = static_cast<std::size_t>(omp_get_num_threads());
    std::size_t per = (count + team - 1) / team;
    per = (per + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
    const std::size_t begin = std::min(count, thread * per);
    const std::size_t end = std::min(count, begin + per);
    body(begin, end, static_cast<int>(thread));
  }
}

struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;     // lr / bc1
  float inv_sqrt_bc2;  // 1 / sqrt(bc2)
  float decay;         // 1 - lr·wd (AdamW) or 1
  float l2;            // wd (Adam) or 0
  float grad_scale;
};

AdamCoefficients adam_coefficients(const AdamHyperparams& h) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  return {static_cast<float>(h.beta1),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),
          static_cast<float>(h.lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          static_cast<float>(h.adam_w_mode ? 1.0 - h.lr * h.weight_decay : 1.0),
          static_cast<float>(h.adam_w_mode ? 0.0 : h.weight_decay),
          static_cast<float>(h.grad_scale)};
}

ZERO_SIMD_CLONES
void adam_chunk(float* __restrict params, const float* __restrict grads, float* __restrict m,
                float* __restrict v, std::size_t count, AdamCoefficients c) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale + c.l2 * params[i];
    const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps;
    params[i] = params[i] * c.decay - c.step_size * (mi / denom);
  }
}

struct SgdCoefficients {
  float lr, momentum, one_minus_dampening, weight_decay, grad_scale;
};

ZERO_SIMD_CLONES
void sgd_plain_chunk(float* __restrict params, const float* __restrict grads, std::size_t count,
                     SgdCoefficients c) {
  for (std::size_t i = 0; i < count; ++i)
    params[i] -= c.lr * (grads[i] * c.grad_scale + c.weight_decay * params[i]);
}

ZERO_SIMD_CLONES
void sgd_momentum_chunk(float* __restrict params, const float* __restrict grads,
                        float* __restrict buffer, std::size_t count, SgdCoefficients c, bool first,
                        bool nesterov) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale + c.weight_decay * params[i];
    const float b = first ? g : c.momentum * buffer[i] + c.one_minus_dampening * g;
    buffer[i] = b;
    params[i] -= c.lr * (nesterov ? g + c.momentum * b : b);
  }
}

struct LambCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, grad_scale;
};

LambCoefficients lamb_coefficients(const LambHyperparams& h) {
  return {static_cast<float>(h.beta1),     static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),     static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),       static_cast<float>(h.weight_decay),
          static_cast<float>(h.grad_scale)};
}

double lamb_step_size(const LambHyperparams& h) {
  if (!h.bias_correction) return h.lr;
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  return h.lr * std::sqrt(bc2) / bc1;
}

ZERO_SIMD_CLONES
void lamb_moments_chunk(const float* __restrict params, const float* __restrict grads,
                        float* __restrict m, float* __restrict v, std::size_t count,
                        LambCoefficients c, double* params_sum, double* update_sum) {
  double sp = 0.0, su = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale;
    const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float u = mi / (std::sqrt(vi) + c.eps) + c.weight_decay * params[i];
    sp += static_cast<double>(params[i]) * params[i];
    su += static_cast<double>(u) * u;
  }
  *params_sum = sp;
  *update_sum = su;
}

ZERO_SIMD_CLONES
void lamb_apply_chunk(float* __restrict params, const float* __restrict m,
                      const float* __restrict v, std::size_t count, float eps, float weight_decay,
                      float step) {
  for (std::size_t i = 0; i < count; ++i) {
    const float u = m[i] / (std::sqrt(v[i]) + eps) + weight_decay * params[i];
    params[i] -= step * u;
  }
}

}  // namespace

void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
               std::size_t count, const AdamHyperparams& hyper) {
  const AdamCoefficients c = adam_coefficients(hyper);
  for_chunks(count, omp_get_max_threads(), [&](std::size_t begin, std::size_t end, int) {
    adam_chunk(params + begin, grads + begin, exp_avg + begin, exp_avg_sq + begin, end - begin, c);
  });
}

void adam_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const AdamHyperparams& h) {
  const AdamCoefficients c = adam_coefficients(h);
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] * c.grad_scale;
    if (!h.adam_w_mode) g += c.l2 * params[i];
    exp_avg[i] = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
    exp_avg_sq[i] = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
    const float denom = std::sqrt(exp_avg_sq[i]) * c.inv_sqrt_bc2 + c.eps;
    if (h.adam_w_mode) params[i] *= c.decay;
    params[i] -= c.step_size * (exp_avg[i] / denom);
  }
}

void sgd_step(float* params, const float* grads, float* momentum_buffer, std::size_t count,
              const SgdHyperparams& h) {
  const SgdCoefficients c{static_cast<float>(h.lr), static_cast<float>(h.momentum),
                          static_cast<float>(1.0 - h.dampening), static_cast<float>(h.weight_decay),
                          static_cast<float>(h.grad_scale)};
  for_chunks(count, omp_get_max_threads(), [&](std::size_t begin, std::size_t end, int) {
    if (h.momentum == 0.0)
      sgd_plain_chunk(params + begin, grads + begin, end - begin, c);
    else
      sgd_momentum_chunk(params + begin, grads + begin, momentum_buffer + begin, end - begin, c,
                         h.first_step, h.nesterov);
  });
}

void sgd_step_reference(float* params, const float* grads, float* momentum_buffer,
                        std::size_t count, const SgdHyperparams& h) {
  const auto lr = static_cast<float>(h.lr), mu = static_cast<float>(h.momentum);
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] * static_cast<float>(h.grad_scale) +
              static_cast<float>(h.weight_decay) * params[i];
    if (h.momentum != 0.0) {
      momentum_buffer[i] =
          h.first_step ? g : mu * momentum_buffer[i] + static_cast<float>(1.0 - h.dampening) * g;
      g = h.nesterov ? g + mu * momentum_buffer[i] : momentum_buffer[i];
    }
    params[i] -= lr * g;
  }
}

SumsOfSquares lamb_moments(const float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, std::size_t count, const LambHyperparams& hyper) {
  const LambCoefficients c = lamb_coefficients(hyper);
  const int threads = omp_get_max_threads();
  std::vector<double> params_sums(static_cast<std::size_t>(threads), 0.0);
  std::vector<double> update_sums(static_cast<std::size_t>(threads), 0.0);
  for_chunks(count, threads, [&](std::size_t begin, std::size_t end, int thread) {
    lamb_moments_chunk(params + begin, grads + begin, exp_avg + begin, exp_avg_sq + begin,
                       end - begin, c, &params_sums[thread], &update_sums[thread]);
  });
  SumsOfSquares sums;
  for (int t = 0; t < threads; ++t) {  // fixed order: deterministic for a thread count
    sums.params += params_sums[t];
    sums.update += update_sums[t];
  }
  return sums;
}

double lamb_trust_ratio(double params_sum_of_squares, double update_sum_of_squares,
                        const LambHyperparams& hyper) {
  const double w_norm = std::sqrt(params_sum_of_squares);
  const double u_norm = std::sqrt(update_sum_of_squares);
  if (w_norm == 0.0 || u_norm == 0.0) return 1.0;
  return std::clamp(w_norm / u_norm, hyper.min_coeff, hyper.max_coeff);
}

void lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                const LambHyperparams& hyper, double trust_ratio) {
  const auto step = static_cast<float>(lamb_step_size(hyper) * trust_ratio);
  const auto eps = static_cast<float>(hyper.eps);
  const auto decay = static_cast<float>(hyper.weight_decay);
  for_chunks(count, omp_get_max_threads(), [&](std::size_t begin, std::size_t end, int) {
    lamb_apply_chunk(params + begin, exp_avg + begin, exp_avg_sq + begin, end - begin, eps, decay,
                     step);
  });
}

void lamb_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const LambHyperparams& h) {
  const LambCoefficients c = lamb_coefficients(h);
  std::vector<float> update(count);
  double sp = 0.0, su = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale;
    exp_avg[i] = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
    exp_avg_sq[i] = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
    update[i] = exp_avg[i] / (std::sqrt(exp_avg_sq[i]) + c.eps) + c.weight_decay * params[i];
    sp += static_cast<double>(params[i]) * params[i];
    su += static_cast<double>(update[i]) * update[i];
  }
  const auto step = static_cast<float>(lamb_step_size(h) * lamb_trust_ratio(sp, su, h));
  for (std::size_t i = 0; i < count; ++i) params[i] -= step * update[i];
}

}  // namespace zero::optim
