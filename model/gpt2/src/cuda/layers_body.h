// The bodies and launch configurations of the GPT-2 layer kernels in layers.cu (embeddings,
// (residual +) layer norm, column sums, residual + dropout, GELU, softmax + cross-entropy):
// `__host__ __device__` functions templated on the thread (zero/core/kernel_thread.h), so the CPU
// emulation test (tests/model/gpt2_cuda_emulation_test.cc) runs each body over the launch grid
// its launcher computes. Row kernels give a row to a warp; parameter gradients are summed over
// rows in a fixed order (partial sums per row chunk, then the chunks in order), so runs are
// deterministic. C++17 for nvcc.
#pragma once

#include <cstdint>

#include "zero/core/kernel_thread.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2::cuda {

using kernels::KernelDim;
using kernels::kWarpSize;
using kernels::LaunchConfig;

constexpr int kLayerThreads = 256;
constexpr int kRowsPerBlock = kLayerThreads / kWarpSize;
constexpr std::int64_t kRowChunk = 256;  // rows per partial sum of a parameter gradient
constexpr int kColumnLanes = 32, kRowLanes = 8;
constexpr std::int64_t kMaxLinearBlocks = std::int64_t{1} << 30;
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi), as layers_cpu.cc
constexpr float kGeluCubic = 0.044715f;

// ---- launch configurations (the launchers and the tests call these) ----

// One thread per element of `work` (256 per block).
constexpr LaunchConfig elementwise_launch(std::int64_t work) {
  return kernels::linear_launch(kernels::blocks_for(work, kLayerThreads, kMaxLinearBlocks),
                                kLayerThreads);
}
// One warp per row, 8 rows per block.
constexpr LaunchConfig row_warp_launch(std::int64_t rows) {
  return kernels::linear_launch(kernels::blocks_for(rows, kRowsPerBlock, kMaxLinearBlocks),
                                kLayerThreads);
}
// One block of 256 threads per row.
constexpr LaunchConfig row_block_launch(std::int64_t rows) {
  return kernels::linear_launch(static_cast<unsigned>(rows), kLayerThreads);
}
constexpr std::int64_t row_chunks(std::int64_t N) { return (N + kRowChunk - 1) / kRowChunk; }
// The scratch column_partials writes for `outputs` sums of C columns over N rows: (chunks,
// outputs, C) floats.
constexpr std::int64_t column_partials_elements(std::int64_t N, std::int64_t C, int outputs) {
  return row_chunks(N) * outputs * C;
}
// column_partials: blocks of 32 columns × 8 row lanes, one per (column group, row chunk).
constexpr LaunchConfig column_partials_launch(std::int64_t N, std::int64_t C) {
  LaunchConfig config;
  config.grid = {static_cast<unsigned>((C + kColumnLanes - 1) / kColumnLanes),
                 static_cast<unsigned>(row_chunks(N)), 1};
  config.block = {kColumnLanes, kRowLanes, 1};
  return config;
}

// The global x index of the thread (block · blockDim + thread).
template <typename Thread>
ZERO_HOST_DEVICE_INLINE std::int64_t global_x(const Thread& thread) {
  return static_cast<std::int64_t>(thread.block_index().x) * thread.block_dim().x +
         thread.thread_index().x;
}
// The row of a row-per-warp kernel.
template <typename Thread>
ZERO_HOST_DEVICE_INLINE std::int64_t warp_row(const Thread& thread) {
  return static_cast<std::int64_t>(thread.block_index().x) * kRowsPerBlock +
         thread.thread_index().x / kWarpSize;
}

// ---- embeddings ----

template <typename Thread>
ZERO_HOST_DEVICE void encoder_forward_body(const Thread& thread, float* out, const int* tokens,
                                           const float* wte, const float* wpe, std::int64_t B,
                                           std::int64_t T, std::int64_t C,
                                           const DropoutSite& dropout) {
  const std::int64_t index = global_x(thread);
  if (index >= B * T * C) return;
  const std::int64_t row = index / C, c = index % C, t = row % T;
  float value = wte[static_cast<std::int64_t>(tokens[row]) * C + c];
  if (wpe != nullptr) value += wpe[t * C + c];
  if (dropout.active())
    value = dropout.keep(dropout.row_key(row / T, t), static_cast<std::uint64_t>(c))
                ? value * dropout.scale()
                : 0.0f;
  out[index] = value;
}

