// The bodies of the Llama family's CUDA layer kernels: RMSNorm (its forward, fused with the
// residual as layer norm's is, in layers.cu beside layer norm's), the rotary embedding and SwiGLU
// (llama_layers.cu). `__host__ __device__` functions templated on the thread
// (zero/core/kernel_thread.h) and on 16-bit storage types where an activation may be one, so
// tests/model/llama_cuda_emulation_test.cc runs each over the launch grid its launcher uses
// (layers_body.h's row_warp_launch, elementwise_launch, column_partials_launch). The
// same expressions as layers_cpu.h's kernels (llama_layers_cpu.cc). C++17 for nvcc.
#pragma once

#include <cstdint>

#include "layers_body.h"
#include "zero/core/kernel_thread.h"

namespace zero::gpt2::cuda {

// ---- RMSNorm ----

// One warp per row of `x`: rstd = 1 / sqrt(mean(x²) + epsilon), y = (x · rstd) · weight, rounded
// once into Out (fp32, or the 16-bit activation a GEMM reads).
template <typename Out, typename Thread>
ZERO_HOST_DEVICE void rmsnorm_row(const Thread& thread, Out* y, float* rstd, const float* x,
                                  const float* weight, std::int64_t row, std::int64_t C,
                                  float epsilon, int lane) {
  float squares = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarpSize) squares += x[c] * x[c];
  const float s =
      1.0f / sqrtf(kernels::warp_sum(thread, squares) / static_cast<float>(C) + epsilon);
  for (std::int64_t c = lane; c < C; c += kWarpSize)
    y[c] = kernels::Element<Out>::narrow((x[c] * s) * weight[c]);
  if (lane == 0) rstd[row] = s;
}

template <typename Out, typename Thread>
ZERO_HOST_DEVICE void rmsnorm_forward_body(const Thread& thread, Out* out, float* rstd,
                                           const float* inp, const float* weight, std::int64_t N,
                                           std::int64_t C, float epsilon) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  rmsnorm_row(thread, out + row * C, rstd, inp + row * C, weight, row, C, epsilon,
              kernels::lane_of(thread));
}

// residual_out = residual + dropout(inp) (layers_body.h's residual_row, layer norm's too), then
// out = rmsnorm(residual_out), one warp per row.
template <typename Out, typename Thread>
ZERO_HOST_DEVICE void residual_rmsnorm_forward_body(const Thread& thread, float* residual_out,
                                                    Out* out, float* rstd, const float* residual,
                                                    const float* inp, const float* weight,
                                                    std::int64_t N, std::int64_t T, std::int64_t C,
                                                    float epsilon, const DropoutSite& dropout) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  const int lane = kernels::lane_of(thread);
  const float* sum_row = residual_row(residual_out, residual, inp, row, T, C, dropout, lane);
  rmsnorm_row(thread, out + row * C, rstd, sum_row, weight, row, C, epsilon, lane);
}

// dinp (a row per warp) += (weight·dout − inp · mean(weight·dout·inp) · rstd²) · rstd.
template <typename Thread>
ZERO_HOST_DEVICE void rmsnorm_backward_input_body(const Thread& thread, float* dinp,
                                                  const float* dout, const float* inp,
                                                  const float* weight, const float* rstd,
                                                  std::int64_t N, std::int64_t C) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  const int lane = kernels::lane_of(thread);
  const float* d = dout + row * C;
  const float* x = inp + row * C;
  const float s = rstd[row];
  float dot = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarpSize) dot += weight[c] * d[c] * x[c];
  const float scale = kernels::warp_sum(thread, dot) / static_cast<float>(C) * s * s;
  float* dx = dinp + row * C;
  for (std::int64_t c = lane; c < C; c += kWarpSize) dx[c] += (weight[c] * d[c] - x[c] * scale) * s;
}

// dweight's terms for column_partials_body: inp · rstd · dout.
struct RmsnormTerms {
  const float* dout;
  const float* inp;
  const float* rstd;
  static constexpr int kOutputs = 1;
  ZERO_HOST_DEVICE_INLINE void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                                          float* values) const {
    values[0] = inp[row * C + c] * rstd[row] * dout[row * C + c];
  }
};

// ---- rotary embedding ----

