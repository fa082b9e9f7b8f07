// Plain scalar GPT-2 kernels, templated on the element type (float or double): the oracle the
// optimised kernels of layers_cpu.h are tested against, and (in double) the subject of the
// finite-difference gradient checks (matmul sums in double even for float, as an oracle should).
// Same shapes, conventions and dropout masks as layers_cpu.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "zero/gpt2/cached_attention.h"
#include "zero/gpt2/rng.h"
#include "zero/gpt2/rope.h"

namespace zero::gpt2::reference {

template <typename Real>
Real dropout_factor(const DropoutSite& dropout, std::int64_t b, std::int64_t t,
                    std::uint64_t element) {
  if (!dropout.active()) return Real(1);
  return dropout.keep(dropout.row_key(b, t), element)
             ? Real(1) / (Real(1) - Real(dropout.probability))
             : Real(0);
}

template <typename Real>
void encoder_forward(Real* out, const int* tokens, const Real* wte, const Real* wpe, std::int64_t B,
                     std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c)
        out[(b * T + t) * C + c] =
            (wte[tokens[b * T + t] * C + c] + (wpe != nullptr ? wpe[t * C + c] : Real(0))) *
            dropout_factor<Real>(dropout, b, t, c);
}

template <typename Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const int* tokens, std::int64_t B,
                      std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const Real g = dout[(b * T + t) * C + c] * dropout_factor<Real>(dropout, b, t, c);
        dwte[tokens[b * T + t] * C + c] += g;
        if (dwpe != nullptr) dwpe[t * C + c] += g;
      }
}

template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                       const Real* bias, std::int64_t N, std::int64_t C, Real epsilon) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = inp + i * C;
    Real m = 0;
    for (std::int64_t c = 0; c < C; ++c) m += x[c];
    m /= Real(C);
    Real v = 0;
    for (std::int64_t c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    const Real s = Real(1) / std::sqrt(v / Real(C) + epsilon);
    for (std::int64_t c = 0; c < C; ++c) out[i * C + c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename Real>
void layernorm_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                        const Real* weight, const Real* mean, const Real* rstd, std::int64_t N,
                        std::int64_t C) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* d = dout + i * C;
    const Real* x = inp + i * C;
    Real dnorm_mean = 0, dnorm_norm_mean = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const Real norm = (x[c] - mean[i]) * rstd[i];
      dnorm_mean += weight[c] * d[c];
      dnorm_norm_mean += weight[c] * d[c] * norm;
    }
    dnorm_mean /= Real(C);
    dnorm_norm_mean /= Real(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const Real norm = (x[c] - mean[i]) * rstd[i];
      dbias[c] += d[c];
      dweight[c] += norm * d[c];
      dinp[i * C + c] += (weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * rstd[i];
    }
  }
}

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, const Real* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t o = 0; o < OC; ++o) {
      double sum = bias != nullptr ? bias[o] : Real(0);
      for (std::int64_t c = 0; c < C; ++c) sum += double(inp[i * C + c]) * weight[c * OC + o];
      out[i * OC + o] = Real(sum);
    }
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                     const Real* weight, std::int64_t N, std::int64_t C, std::int64_t OC) {
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t c = 0; c < C; ++c) {
      double sum = 0;
      for (std::int64_t o = 0; o < OC; ++o) sum += double(dout[i * OC + o]) * weight[c * OC + o];
      if (dinp != nullptr) dinp[i * C + c] = Real(sum);
    }
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t o = 0; o < OC; ++o) {
      double sum = 0;
      for (std::int64_t i = 0; i < N; ++i) sum += double(inp[i * C + c]) * dout[i * OC + o];
      dweight[c * OC + o] += Real(sum);
    }
  if (dbias != nullptr)
    for (std::int64_t o = 0; o < OC; ++o)
      for (std::int64_t i = 0; i < N; ++i) dbias[o] += dout[i * OC + o];
}

