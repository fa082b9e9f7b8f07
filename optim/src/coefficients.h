// The per-step coefficients of optim/'s kernels, computed once on the host from the
// hyperparameters (double arithmetic, rounded to float once), so the CPU kernels (kernels.cc) and
// the CUDA ones (cuda/) read the same values. Defined in kernels.cc, which compiles without FMA
// contraction. Internal; C++17 so nvcc compiles it.
#pragma once

#include "zero/optim/kernels.h"

namespace zero::optim {

// g = grad·grad_scale + l2·p; m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²;
// p = p·decay - step_size · m / (sqrt(v)·inv_sqrt_bc2 + eps)
// The term a mode does not use is neutral (AdamW: l2 = 0; Adam: decay = 1), so a kernel may apply
// both (the CUDA rule) or only its mode's (the CPU clones, templated on it): the same arithmetic.
struct AdamCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float step_size;     // lr / bc1
  float inv_sqrt_bc2;  // 1 / sqrt(bc2)
  float decay;         // 1 - lr·wd (AdamW) or 1
  float l2;            // wd (Adam) or 0
  float grad_scale;
};
AdamCoefficients adam_coefficients(const AdamHyperparams& hyper);

// torch.optim.SGD: g = grad·grad_scale + wd·p; buf = g (first) or μ buf + (1-dampening) g;
// p -= lr · (nesterov ? g + μ buf : buf); without momentum p -= lr · g.
struct SgdCoefficients {
  float lr, momentum, one_minus_dampening, weight_decay, grad_scale;
  bool has_momentum;
  bool first_step;
  bool nesterov;
};
SgdCoefficients sgd_coefficients(const SgdHyperparams& hyper);

// Lamb pass 1: moments as Adam (no bias correction inside), u = m / (sqrt(v) + eps) + wd·p.
struct LambCoefficients {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, weight_decay, grad_scale;
};
LambCoefficients lamb_coefficients(const LambHyperparams& hyper);
// Lamb pass 2's step before the trust ratio: lr·sqrt(bc2)/bc1 (lr without bias correction).
double lamb_step_size(const LambHyperparams& hyper);

}  // namespace zero::optim