ZERO_HOST_DEVICE_INLINE float encoder_gradient(const float* dout, std::int64_t row, std::int64_t c,
                                               std::int64_t T, std::int64_t C,
                                               const DropoutSite& dropout) {
  const float d = dout[row * C + c];
  if (!dropout.active()) return d;
  return dropout.keep(dropout.row_key(row / T, row % T), static_cast<std::uint64_t>(c))
             ? d * dropout.scale()
             : 0.0f;
}

// One thread per (bucket, channel): the bucket's rows (one token's, ascending) added in order.
template <typename Thread>
ZERO_HOST_DEVICE void encoder_wte_backward_body(const Thread& thread, float* dwte,
                                                const float* dout, const int* bucket_token,
                                                const int* bucket_begin, const int* rows,
                                                std::int64_t buckets, std::int64_t T,
                                                std::int64_t C, const DropoutSite& dropout) {
  const std::int64_t index = global_x(thread);
  if (index >= buckets * C) return;
  const std::int64_t bucket = index / C, c = index % C;
  float* target = dwte + static_cast<std::int64_t>(bucket_token[bucket]) * C + c;
  float sum = *target;
  for (int k = bucket_begin[bucket]; k < bucket_begin[bucket + 1]; ++k)
    sum += encoder_gradient(dout, rows[k], c, T, C, dropout);
  *target = sum;
}

// One thread per (t, channel): rows b·T + t for b ascending, the CPU's order.
template <typename Thread>
ZERO_HOST_DEVICE void encoder_wpe_backward_body(const Thread& thread, float* dwpe,
                                                const float* dout, std::int64_t B, std::int64_t T,
                                                std::int64_t C, const DropoutSite& dropout) {
  const std::int64_t index = global_x(thread);
  if (index >= T * C) return;
  const std::int64_t t = index / C, c = index % C;
  float sum = dwpe[index];
  for (std::int64_t b = 0; b < B; ++b) sum += encoder_gradient(dout, b * T + t, c, T, C, dropout);
  dwpe[index] = sum;
}

// ---- layer norm ----

// One warp per row of `x` (already holding residual + dropout(inp) when fused). The row's output
// `y` is fp32 or a 16-bit storage type (Out: the activation a GEMM reads, GPT2Compute's
// gemm_input_dtype), rounded once from the fp32 value.
template <typename Out, typename Thread>
ZERO_HOST_DEVICE void layernorm_row(const Thread& thread, Out* y, float* mean, float* rstd,
                                    const float* x, const float* weight, const float* bias,
                                    std::int64_t row, std::int64_t C, float epsilon, int lane) {
  float sum = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarpSize) sum += x[c];
  const float m = kernels::warp_sum(thread, sum) / static_cast<float>(C);
  float variance_sum = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarpSize) {
    const float shifted = x[c] - m;
    variance_sum += shifted * shifted;
  }
  const float s =
      1.0f / sqrtf(kernels::warp_sum(thread, variance_sum) / static_cast<float>(C) + epsilon);
  for (std::int64_t c = lane; c < C; c += kWarpSize)
    y[c] = kernels::Element<Out>::narrow((x[c] - m) * s * weight[c] + bias[c]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

template <typename Out, typename Thread>
ZERO_HOST_DEVICE void layernorm_forward_body(const Thread& thread, Out* out, float* mean,
                                             float* rstd, const float* inp, const float* weight,
                                             const float* bias, std::int64_t N, std::int64_t C,
                                             float epsilon) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  layernorm_row(thread, out + row * C, mean, rstd, inp + row * C, weight, bias, row, C, epsilon,
                kernels::lane_of(thread));
}