template <typename Real>
void attention_forward(Real* out, Real* att, const Real* qkv, std::int64_t B, std::int64_t T,
                       std::int64_t C, std::int64_t NH, const DropoutSite& dropout) {
  const std::int64_t HS = C / NH;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        Real* a = att + ((b * NH + h) * T + t) * T;
        Real max = -INFINITY;
        for (std::int64_t u = 0; u <= t; ++u) {
          Real dot = 0;
          for (std::int64_t i = 0; i < HS; ++i)
            dot +=
                qkv[(b * T + t) * 3 * C + h * HS + i] * qkv[(b * T + u) * 3 * C + C + h * HS + i];
          a[u] = dot * scale;
          if (a[u] > max) max = a[u];
        }
        Real sum = 0;
        for (std::int64_t u = 0; u <= t; ++u) sum += a[u] = std::exp(a[u] - max);
        for (std::int64_t u = 0; u < T; ++u) a[u] = u <= t ? a[u] / sum : Real(0);
        for (std::int64_t i = 0; i < HS; ++i) {
          Real y = 0;
          for (std::int64_t u = 0; u <= t; ++u)
            y += a[u] * dropout_factor<Real>(dropout, b, t, h * T + u) *
                 qkv[(b * T + u) * 3 * C + 2 * C + h * HS + i];
          out[(b * T + t) * C + h * HS + i] = y;
        }
      }
}

template <typename Real>
void attention_backward(Real* dqkv, Real* datt, const Real* dout, const Real* qkv, const Real* att,
                        std::int64_t B, std::int64_t T, std::int64_t C, std::int64_t NH,
                        const DropoutSite& dropout) {
  const std::int64_t HS = C / NH;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  for (std::int64_t i = 0; i < B * T * 3 * C; ++i) dqkv[i] = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        const Real* a = att + ((b * NH + h) * T + t) * T;
        Real* da = datt + ((b * NH + h) * T + t) * T;
        const Real* dy = dout + (b * T + t) * C + h * HS;
        for (std::int64_t u = 0; u <= t; ++u) {
          const Real factor = dropout_factor<Real>(dropout, b, t, h * T + u);
          Real dot = 0;
          for (std::int64_t i = 0; i < HS; ++i) {
            dot += dy[i] * qkv[(b * T + u) * 3 * C + 2 * C + h * HS + i];
            dqkv[(b * T + u) * 3 * C + 2 * C + h * HS + i] += a[u] * factor * dy[i];
          }
          da[u] = dot * factor;
        }
        Real dot_sum = 0;
        for (std::int64_t u = 0; u <= t; ++u) dot_sum += a[u] * da[u];
        for (std::int64_t u = 0; u <= t; ++u) {
          const Real dpre = a[u] * (da[u] - dot_sum) * scale;
          for (std::int64_t i = 0; i < HS; ++i) {
            dqkv[(b * T + t) * 3 * C + h * HS + i] +=
                dpre * qkv[(b * T + u) * 3 * C + C + h * HS + i];
            dqkv[(b * T + u) * 3 * C + C + h * HS + i] +=
                dpre * qkv[(b * T + t) * 3 * C + h * HS + i];
          }
        }
      }
}

// What the log-sum-exp attention (layers_cpu.h flash_attention_forward) keeps: lse (B, NH, T) =
// log Σ_{u <= t} exp(q(t)·k(u) / √HS) per (b, h, t), the products and sums in double.
template <typename Real>
void attention_logsumexp(Real* lse, const Real* qkv, std::int64_t B, std::int64_t T, std::int64_t C,
                         std::int64_t NH) {
  const std::int64_t HS = C / NH;
  std::vector<double> s(static_cast<std::size_t>(T));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < NH; ++h)
      for (std::int64_t t = 0; t < T; ++t) {
        double max = -INFINITY;
        for (std::int64_t u = 0; u <= t; ++u) {
          double dot = 0;
          for (std::int64_t i = 0; i < HS; ++i)
            dot += double(qkv[(b * T + t) * 3 * C + h * HS + i]) *
                   qkv[(b * T + u) * 3 * C + C + h * HS + i];
          s[u] = dot / std::sqrt(double(HS));
          max = std::max(max, s[u]);
        }
        double sum = 0;
        for (std::int64_t u = 0; u <= t; ++u) sum += std::exp(s[u] - max);
        lse[(b * NH + h) * T + t] = Real(max + std::log(sum));
      }
}

template <typename Real>
Real gelu(Real x) {
  const Real s = std::sqrt(Real(2) / Real(3.141592653589793));
  return Real(0.5) * x * (Real(1) + std::tanh(s * (x + Real(0.044715) * x * x * x)));
}

template <typename Real>
void gelu_forward(Real* out, const Real* inp, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = gelu(inp[i]);
}

template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, std::int64_t n) {
  const Real s = std::sqrt(Real(2) / Real(3.141592653589793));
  for (std::int64_t i = 0; i < n; ++i) {
    const Real x = inp[i];
    const Real th = std::tanh(s * (x + Real(0.044715) * x * x * x));
    const Real local = Real(0.5) * (Real(1) + th) + Real(0.5) * x * (Real(1) - th * th) * s *
                                                        (Real(1) + Real(3 * 0.044715) * x * x);
    dinp[i] = local * dout[i];
  }
}

