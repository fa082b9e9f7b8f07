// GPT-2 CPU layer kernels except attention: embeddings, layer norm, matmul, GELU, residual with
// dropout, cross-entropy. OpenMP over rows (or over channel blocks where rows would race).
// GCC 12 reports false maybe-uninitialized warnings inside Eigen's AVX-512 packet math.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "zero/gpt2/layers_cpu.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

namespace zero::gpt2::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < B * T; ++row) {
    const std::int64_t b = row / T, t = row % T;
    const float* token_row = wte + static_cast<std::int64_t>(tokens[row]) * C;
    float* out_row = out + row * C;
    if (wpe != nullptr) {
      const float* position_row = wpe + t * C;
      for (std::int64_t c = 0; c < C; ++c) out_row[c] = token_row[c] + position_row[c];
    } else {
      std::copy(token_row, token_row + C, out_row);
    }
    if (dropout.active()) {
      const std::uint64_t key = dropout.row_key(b, t);
      const float scale = dropout.scale();
      for (std::int64_t c = 0; c < C; ++c)
        out_row[c] = dropout.keep(key, c) ? out_row[c] * scale : 0.0f;
    }
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
  const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
  const float scale = dropout.active() ? dropout.scale() : 1.0f;
#pragma omp parallel for schedule(static)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t c0 = block * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    for (std::int64_t row = 0; row < B * T; ++row) {
      const std::int64_t b = row / T, t = row % T;
      const float* d = dout + row * C;
      float* token_row = dwte + static_cast<std::int64_t>(tokens[row]) * C;
      float* position_row = dwpe != nullptr ? dwpe + t * C : nullptr;
      if (!dropout.active()) {
        for (std::int64_t c = c0; c < c1; ++c) token_row[c] += d[c];
        if (position_row != nullptr)
          for (std::int64_t c = c0; c < c1; ++c) position_row[c] += d[c];
      } else {
        const std::uint64_t key = dropout.row_key(b, t);
        for (std::int64_t c = c0; c < c1; ++c) {
          const float g = dropout.keep(key, c) ? d[c] * scale : 0.0f;
          token_row[c] += g;
          if (position_row != nullptr) position_row[c] += g;
        }
      }
    }
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C, float epsilon) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < N; ++row) {
    const float* x = inp + row * C;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (std::int64_t c = 0; c < C; ++c) sum += x[c];
    const float m = sum / static_cast<float>(C);
    float variance_sum = 0.0f;
#pragma omp simd reduction(+ : variance_sum)
    for (std::int64_t c = 0; c < C; ++c) {
      const float shifted = x[c] - m;
      variance_sum += shifted * shifted;
    }
    const float s = 1.0f / std::sqrt(variance_sum / static_cast<float>(C) + epsilon);
    float* y = out + row * C;
    for (std::int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[row] = m;
    rstd[row] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C) {
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < N; ++row) {
      const float* d = dout + row * C;
      const float* x = inp + row * C;
      const float m = mean[row], s = rstd[row];
      float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
      for (std::int64_t c = 0; c < C; ++c) {
        const float dnorm = weight[c] * d[c];
        dnorm_mean += dnorm;
        dnorm_norm_mean += dnorm * (x[c] - m) * s;
      }
      dnorm_mean /= static_cast<float>(C);
      dnorm_norm_mean /= static_cast<float>(C);
      float* dx = dinp + row * C;
      for (std::int64_t c = 0; c < C; ++c) {
        const float norm = (x[c] - m) * s;
        dx[c] += (weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
      }
    }
    const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp for schedule(static)
    for (std::int64_t block = 0; block < blocks; ++block) {
      const std::int64_t c0 = block * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
      float weight_sum[kChannelBlock] = {}, bias_sum[kChannelBlock] = {};
      for (std::int64_t row = 0; row < N; ++row) {
        const float* d = dout + row * C;
        const float* x = inp + row * C;
        const float m = mean[row], s = rstd[row];
        for (std::int64_t c = c0; c < c1; ++c) {
          weight_sum[c - c0] += (x[c] - m) * s * d[c];
          bias_sum[c - c0] += d[c];
        }
      }
      for (std::int64_t c = c0; c < c1; ++c) {
        dweight[c] += weight_sum[c - c0];
        dbias[c] += bias_sum[c - c0];
      }
    }
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (std::int64_t row = 0; row < N; ++row)
      std::memcpy(out + row * OC, bias, OC * sizeof(float));
  }
  gemm(false, false, N, OC, C, 1.0f, inp, C, weight, OC, bias != nullptr ? 1.0f : 0.0f, out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t C, std::int64_t OC) {
  if (dinp != nullptr) gemm(false, true, N, C, OC, 1.0f, dout, OC, weight, OC, 0.0f, dinp, C);
  gemm(true, false, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, OC);
  if (dbias != nullptr) bias_backward(dbias, dout, N, OC);
}

void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t OC) {
  const std::int64_t blocks = (OC + kChannelBlock - 1) / kChannelBlock;
#pragma omp parallel for schedule(static)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t c0 = block * kChannelBlock, c1 = std::min(OC, c0 + kChannelBlock);
    float sum[kChannelBlock] = {};
    for (std::int64_t row = 0; row < N; ++row) {
      const float* d = dout + row * OC;
      for (std::int64_t c = c0; c < c1; ++c) sum[c - c0] += d[c];
    }
    for (std::int64_t c = c0; c < c1; ++c) dbias[c] += sum[c - c0];
  }
}