// Row `row` of residual_out = residual + dropout(inp) by one warp's lane `lane` (the fused residual
// + norm bodies, layer norm's and RMSNorm's, run it before their norm row): each lane writes, and
// its norm row reads back, only the columns lane, lane + 32, ... Returns the row.
ZERO_HOST_DEVICE_INLINE const float* residual_row(float* residual_out, const float* residual,
                                                  const float* inp, std::int64_t row,
                                                  std::int64_t T, std::int64_t C,
                                                  const DropoutSite& dropout, int lane) {
  const float* r = residual + row * C;
  const float* x = inp + row * C;
  float* sum_row = residual_out + row * C;
  const std::uint64_t key = dropout.active() ? dropout.row_key(row / T, row % T) : 0;
  for (std::int64_t c = lane; c < C; c += kWarpSize) {
    const float kept = !dropout.active()                                  ? x[c]
                       : dropout.keep(key, static_cast<std::uint64_t>(c)) ? x[c] * dropout.scale()
                                                                          : 0.0f;
    sum_row[c] = r[c] + kept;
  }
  return sum_row;
}

template <typename Out, typename Thread>
ZERO_HOST_DEVICE void residual_layernorm_forward_body(
    const Thread& thread, float* residual_out, Out* out, float* mean, float* rstd,
    const float* residual, const float* inp, const float* weight, const float* bias, std::int64_t N,
    std::int64_t T, std::int64_t C, float epsilon, const DropoutSite& dropout) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  const int lane = kernels::lane_of(thread);
  const float* sum_row = residual_row(residual_out, residual, inp, row, T, C, dropout, lane);
  layernorm_row(thread, out + row * C, mean, rstd, sum_row, weight, bias, row, C, epsilon, lane);
}

template <typename Thread>
ZERO_HOST_DEVICE void layernorm_backward_input_body(const Thread& thread, float* dinp,
                                                    const float* dout, const float* inp,
                                                    const float* weight, const float* mean,
                                                    const float* rstd, std::int64_t N,
                                                    std::int64_t C) {
  const std::int64_t row = warp_row(thread);
  if (row >= N) return;
  const int lane = kernels::lane_of(thread);
  const float* d = dout + row * C;
  const float* x = inp + row * C;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarpSize) {
    const float dnorm = weight[c] * d[c];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (x[c] - m) * s;
  }
  dnorm_mean = kernels::warp_sum(thread, dnorm_mean) / static_cast<float>(C);
  dnorm_norm_mean = kernels::warp_sum(thread, dnorm_norm_mean) / static_cast<float>(C);
  float* dx = dinp + row * C;
  for (std::int64_t c = lane; c < C; c += kWarpSize) {
    const float norm = (x[c] - m) * s;
    dx[c] += (weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
  }
}

// ---- layer norm backward in one pass ----
//
// Each block takes a chunk of kNormRows rows, each of its kNormWarps warps a row at a time (rows
// w, w + kNormWarps, ... of the chunk): the warp sums the row's two terms, writes dinp's row, and
// adds the row's dweight and dbias terms into its own region of shared memory (one lane per column,
// rows in order), so dout and inp are read once from memory for both the input gradient and the
// parameter gradients. The block then writes its chunk's sums, warp regions added in warp order,
// to partial[chunk][2][C] (dweight, then dbias), which column sums reduce in a fixed order.
constexpr int kNormWarps = 4;
constexpr std::int64_t kNormRows = 16;
constexpr std::int64_t norm_chunks(std::int64_t N) { return (N + kNormRows - 1) / kNormRows; }
// The block's shared memory: a (dweight, dbias) row of C floats each per warp.
constexpr std::size_t layernorm_backward_shared_bytes(std::int64_t C) {
  return static_cast<std::size_t>(kNormWarps) * 2 * static_cast<std::size_t>(C) * sizeof(float);
}
constexpr LaunchConfig layernorm_backward_launch(std::int64_t N, std::int64_t C) {
  LaunchConfig config =
      kernels::linear_launch(static_cast<unsigned>(norm_chunks(N)), kNormWarps * kWarpSize);
  config.dynamic_shared_bytes = layernorm_backward_shared_bytes(C);
  return config;
}