// One thread per (row, head, i < head_dim / 2) of the heads `heads` leading each row of x (B·T
// rows of row_stride elements; T positions from position_offset): the pair (i, i + head_dim / 2)
// rotated in place by the table's angle (rope.h's layout), the sine taken with `sign` (+1 forward,
// -1 backward). Each pair has one thread, which reads both elements before writing them.
template <typename T, typename Thread>
ZERO_HOST_DEVICE void rope_body(const Thread& thread, T* x, const float* table, std::int64_t rows,
                                std::int64_t seq_len, std::int64_t heads, std::int64_t head_dim,
                                std::int64_t row_stride, std::int64_t position_offset, float sign) {
  const std::int64_t half = head_dim / 2;
  const std::int64_t index = global_x(thread);
  if (index >= rows * heads * half) return;
  const std::int64_t i = index % half, head = index / half % heads, row = index / half / heads;
  const float* cosine = table + (position_offset + row % seq_len) * head_dim;
  const float c = cosine[i], s = sign * cosine[half + i];
  T* first = x + row * row_stride + head * head_dim + i;
  const float a = kernels::Element<T>::widen(first[0]), b = kernels::Element<T>::widen(first[half]);
  first[0] = kernels::Element<T>::narrow(a * c - b * s);
  first[half] = kernels::Element<T>::narrow(b * c + a * s);
}

// ---- SwiGLU ----

// out (N, H, Out) = silu(gate) · up from inp (N, 2H) = [gate | up] per row, silu(g) = g / (1 +
// exp(-g)); one thread per output element, rounded once.
template <typename Out, typename Thread>
ZERO_HOST_DEVICE void swiglu_forward_body(const Thread& thread, Out* out, const float* inp,
                                          std::int64_t N, std::int64_t H) {
  const std::int64_t index = global_x(thread);
  if (index >= N * H) return;
  const std::int64_t row = index / H, j = index % H;
  const float gate = inp[row * 2 * H + j], up = inp[row * 2 * H + H + j];
  out[index] = kernels::Element<Out>::narrow(gate / (1.0f + expf(-gate)) * up);
}

// dinp (N, 2H) = [dout · up · silu'(gate) | dout · silu(gate)], one thread per (row, j < H).
template <typename Thread>
ZERO_HOST_DEVICE void swiglu_backward_body(const Thread& thread, float* dinp, const float* dout,
                                           const float* inp, std::int64_t N, std::int64_t H) {
  const std::int64_t index = global_x(thread);
  if (index >= N * H) return;
  const std::int64_t row = index / H, j = index % H;
  const float gate = inp[row * 2 * H + j], up = inp[row * 2 * H + H + j], d = dout[index];
  const float sigmoid = 1.0f / (1.0f + expf(-gate));
  dinp[row * 2 * H + j] = d * up * sigmoid * (1.0f + gate * (1.0f - sigmoid));
  dinp[row * 2 * H + H + j] = d * gate * sigmoid;
}

// ---- grouped-query attention's head repetition ----

// heads (N, 3·NH·HS) from qkv (N, (NH + 2·KVH)·HS), one thread per output element: q copied, k and
// v's head j repeated as heads j·G .. j·G + G - 1 (kernels.h repeat_kv_forward).
template <typename T, typename Thread>
ZERO_HOST_DEVICE void repeat_kv_forward_body(const Thread& thread, T* heads, const T* qkv,
                                             std::int64_t N, std::int64_t NH, std::int64_t KVH,
                                             std::int64_t HS) {
  const std::int64_t index = global_x(thread);
  if (index >= N * 3 * NH * HS) return;
  const std::int64_t c = index % HS, h = index / HS % (3 * NH), row = index / HS / (3 * NH);
  const std::int64_t part = h / NH, head = h % NH;
  const std::int64_t source = part == 0 ? head : NH + (part - 1) * KVH + head / (NH / KVH);
  heads[index] = qkv[(row * (NH + 2 * KVH) + source) * HS + c];
}

// dqkv (N, (NH + 2·KVH)·HS) from dheads (N, 3·NH·HS), one thread per dqkv element: q's gradient
// copied, a key/value head's the sum of its G heads' in head order (kernels.h
// repeat_kv_backward).
template <typename Thread>
ZERO_HOST_DEVICE void repeat_kv_backward_body(const Thread& thread, float* dqkv,
                                              const float* dheads, std::int64_t N, std::int64_t NH,
                                              std::int64_t KVH, std::int64_t HS) {
  const std::int64_t width = NH + 2 * KVH;
  const std::int64_t index = global_x(thread);
  if (index >= N * width * HS) return;
  const std::int64_t c = index % HS, j = index / HS % width, row = index / HS / width;
  const float* in = dheads + row * 3 * NH * HS;
  if (j < NH) {
    dqkv[index] = in[j * HS + c];
    return;
  }
  const std::int64_t group = NH / KVH, part = j < NH + KVH ? 1 : 2;
  const std::int64_t first = part * NH + (j - NH - (part - 1) * KVH) * group;
  float sum = 0.0f;
  for (std::int64_t g = 0; g < group; ++g) sum += in[(first + g) * HS + c];
  dqkv[index] = sum;
}

}  // namespace zero::gpt2::cuda