void gelu_forward(float* out, const float* inp, std::int64_t n) {
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kChunk, count = std::min(kChunk, n - begin);
    ConstArrayMap x(inp + begin, count);
    ArrayMap y(out + begin, count);
    y = 0.5f * x * (1.0f + (kGeluScale * (x + kGeluCubic * x.cube())).tanh());
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
  constexpr std::int64_t kChunk = 4096;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kChunk, count = std::min(kChunk, n - begin);
    ConstArrayMap x(inp + begin, count);
    ConstArrayMap d(dout + begin, count);
    const Eigen::ArrayXf t = (kGeluScale * (x + kGeluCubic * x.cube())).tanh();
    ArrayMap dx(dinp + begin, count);
    dx = d * (0.5f * (1.0f + t) +
              0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x.square()));
  }
}

void residual_dropout_forward(float* out, const float* residual, const float* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < B * T; ++row) {
    const float* r = residual + row * C;
    const float* x = inp + row * C;
    float* y = out + row * C;
    if (!dropout.active()) {
      for (std::int64_t c = 0; c < C; ++c) y[c] = r[c] + x[c];
    } else {
      const std::uint64_t key = dropout.row_key(row / T, row % T);
      const float scale = dropout.scale();
      for (std::int64_t c = 0; c < C; ++c)
        y[c] = r[c] + (dropout.keep(key, c) ? x[c] * scale : 0.0f);
    }
  }
}

void dropout_backward(float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                      std::int64_t C, const DropoutSite& dropout) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < B * T; ++row) {
    const float* d = dout + row * C;
    float* dx = dinp + row * C;
    if (!dropout.active()) {
      for (std::int64_t c = 0; c < C; ++c) dx[c] = d[c];
    } else {
      const std::uint64_t key = dropout.row_key(row / T, row % T);
      const float scale = dropout.scale();
      for (std::int64_t c = 0; c < C; ++c) dx[c] = dropout.keep(key, c) ? d[c] * scale : 0.0f;
    }
  }
}

std::int64_t crossentropy_forward(float* losses, float* logsumexp, const float* logits,
                                  const int* targets, std::int64_t N, std::int64_t V,
                                  std::int64_t Vp, float label_smoothing) {
  std::int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted)
  for (std::int64_t row = 0; row < N; ++row) {
    ConstArrayMap z(logits + row * Vp, V);
    const float max = z.maxCoeff();
    const float lse = max + std::log((z - max).exp().sum());
    logsumexp[row] = lse;
    const int target = targets[row];
    if (target >= 0 && target < V) {
      losses[row] = lse - z[target];
      if (label_smoothing != 0.0f) {
        // The mean of -log softmax over the V classes, summed in double (V is 50257 for GPT-2).
        const double mean = z.cast<double>().sum() / static_cast<double>(V);
        losses[row] = (1.0f - label_smoothing) * losses[row] +
                      label_smoothing * static_cast<float>(static_cast<double>(lse) - mean);
      }
      ++counted;
    } else {
      losses[row] = 0.0f;
    }
  }
  return counted;
}

void crossentropy_backward(float* logits, const float* logsumexp, const int* targets,
                           std::int64_t N, std::int64_t V, std::int64_t Vp, float scale,
                           float label_smoothing) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < N; ++row) {
    float* z = logits + row * Vp;
    const int target = targets[row];
    if (target < 0 || target >= V) {
      std::memset(z, 0, Vp * sizeof(float));
      continue;
    }
    ArrayMap dz(z, V);
    dz = scale * (dz - logsumexp[row]).exp();
    if (label_smoothing != 0.0f) dz -= scale * label_smoothing / static_cast<float>(V);
    dz[target] -= scale * (1.0f - label_smoothing);
    std::memset(z + V, 0, (Vp - V) * sizeof(float));
  }
}

}  // namespace zero::gpt2::cpu