// One row of the one-pass backward, by one warp: lane `lane` takes columns lane, lane + 32, ...
// in kNormUnroll groups whose loads come before their stores, so a lane has a group's loads in
// flight at once (dinp may alias nothing the compiler can prove). Past C a group's lanes read
// zeros, which add nothing to the row's sums. dweight and dbias: the warp's shared rows (views).
constexpr int kNormUnroll = 4;
template <typename Thread, typename SharedFloats>
ZERO_HOST_DEVICE_INLINE void layernorm_backward_row(const Thread& thread, float* dx,
                                                    const SharedFloats& dweight,
                                                    const SharedFloats& dbias, const float* d,
                                                    const float* x, const float* weight, float m,
                                                    float s, std::int64_t C, int lane) {
  constexpr std::int64_t kStep = std::int64_t{kWarpSize} * kNormUnroll;
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (std::int64_t base = lane; base < C; base += kStep) {
    float dv[kNormUnroll], nv[kNormUnroll], wv[kNormUnroll];
    for (int u = 0; u < kNormUnroll; ++u) {
      const std::int64_t c = base + std::int64_t{u} * kWarpSize;
      const bool in = c < C;
      dv[u] = in ? d[c] : 0.0f;
      wv[u] = in ? weight[c] : 0.0f;
      nv[u] = in ? x[c] : m;
    }
    for (int u = 0; u < kNormUnroll; ++u) {
      const float dnorm = wv[u] * dv[u];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * (nv[u] - m) * s;
    }
  }
  dnorm_mean = kernels::warp_sum(thread, dnorm_mean) / static_cast<float>(C);
  dnorm_norm_mean = kernels::warp_sum(thread, dnorm_norm_mean) / static_cast<float>(C);
  for (std::int64_t base = lane; base < C; base += kStep) {
    float dv[kNormUnroll], nv[kNormUnroll], wv[kNormUnroll], xv[kNormUnroll];
    for (int u = 0; u < kNormUnroll; ++u) {
      const std::int64_t c = base + std::int64_t{u} * kWarpSize;
      const bool in = c < C;
      dv[u] = in ? d[c] : 0.0f;
      wv[u] = in ? weight[c] : 0.0f;
      nv[u] = in ? (x[c] - m) * s : 0.0f;
      xv[u] = in ? dx[c] : 0.0f;
    }
    for (int u = 0; u < kNormUnroll; ++u) {
      const std::int64_t c = base + std::int64_t{u} * kWarpSize;
      if (c >= C) break;
      dx[c] = xv[u] + (wv[u] * dv[u] - dnorm_mean - nv[u] * dnorm_norm_mean) * s;
      dweight[c] += nv[u] * dv[u];
      dbias[c] += dv[u];
    }
  }
}

template <typename Thread>
ZERO_HOST_DEVICE void layernorm_backward_body(const Thread& thread, float* shared, float* dinp,
                                              float* partial, const float* dout, const float* inp,
                                              const float* weight, const float* mean,
                                              const float* rstd, std::int64_t N, std::int64_t C) {
  const int lane = kernels::lane_of(thread);
  const int warp = static_cast<int>(kernels::linear_thread(thread) / kWarpSize);
  const auto sums = thread.shared(shared);
  const auto dweight = sums + static_cast<std::int64_t>(warp) * 2 * C;
  const auto dbias = dweight + C;
  // Each lane owns columns lane, lane + 32, ... of its warp's two rows: no other lane touches
  // them before the barrier.
  for (std::int64_t c = lane; c < C; c += kWarpSize) dweight[c] = dbias[c] = 0.0f;
  const std::int64_t chunk = thread.block_index().x;
  const std::int64_t row_end = N < (chunk + 1) * kNormRows ? N : (chunk + 1) * kNormRows;
  for (std::int64_t row = chunk * kNormRows + warp; row < row_end; row += kNormWarps)
    layernorm_backward_row(thread, dinp + row * C, dweight, dbias, dout + row * C, inp + row * C,
                           weight, mean[row], rstd[row], C, lane);
  thread.sync_block();
  const std::int64_t threads = thread.block_dim().x;
  for (std::int64_t i = kernels::linear_thread(thread); i < 2 * C; i += threads) {
    float total = 0.0f;
    for (int w = 0; w < kNormWarps; ++w) total += sums[static_cast<std::int64_t>(w) * 2 * C + i];
    partial[chunk * 2 * C + i] = total;
  }
}