template <typename Real>
void residual_dropout_forward(Real* out, const Real* residual, const Real* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t i = (b * T + t) * C + c;
        out[i] = residual[i] + inp[i] * dropout_factor<Real>(dropout, b, t, c);
      }
}

template <typename Real>
void dropout_backward(Real* dinp, const Real* dout, std::int64_t B, std::int64_t T, std::int64_t C,
                      const DropoutSite& dropout) {
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < C; ++c) {
        const std::int64_t i = (b * T + t) * C + c;
        dinp[i] = dout[i] * dropout_factor<Real>(dropout, b, t, c);
      }
}

template <typename Real>
std::int64_t crossentropy_forward(Real* losses, Real* logsumexp, const Real* logits,
                                  const int* targets, std::int64_t N, std::int64_t V,
                                  std::int64_t Vp) {
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* z = logits + i * Vp;
    Real max = z[0];
    for (std::int64_t v = 1; v < V; ++v) max = z[v] > max ? z[v] : max;
    Real sum = 0;
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - max);
    logsumexp[i] = max + std::log(sum);
    const bool counts = targets[i] >= 0 && targets[i] < V;
    losses[i] = counts ? logsumexp[i] - z[targets[i]] : Real(0);
    counted += counts ? 1 : 0;
  }
  return counted;
}

template <typename Real>
void crossentropy_backward(Real* logits, const Real* logsumexp, const int* targets, std::int64_t N,
                           std::int64_t V, std::int64_t Vp, Real scale) {
  for (std::int64_t i = 0; i < N; ++i) {
    const bool counts = targets[i] >= 0 && targets[i] < V;
    for (std::int64_t v = 0; v < Vp; ++v) {
      Real& z = logits[i * Vp + v];
      if (!counts || v >= V)
        z = 0;
      else
        z = scale * (std::exp(z - logsumexp[i]) - (v == targets[i] ? Real(1) : Real(0)));
    }
  }
}

// ---- the Llama family's (layers_cpu.h's rmsnorm, rope, swiglu) ----

template <typename Real>
void rmsnorm_forward(Real* out, Real* rstd, const Real* inp, const Real* weight, std::int64_t N,
                     std::int64_t C, Real epsilon) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = inp + i * C;
    Real squares = 0;
    for (std::int64_t c = 0; c < C; ++c) squares += x[c] * x[c];
    rstd[i] = Real(1) / std::sqrt(squares / Real(C) + epsilon);
    for (std::int64_t c = 0; c < C; ++c) out[i * C + c] = x[c] * rstd[i] * weight[c];
  }
}

template <typename Real>
void rmsnorm_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp,
                      const Real* weight, const Real* rstd, std::int64_t N, std::int64_t C) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* d = dout + i * C;
    const Real* x = inp + i * C;
    const Real s = rstd[i];
    Real dot = 0;
    for (std::int64_t c = 0; c < C; ++c) dot += weight[c] * d[c] * x[c];
    for (std::int64_t c = 0; c < C; ++c) {
      dinp[i * C + c] += s * weight[c] * d[c] - x[c] * s * s * s * dot / Real(C);
      dweight[c] += d[c] * x[c] * s;
    }
  }
}

// The rotation of rope_forward (sign +1) or rope_backward (sign -1), the angles from `table`.
template <typename Real>
void rope_rotate(Real* x, const float* table, const RopeLayout& layout, Real sign) {
  const std::int64_t half = layout.head_dim / 2;
  for (std::int64_t b = 0; b < layout.B; ++b)
    for (std::int64_t t = 0; t < layout.T; ++t)
      for (std::int64_t head = 0; head < layout.heads; ++head) {
        const float* cosine = table + (layout.position_offset + t) * layout.head_dim;
        Real* v = x + (b * layout.T + t) * layout.row_stride + head * layout.head_dim;
        for (std::int64_t i = 0; i < half; ++i) {
          const Real first = v[i], second = v[i + half];
          const Real c = cosine[i], s = sign * Real(cosine[half + i]);
          v[i] = first * c - second * s;
          v[i + half] = second * c + first * s;
        }
      }
}

template <typename Real>
void rope_forward(Real* x, const float* table, const RopeLayout& layout) {
  rope_rotate(x, table, layout, Real(1));
}

