// The Llama family's CPU layer kernels (layers_cpu.h): RMSNorm, rotary embeddings, SwiGLU.
// OpenMP over rows (over channel blocks where rows would race), a vector loop per row.
// GCC 12 reports false maybe-uninitialized warnings inside Eigen's AVX-512 packet math.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "zero/gpt2/layers_cpu.h"

namespace zero::gpt2::cpu {
namespace {

constexpr std::int64_t kChannelBlock = 64;

using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

// Rotates each head of `layout` in place by the table's angles, the sines taken with `sign` (+1:
// the forward, -1: its transpose, the backward).
void rotate(float* x, const float* table, const RopeLayout& layout, float sign) {
  const std::int64_t half = layout.head_dim / 2;
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < layout.B * layout.T; ++row) {
    const std::int64_t position = layout.position_offset + row % layout.T;
    const float* cosine = table + position * layout.head_dim;
    const float* sine = cosine + half;
    for (std::int64_t head = 0; head < layout.heads; ++head) {
      float* first = x + row * layout.row_stride + head * layout.head_dim;
      float* second = first + half;
#pragma omp simd
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = first[i], b = second[i], s = sign * sine[i];
        first[i] = a * cosine[i] - b * s;
        second[i] = b * cosine[i] + a * s;
      }
    }
  }
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N,
                     std::int64_t C, float epsilon) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < N; ++row) {
    const float* x = inp + row * C;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (std::int64_t c = 0; c < C; ++c) squares += x[c] * x[c];
    const float s = 1.0f / std::sqrt(squares / static_cast<float>(C) + epsilon);
    float* y = out + row * C;
#pragma omp simd
    for (std::int64_t c = 0; c < C; ++c) y[c] = (x[c] * s) * weight[c];
    rstd[row] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, std::int64_t N, std::int64_t C) {
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < N; ++row) {
      const float* d = dout + row * C;
      const float* x = inp + row * C;
      const float s = rstd[row];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (std::int64_t c = 0; c < C; ++c) dot += weight[c] * d[c] * x[c];
      const float scale = dot / static_cast<float>(C) * s * s;
      float* dx = dinp + row * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) dx[c] += (weight[c] * d[c] - x[c] * scale) * s;
    }
    const std::int64_t blocks = (C + kChannelBlock - 1) / kChannelBlock;
#pragma omp for schedule(static)
    for (std::int64_t block = 0; block < blocks; ++block) {
      const std::int64_t c0 = block * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
      float weight_sum[kChannelBlock] = {};
      for (std::int64_t row = 0; row < N; ++row) {
        const float* d = dout + row * C;
        const float* x = inp + row * C;
        const float s = rstd[row];
        for (std::int64_t c = c0; c < c1; ++c) weight_sum[c - c0] += x[c] * s * d[c];
      }
      for (std::int64_t c = c0; c < c1; ++c) dweight[c] += weight_sum[c - c0];
    }
  }
}

void rope_forward(float* x, const float* table, const RopeLayout& layout) {
  rotate(x, table, layout, 1.0f);
}

void rope_backward(float* dx, const float* table, const RopeLayout& layout) {
  rotate(dx, table, layout, -1.0f);
}

// Eigen splits a loop into its packets and scalar ends by the destination's alignment, and its
// packet exp differs from the scalar one in the last place: each row's values are computed into
// Eigen's own (aligned) arrays, so the results do not depend on where the caller's buffers lie,
// then copied out exactly.
void swiglu_forward(float* out, const float* inp, std::int64_t N, std::int64_t H) {
#pragma omp parallel
  {
    Eigen::ArrayXf row_out(H);
#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < N; ++row) {
      ConstArrayMap gate(inp + row * 2 * H, H), up(inp + row * 2 * H + H, H);
      row_out = gate / (1.0f + (-gate).exp()) * up;
      ArrayMap(out + row * H, H) = row_out;
    }
  }
}

void swiglu_backward(float* dinp, const float* dout, const float* inp, std::int64_t N,
                     std::int64_t H) {
#pragma omp parallel
  {
    Eigen::ArrayXf sigmoid(H), dgate(H), dup(H);
#pragma omp for schedule(static)
    for (std::int64_t row = 0; row < N; ++row) {
      ConstArrayMap gate(inp + row * 2 * H, H), up(inp + row * 2 * H + H, H), d(dout + row * H, H);
      sigmoid = 1.0f / (1.0f + (-gate).exp());
      dgate = d * up * sigmoid * (1.0f + gate * (1.0f - sigmoid));
      dup = d * gate * sigmoid;
      ArrayMap(dinp + row * 2 * H, H) = dgate;
      ArrayMap(dinp + row * 2 * H + H, H) = dup;
    }
  }
}

void repeat_kv_forward(void* heads, const void* qkv, std::size_t element_bytes, std::int64_t N,
                       std::int64_t NH, std::int64_t KVH, std::int64_t HS) {
  const std::int64_t group = NH / KVH;
  const std::size_t head_bytes = static_cast<std::size_t>(HS) * element_bytes;
  const std::int64_t in_row = (NH + 2 * KVH) * HS, out_row = 3 * NH * HS;
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < N; ++row) {
    const char* in = static_cast<const char*>(qkv) + row * in_row * std::int64_t(element_bytes);
    char* out = static_cast<char*>(heads) + row * out_row * std::int64_t(element_bytes);
    std::memcpy(out, in, NH * head_bytes);  // q
    for (int part = 1; part <= 2; ++part)   // k, v
      for (std::int64_t h = 0; h < NH; ++h)
        std::memcpy(out + (part * NH + h) * head_bytes,
                    in + (NH + (part - 1) * KVH + h / group) * head_bytes, head_bytes);
  }
}

void repeat_kv_backward(float* dqkv, const float* dheads, std::int64_t N, std::int64_t NH,
                        std::int64_t KVH, std::int64_t HS) {
  const std::int64_t group = NH / KVH;
  const std::int64_t out_row = (NH + 2 * KVH) * HS, in_row = 3 * NH * HS;
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < N; ++row) {
    const float* in = dheads + row * in_row;
    float* out = dqkv + row * out_row;
    std::copy(in, in + NH * HS, out);
    for (int part = 1; part <= 2; ++part)
      for (std::int64_t j = 0; j < KVH; ++j) {
        float* sum = out + (NH + (part - 1) * KVH + j) * HS;
        const float* first = in + (part * NH + j * group) * HS;
        std::copy(first, first + HS, sum);
        for (std::int64_t g = 1; g < group; ++g)
          for (std::int64_t c = 0; c < HS; ++c) sum[c] += first[g * HS + c];
      }
  }
}

}  // namespace zero::gpt2::cpu