// dout · gelu'(x), GELU's (tanh form) backward at one element, as layers_cpu.cc computes it. The
// product is rounded on its own (never contracted into an FMA with a sum it feeds), so a pass that
// sums it (StagedGeluBiasTerms) adds the value it stores, as bias_backward adds gelu_backward's.
ZERO_HOST_DEVICE_INLINE float gelu_backward_value(float dout, float x) {
  const float t = tanhf(kGeluScale * (x + kGeluCubic * (x * x * x)));
  return kernels::multiply_rounded(
      dout, 0.5f * (1.0f + t) +
                0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x));
}

// ---- column sums in a fixed order ----

struct LayernormTerms {
  const float* dout;
  const float* inp;
  const float* mean;
  const float* rstd;
  static constexpr int kOutputs = 2;  // dweight, dbias
  ZERO_HOST_DEVICE_INLINE void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                                          float* values) const {
    const float d = dout[row * C + c];
    values[0] = (inp[row * C + c] - mean[row]) * rstd[row] * d;
    values[1] = d;
  }
};

struct BiasTerms {
  const float* dout;
  static constexpr int kOutputs = 1;
  ZERO_HOST_DEVICE_INLINE void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                                          float* values) const {
    values[0] = dout[row * C + c];
  }
};

// BiasTerms that also write each element of dout rounded to T (a 16-bit storage type) into
// `staged`, (N, C) like dout: a linear's backward reads dout once for its bias gradient and its
// GEMMs' 16-bit operand (column_partials_body visits every element once).
template <typename T>
struct StagedBiasTerms {
  const float* dout;
  T* staged;
  static constexpr int kOutputs = 1;
  ZERO_HOST_DEVICE_INLINE void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                                          float* values) const {
    const float d = dout[row * C + c];
    staged[row * C + c] = kernels::Element<T>::narrow(d);
    values[0] = d;
  }
};

// StagedBiasTerms of g = dout ⊙ gelu'(preactivation) (GELU's backward, gelu_backward_value): the
// backward of a linear whose forward ran the GELU epilogue reads dout (the next GEMM's raw
// output) and the pre-activation once, and neither g in fp32 nor a separate GELU pass is
// written. dbias sums the fp32 g, in bias_backward's order.
template <typename T>
struct StagedGeluBiasTerms {
  const float* dout;
  const float* preactivation;
  T* staged;
  static constexpr int kOutputs = 1;
  ZERO_HOST_DEVICE_INLINE void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                                          float* values) const {
    const std::int64_t i = row * C + c;
    const float g = gelu_backward_value(dout[i], preactivation[i]);
    staged[i] = kernels::Element<T>::narrow(g);
    values[0] = g;
  }
};

template <int kOutputs>
struct ColumnPartialsShared {
  float sums[kOutputs][kRowLanes][kColumnLanes];
};