template <typename Real>
void rope_backward(Real* dx, const float* table, const RopeLayout& layout) {
  rope_rotate(dx, table, layout, Real(-1));
}

template <typename Real>
Real sigmoid(Real x) {
  return Real(1) / (Real(1) + std::exp(-x));
}

template <typename Real>
void swiglu_forward(Real* out, const Real* inp, std::int64_t N, std::int64_t H) {
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const Real gate = inp[i * 2 * H + j], up = inp[i * 2 * H + H + j];
      out[i * H + j] = gate * sigmoid(gate) * up;
    }
}

template <typename Real>
void swiglu_backward(Real* dinp, const Real* dout, const Real* inp, std::int64_t N,
                     std::int64_t H) {
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t j = 0; j < H; ++j) {
      const Real gate = inp[i * 2 * H + j], up = inp[i * 2 * H + H + j], d = dout[i * H + j];
      const Real s = sigmoid(gate);
      dinp[i * 2 * H + j] = d * up * (s + gate * s * (Real(1) - s));
      dinp[i * 2 * H + H + j] = d * gate * s;
    }
}

// Grouped-query attention's repetition (kernels.h repeat_kv_*), one element at a time.
template <typename Real>
void repeat_kv_forward(Real* heads, const Real* qkv, std::int64_t N, std::int64_t NH,
                       std::int64_t KVH, std::int64_t HS) {
  const std::int64_t group = NH / KVH;
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t h = 0; h < 3 * NH; ++h) {
      const std::int64_t part = h / NH, head = h % NH;
      const std::int64_t source = part == 0 ? head : NH + (part - 1) * KVH + head / group;
      for (std::int64_t c = 0; c < HS; ++c)
        heads[(i * 3 * NH + h) * HS + c] = qkv[(i * (NH + 2 * KVH) + source) * HS + c];
    }
}

template <typename Real>
void repeat_kv_backward(Real* dqkv, const Real* dheads, std::int64_t N, std::int64_t NH,
                        std::int64_t KVH, std::int64_t HS) {
  const std::int64_t group = NH / KVH, width = NH + 2 * KVH;
  for (std::int64_t i = 0; i < N * width * HS; ++i) dqkv[i] = Real(0);
  for (std::int64_t i = 0; i < N; ++i)
    for (std::int64_t h = 0; h < 3 * NH; ++h) {
      const std::int64_t part = h / NH, head = h % NH;
      const std::int64_t target = part == 0 ? head : NH + (part - 1) * KVH + head / group;
      for (std::int64_t c = 0; c < HS; ++c)
        dqkv[(i * width + target) * HS + c] += dheads[(i * 3 * NH + h) * HS + c];
    }
}

// Attention over a KV cache (cached_attention.h), one query row and head at a time, summed in
// Real; the pointers of `call` are fp32 as the kernels' are.
template <typename Real>
void cached_attention_forward(const CachedAttention& call) {
  const std::int64_t group = call.NH / call.KVH, HS = call.HS;
  const Real scale = Real(1) / std::sqrt(Real(HS));
  for (std::int64_t i = 0; i < call.Q; ++i)
    for (std::int64_t h = 0; h < call.NH; ++h) {
      const float* q = call.q + i * call.q_stride + h * HS;
      const float* keys = call.keys + (h / group) * call.max_positions * HS;
      const float* values = call.values + (h / group) * call.max_positions * HS;
      const std::int64_t positions = call.first_position + i + 1;
      Real max = -INFINITY, sum = 0;
      for (std::int64_t t = 0; t < positions; ++t) {
        Real dot = 0;
        for (std::int64_t c = 0; c < HS; ++c) dot += Real(q[c]) * Real(keys[t * HS + c]);
        max = std::max(max, dot * scale);
      }
      std::vector<Real> weights(static_cast<std::size_t>(positions));
      for (std::int64_t t = 0; t < positions; ++t) {
        Real dot = 0;
        for (std::int64_t c = 0; c < HS; ++c) dot += Real(q[c]) * Real(keys[t * HS + c]);
        sum += weights[t] = std::exp(dot * scale - max);
      }
      float* y = call.out + (i * call.NH + h) * HS;
      for (std::int64_t c = 0; c < HS; ++c) {
        Real value = 0;
        for (std::int64_t t = 0; t < positions; ++t) value += weights[t] * Real(values[t * HS + c]);
        y[c] = static_cast<float>(value / sum);
      }
    }
}

}  // namespace zero::gpt2::reference