// Block (column group of 32, row chunk) sums its rows per column (8 row lanes, then the lanes in
// order) into partial[chunk][output][column].
template <typename Thread, typename Terms>
ZERO_HOST_DEVICE void column_partials_body(const Thread& thread,
                                           ColumnPartialsShared<Terms::kOutputs>& shared,
                                           float* partial, const Terms& terms, std::int64_t N,
                                           std::int64_t C) {
  const KernelDim lane = thread.thread_index();
  const std::int64_t c = static_cast<std::int64_t>(thread.block_index().x) * kColumnLanes + lane.x;
  const std::int64_t chunk = thread.block_index().y;
  const std::int64_t chunk_end = (chunk + 1) * kRowChunk;
  const std::int64_t row_end = N < chunk_end ? N : chunk_end;
  float local[Terms::kOutputs] = {};
  if (c < C) {
    for (std::int64_t row = chunk * kRowChunk + lane.y; row < row_end; row += kRowLanes) {
      float values[Terms::kOutputs];
      terms(row, c, C, values);
      for (int k = 0; k < Terms::kOutputs; ++k) local[k] += values[k];
    }
  }
  for (int k = 0; k < Terms::kOutputs; ++k)
    thread.shared(shared.sums[k][lane.y])[lane.x] = local[k];
  thread.sync_block();
  if (lane.y == 0 && c < C) {
    for (int k = 0; k < Terms::kOutputs; ++k) {
      float total = 0.0f;
      for (int row_lane = 0; row_lane < kRowLanes; ++row_lane)
        total += thread.shared(shared.sums[k][row_lane])[lane.x];
      partial[(chunk * Terms::kOutputs + k) * C + c] = total;
    }
  }
}

// target_k[c] += Σ over chunks (in order) of partial[chunk][k][c].
template <typename Thread>
ZERO_HOST_DEVICE void add_partials_body(const Thread& thread, float* target0, float* target1,
                                        const float* partial, std::int64_t chunks, int outputs,
                                        std::int64_t C) {
  const std::int64_t c = global_x(thread);
  if (c >= C) return;
  for (int k = 0; k < outputs; ++k) {
    float total = 0.0f;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
      total += partial[(chunk * outputs + k) * C + c];
    float* target = k == 0 ? target0 : target1;
    target[c] += total;
  }
}

// ---- residual + dropout, dropout's backward ----

// Element `index` of residual + dropout(inp) (residual null: dropout(inp) alone, which is also
// dropout's backward, mask · scale · dout), as layers_cpu.cc computes it.
template <typename Thread>
ZERO_HOST_DEVICE void residual_dropout_body(const Thread& thread, float* out, const float* residual,
                                            const float* inp, std::int64_t n, std::int64_t T,
                                            std::int64_t C, const DropoutSite& dropout) {
  const std::int64_t index = global_x(thread);
  if (index >= n) return;
  const float x = inp[index];
  float kept = x;
  if (dropout.active()) {
    const std::int64_t row = index / C;
    kept = dropout.keep(dropout.row_key(row / T, row % T), static_cast<std::uint64_t>(index % C))
               ? x * dropout.scale()
               : 0.0f;
  }
  out[index] = residual != nullptr ? residual[index] + kept : kept;
}

// ---- GELU ----

// out (fp32, or a 16-bit storage type: the activation the next GEMM reads) = gelu(inp), rounded
// once.
template <typename Out, typename Thread>
ZERO_HOST_DEVICE void gelu_forward_body(const Thread& thread, Out* out, const float* inp,
                                        std::int64_t n) {
  const std::int64_t i = global_x(thread);
  if (i >= n) return;
  const float x = inp[i];
  out[i] = kernels::Element<Out>::narrow(
      0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * (x * x * x)))));
}

template <typename Thread>
ZERO_HOST_DEVICE void gelu_backward_body(const Thread& thread, float* dinp, const float* inp,
                                         const float* dout, std::int64_t n) {
  const std::int64_t i = global_x(thread);
  if (i >= n) return;
  dinp[i] = gelu_backward_value(dout[i], inp[i]);
}

// ---- softmax + cross-entropy ----

// Online (max, sum of exp(z - max)) pairs, merged (Milakov & Gimelshein 2018).
struct MaxSum {
  float max;
  float sum;
};

ZERO_HOST_DEVICE_INLINE MaxSum merge(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return {max, 0.0f};
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

struct CrossentropyShared {
  MaxSum warps[kLayerThreads / kWarpSize];
  float sums[kLayerThreads / kWarpSize];  // each warp's sum of the row's logits
};

// One block per row: logsumexp over the first V columns without writing probabilities, and the
// row's logit sum (same reduction) for label smoothing ε: loss = (1 - ε)·(lse - z[target]) +
// ε·(lse - mean of the V logits), as cpu::crossentropy_forward. ε = 0 gives lse - z[target].
// The logits are In: float, or a 16-bit storage type widened exactly on load.
template <typename In, typename Thread>
ZERO_HOST_DEVICE void crossentropy_forward_body(const Thread& thread, CrossentropyShared& shared,
                                                float* losses, float* logsumexp, const In* logits,
                                                const int* targets, std::int64_t V, std::int64_t Vp,
                                                float label_smoothing) {
  const std::int64_t row = thread.block_index().x;
  const unsigned x = thread.thread_index().x;
  const In* z = logits + row * Vp;
  MaxSum local{-INFINITY, 0.0f};
  float sum = 0.0f;
  for (std::int64_t c = x; c < V; c += thread.block_dim().x) {
    const float value = kernels::Element<In>::widen(z[c]);
    local = merge(local, {value, 1.0f});
    sum += value;
  }
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSum other{thread.shfl_xor(local.max, offset), thread.shfl_xor(local.sum, offset)};
    local = merge(local, other);
    sum += thread.shfl_xor(sum, offset);
  }
  const auto warps = thread.shared(shared.warps);
  const auto sums = thread.shared(shared.sums);
  if (x % kWarpSize == 0) {
    warps[x / kWarpSize] = local;
    sums[x / kWarpSize] = sum;
  }
  thread.sync_block();
  if (x == 0) {
    MaxSum total = warps[0];
    for (int w = 1; w < kLayerThreads / kWarpSize; ++w) total = merge(total, warps[w]);
    const float lse = total.max + logf(total.sum);
    logsumexp[row] = lse;
    const int target = targets[row];
    if (target < 0 || target >= V) {
      losses[row] = 0.0f;
      return;
    }
    float loss = lse - kernels::Element<In>::widen(z[target]);
    if (label_smoothing != 0.0f) {
      float row_sum = sums[0];
      for (int w = 1; w < kLayerThreads / kWarpSize; ++w) row_sum += sums[w];
      const float mean = row_sum / static_cast<float>(V);
      loss = (1.0f - label_smoothing) * loss + label_smoothing * (lse - mean);
    }
    losses[row] = loss;
  }
}

// One block per row: dlogits = scale · (softmax - (1 - ε)·onehot(target) - ε / V) over the first V
// columns of counted rows, 0 elsewhere (as cpu::crossentropy_backward; ε = 0 subtracts scale at the
// target), from the forward's logits (In: float or 16-bit, widened exactly) and logsumexp, rounded
// once into Out: float (dlogits may be `logits` itself: each element is read before the same thread
// writes it) or a 16-bit storage type (the LM head's GEMM operand, written without an fp32 copy).
template <typename Out, typename In, typename Thread>
ZERO_HOST_DEVICE void crossentropy_backward_body(const Thread& thread, Out* dlogits,
                                                 const In* logits, const float* logsumexp,
                                                 const int* targets, std::int64_t V,
                                                 std::int64_t Vp, float scale,
                                                 float label_smoothing) {
  const std::int64_t row = thread.block_index().x;
  const In* z = logits + row * Vp;
  Out* dz = dlogits + row * Vp;
  const int target = targets[row];
  const bool counted = target >= 0 && target < V;
  const float lse = logsumexp[row];
  const float uniform = scale * label_smoothing / static_cast<float>(V);
  const float at_target = scale * (1.0f - label_smoothing);
  for (std::int64_t c = thread.thread_index().x; c < Vp; c += thread.block_dim().x) {
    if (!counted || c >= V) {
      dz[c] = kernels::Element<Out>::narrow(0.0f);
      continue;
    }
    float d = scale * expf(kernels::Element<In>::widen(z[c]) - lse);
    if (label_smoothing != 0.0f) d -= uniform;
    if (c == target) d -= at_target;
    dz[c] = kernels::Element<Out>::narrow(d);
  }
}

}  // namespace zero::gpt2::cuda
