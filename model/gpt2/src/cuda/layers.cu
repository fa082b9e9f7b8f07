// GPT-2 CUDA layer kernels except attention and GEMMs: embeddings, (residual +) layer norm, GELU,
// fused softmax + cross-entropy, column sums. Row kernels give a row to a warp; parameter
// gradients are summed over rows in a fixed order (partial sums per row chunk, then the chunks in
// order), so runs are deterministic.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / kWarp;
constexpr std::int64_t kRowChunk = 256;            // rows per partial sum of a parameter gradient
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi), as layers_cpu.cc
constexpr float kGeluCubic = 0.044715f;

int grid_for(std::int64_t work, int per_block = kThreads) {
  return static_cast<int>(std::max<std::int64_t>(
      1, std::min<std::int64_t>((work + per_block - 1) / per_block, 1 << 30)));
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// ---- embeddings ----

__global__ void encoder_forward_kernel(float* out, const int* tokens, const float* wte,
                                       const float* wpe, std::int64_t B, std::int64_t T,
                                       std::int64_t C, DropoutSite dropout) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= B * T * C) return;
  const std::int64_t row = index / C, c = index % C, t = row % T;
  float value = wte[static_cast<std::int64_t>(tokens[row]) * C + c] + wpe[t * C + c];
  if (dropout.active())
    value = dropout.keep(dropout.row_key(row / T, t), static_cast<std::uint64_t>(c))
                ? value * dropout.scale()
                : 0.0f;
  out[index] = value;
}

__device__ __forceinline__ float encoder_gradient(const float* dout, std::int64_t row,
                                                  std::int64_t c, std::int64_t T, std::int64_t C,
                                                  const DropoutSite& dropout) {
  const float d = dout[row * C + c];
  if (!dropout.active()) return d;
  return dropout.keep(dropout.row_key(row / T, row % T), static_cast<std::uint64_t>(c))
             ? d * dropout.scale()
             : 0.0f;
}

// One thread per (bucket, channel): the bucket's rows (one token's, ascending) added in order.
__global__ void encoder_wte_backward_kernel(float* dwte, const float* dout, const int* bucket_token,
                                            const int* bucket_begin, const int* rows,
                                            std::int64_t buckets, std::int64_t T, std::int64_t C,
                                            DropoutSite dropout) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= buckets * C) return;
  const std::int64_t bucket = index / C, c = index % C;
  float* target = dwte + static_cast<std::int64_t>(bucket_token[bucket]) * C + c;
  float sum = *target;
  for (int k = bucket_begin[bucket]; k < bucket_begin[bucket + 1]; ++k)
    sum += encoder_gradient(dout, rows[k], c, T, C, dropout);
  *target = sum;
}

// One thread per (t, channel): rows b·T + t for b ascending, the CPU's order.
__global__ void encoder_wpe_backward_kernel(float* dwpe, const float* dout, std::int64_t B,
                                            std::int64_t T, std::int64_t C, DropoutSite dropout) {
  const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= T * C) return;
  const std::int64_t t = index / C, c = index % C;
  float sum = dwpe[index];
  for (std::int64_t b = 0; b < B; ++b) sum += encoder_gradient(dout, b * T + t, c, T, C, dropout);
  dwpe[index] = sum;
}

// ---- layer norm ----

// One warp per row of `x` (already holding residual + dropout(inp) when fused).
__device__ void layernorm_row(float* y, float* mean, float* rstd, const float* x,
                              const float* weight, const float* bias, std::int64_t row,
                              std::int64_t C, float epsilon, int lane) {
  float sum = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarp) sum += x[c];
  const float m = warp_sum(sum) / static_cast<float>(C);
  float variance_sum = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarp) {
    const float shifted = x[c] - m;
    variance_sum += shifted * shifted;
  }
  const float s = 1.0f / sqrtf(warp_sum(variance_sum) / static_cast<float>(C) + epsilon);
  for (std::int64_t c = lane; c < C; c += kWarp) y[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* weight, const float* bias, std::int64_t N,
                                         std::int64_t C, float epsilon) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  layernorm_row(out + row * C, mean, rstd, inp + row * C, weight, bias, row, C, epsilon,
                threadIdx.x % kWarp);
}

__global__ void residual_layernorm_forward_kernel(float* residual_out, float* out, float* mean,
                                                  float* rstd, const float* residual,
                                                  const float* inp, const float* weight,
                                                  const float* bias, std::int64_t N, std::int64_t T,
                                                  std::int64_t C, float epsilon,
                                                  DropoutSite dropout) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float* r = residual + row * C;
  const float* x = inp + row * C;
  float* sum_row = residual_out + row * C;
  const std::uint64_t key = dropout.active() ? dropout.row_key(row / T, row % T) : 0;
  // Each lane reads back only the elements it wrote itself.
  for (std::int64_t c = lane; c < C; c += kWarp) {
    const float kept = !dropout.active()                                  ? x[c]
                       : dropout.keep(key, static_cast<std::uint64_t>(c)) ? x[c] * dropout.scale()
                                                                          : 0.0f;
    sum_row[c] = r[c] + kept;
  }
  layernorm_row(out + row * C, mean, rstd, sum_row, weight, bias, row, C, epsilon, lane);
}

__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp,
                                                const float* weight, const float* mean,
                                                const float* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const int lane = threadIdx.x % kWarp;
  const float* d = dout + row * C;
  const float* x = inp + row * C;
  const float m = mean[row], s = rstd[row];
  float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
  for (std::int64_t c = lane; c < C; c += kWarp) {
    const float dnorm = weight[c] * d[c];
    dnorm_mean += dnorm;
    dnorm_norm_mean += dnorm * (x[c] - m) * s;
  }
  dnorm_mean = warp_sum(dnorm_mean) / static_cast<float>(C);
  dnorm_norm_mean = warp_sum(dnorm_norm_mean) / static_cast<float>(C);
  float* dx = dinp + row * C;
  for (std::int64_t c = lane; c < C; c += kWarp) {
    const float norm = (x[c] - m) * s;
    dx[c] += (weight[c] * d[c] - dnorm_mean - norm * dnorm_norm_mean) * s;
  }
}

// Column sums in a fixed order: block (column group of 32, row chunk) sums its rows per column
// (8 row lanes, then the lanes in order) into partial[chunk][output][column].
struct LayernormTerms {
  const float* dout;
  const float* inp;
  const float* mean;
  const float* rstd;
  static constexpr int kOutputs = 2;  // dweight, dbias
  __device__ void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                             float* values) const {
    const float d = dout[row * C + c];
    values[0] = (inp[row * C + c] - mean[row]) * rstd[row] * d;
    values[1] = d;
  }
};

struct BiasTerms {
  const float* dout;
  static constexpr int kOutputs = 1;
  __device__ void operator()(std::int64_t row, std::int64_t c, std::int64_t C,
                             float* values) const {
    values[0] = dout[row * C + c];
  }
};

constexpr int kColumnLanes = 32, kRowLanes = 8;

template <typename Terms>
__global__ void column_partials_kernel(float* partial, Terms terms, std::int64_t N,
                                       std::int64_t C) {
  __shared__ float sums[Terms::kOutputs][kRowLanes][kColumnLanes];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kColumnLanes + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_end = std::min<std::int64_t>(N, (chunk + 1) * kRowChunk);
  float local[Terms::kOutputs] = {};
  if (c < C) {
    for (std::int64_t row = chunk * kRowChunk + threadIdx.y; row < row_end; row += kRowLanes) {
      float values[Terms::kOutputs];
      terms(row, c, C, values);
      for (int k = 0; k < Terms::kOutputs; ++k) local[k] += values[k];
    }
  }
  for (int k = 0; k < Terms::kOutputs; ++k) sums[k][threadIdx.y][threadIdx.x] = local[k];
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int k = 0; k < Terms::kOutputs; ++k) {
      float total = 0.0f;
      for (int lane = 0; lane < kRowLanes; ++lane) total += sums[k][lane][threadIdx.x];
      partial[(chunk * Terms::kOutputs + k) * C + c] = total;
    }
  }
}

// target_k[c] += Σ over chunks (in order) of partial[chunk][k][c].
__global__ void add_partials_kernel(float* target0, float* target1, const float* partial,
                                    std::int64_t chunks, int outputs, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int k = 0; k < outputs; ++k) {
    float total = 0.0f;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk)
      total += partial[(chunk * outputs + k) * C + c];
    float* target = k == 0 ? target0 : target1;
    target[c] += total;
  }
}

// `bytes` of device scratch for work enqueued on `stream`: from scratch.allocate (the caller frees
// it), else cudaMallocAsync (free_scratch frees it on the stream).
void* take_scratch(const Scratch& scratch, std::size_t bytes, cudaStream_t stream) {
  if (scratch.allocate) return scratch.allocate(bytes);
  void* data = nullptr;
  ZERO_CUDA_CHECK(cudaMallocAsync(&data, bytes, stream));
  return data;
}
void free_scratch(const Scratch& scratch, void* data, cudaStream_t stream) {
  if (!scratch.allocate) ZERO_CUDA_CHECK(cudaFreeAsync(data, stream));
}

template <typename Terms>
void column_sums(float* target0, float* target1, const Terms& terms, std::int64_t N, std::int64_t C,
                 cudaStream_t stream, const Scratch& scratch) {
  if (N == 0 || C == 0) return;
  const std::int64_t chunks = (N + kRowChunk - 1) / kRowChunk;
  const std::size_t bytes = static_cast<std::size_t>(chunks * Terms::kOutputs * C) * sizeof(float);
  float* partial = static_cast<float*>(take_scratch(scratch, bytes, stream));
  const dim3 grid(static_cast<unsigned>((C + kColumnLanes - 1) / kColumnLanes),
                  static_cast<unsigned>(chunks));
  column_partials_kernel<<<grid, dim3(kColumnLanes, kRowLanes), 0, stream>>>(partial, terms, N, C);
  add_partials_kernel<<<grid_for(C), kThreads, 0, stream>>>(target0, target1, partial, chunks,
                                                            Terms::kOutputs, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  free_scratch(scratch, partial, stream);
}

// ---- residual + dropout, dropout's backward ----

// Element `index` of residual + dropout(inp) (residual null: dropout(inp) alone, which is also
// dropout's backward, mask · scale · dout), as layers_cpu.cc computes it.
__host__ __device__ inline float residual_dropout_element(const float* residual, const float* inp,
                                                          std::int64_t index, std::int64_t T,
                                                          std::int64_t C,
                                                          const DropoutSite& dropout) {
  const float x = inp[index];
  float kept = x;
  if (dropout.active()) {
    const std::int64_t row = index / C;
    kept = dropout.keep(dropout.row_key(row / T, row % T), static_cast<std::uint64_t>(index % C))
               ? x * dropout.scale()
               : 0.0f;
  }
  return residual != nullptr ? residual[index] + kept : kept;
}

__global__ void residual_dropout_kernel(float* out, const float* residual, const float* inp,
                                        std::int64_t n, std::int64_t T, std::int64_t C,
                                        DropoutSite dropout) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = residual_dropout_element(residual, inp, i, T, C, dropout);
}

// ---- GELU ----

__global__ void gelu_forward_kernel(float* out, const float* inp, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  out[i] = 0.5f * x * (1.0f + tanhf(kGeluScale * (x + kGeluCubic * (x * x * x))));
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout,
                                     std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = inp[i];
  const float t = tanhf(kGeluScale * (x + kGeluCubic * (x * x * x)));
  dinp[i] = dout[i] * (0.5f * (1.0f + t) +
                       0.5f * x * (1.0f - t * t) * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x));
}

// ---- softmax + cross-entropy ----

// Online (max, sum of exp(z - max)) pairs, merged (Milakov & Gimelshein 2018).
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float max = fmaxf(a.max, b.max);
  if (max == -INFINITY) return {max, 0.0f};
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

// One block per row: logsumexp over the first V columns without writing probabilities.
__global__ void crossentropy_forward_kernel(float* losses, float* logsumexp, const float* logits,
                                            const int* targets, std::int64_t V, std::int64_t Vp) {
  __shared__ MaxSum warps[kThreads / kWarp];
  const std::int64_t row = blockIdx.x;
  const float* z = logits + row * Vp;
  MaxSum local{-INFINITY, 0.0f};
  for (std::int64_t c = threadIdx.x; c < V; c += blockDim.x) local = merge(local, {z[c], 1.0f});
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, local.max, offset),
                       __shfl_xor_sync(0xffffffffu, local.sum, offset)};
    local = merge(local, other);
  }
  if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = local;
  __syncthreads();
  if (threadIdx.x == 0) {
    MaxSum total = warps[0];
    for (int w = 1; w < kThreads / kWarp; ++w) total = merge(total, warps[w]);
    const float lse = total.max + logf(total.sum);
    logsumexp[row] = lse;
    const int target = targets[row];
    losses[row] = target >= 0 && target < V ? lse - z[target] : 0.0f;
  }
}

// One block per row.
__global__ void crossentropy_backward_kernel(float* logits, const float* logsumexp,
                                             const int* targets, std::int64_t V, std::int64_t Vp,
                                             float scale) {
  const std::int64_t row = blockIdx.x;
  float* z = logits + row * Vp;
  const int target = targets[row];
  const bool counted = target >= 0 && target < V;
  const float lse = logsumexp[row];
  for (std::int64_t c = threadIdx.x; c < Vp; c += blockDim.x) {
    if (!counted || c >= V) {
      z[c] = 0.0f;
      continue;
    }
    float d = scale * expf(z[c] - lse);
    if (c == target) d -= scale;
    z[c] = d;
  }
}

}  // namespace

TokenBuckets token_buckets(const int* host_tokens, std::int64_t N) {
  // A stable sort of row indices by token.
  std::vector<int> order(static_cast<std::size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return host_tokens[a] < host_tokens[b]; });
  std::vector<int> bucket_token, bucket_begin;
  for (std::int64_t k = 0; k < N; ++k) {
    const int token = host_tokens[order[k]];
    ZERO_CHECK(token >= 0, "encoder_backward: token ", token, " at row ", order[k], " is negative");
    if (bucket_token.empty() || bucket_token.back() != token) {
      bucket_token.push_back(token);
      bucket_begin.push_back(static_cast<int>(k));
    }
  }
  bucket_begin.push_back(static_cast<int>(N));
  TokenBuckets result;
  result.buckets = static_cast<std::int64_t>(bucket_token.size());
  result.table.reserve(bucket_token.size() + bucket_begin.size() + order.size());
  result.table.insert(result.table.end(), bucket_token.begin(), bucket_token.end());
  result.table.insert(result.table.end(), bucket_begin.begin(), bucket_begin.end());
  result.table.insert(result.table.end(), order.begin(), order.end());
  return result;
}

void encoder_forward(float* out, const int* tokens, const float* wte, const float* wpe,
                     std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                     cudaStream_t stream) {
  if (B * T * C == 0) return;
  encoder_forward_kernel<<<grid_for(B * T * C), kThreads, 0, stream>>>(out, tokens, wte, wpe, B, T,
                                                                       C, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* host_tokens,
                      std::int64_t B, std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                      cudaStream_t stream, const Scratch& scratch) {
  const std::int64_t N = B * T;
  if (N == 0 || C == 0) return;
  const TokenBuckets grouped = token_buckets(host_tokens, N);
  const std::int64_t buckets = grouped.buckets;
  const std::vector<int>& table = grouped.table;
  const std::size_t bytes = table.size() * sizeof(int);
  int* device_table = static_cast<int*>(take_scratch(scratch, bytes, stream));
  // From pageable memory: returns once `table` is staged, so it may go out of scope.
  ZERO_CUDA_CHECK(
      cudaMemcpyAsync(device_table, table.data(), bytes, cudaMemcpyHostToDevice, stream));
  encoder_wte_backward_kernel<<<grid_for(buckets * C), kThreads, 0, stream>>>(
      dwte, dout, device_table, device_table + buckets, device_table + 2 * buckets + 1, buckets, T,
      C, dropout);
  encoder_wpe_backward_kernel<<<grid_for(T * C), kThreads, 0, stream>>>(dwpe, dout, B, T, C,
                                                                        dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
  free_scratch(scratch, device_table, stream);
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, std::int64_t C, float epsilon,
                       cudaStream_t stream) {
  if (N == 0) return;
  layernorm_forward_kernel<<<grid_for(N, kRowsPerBlock), kThreads, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C, epsilon);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void residual_layernorm_forward(float* residual_out, float* out, float* mean, float* rstd,
                                const float* residual, const float* inp, const float* weight,
                                const float* bias, std::int64_t B, std::int64_t T, std::int64_t C,
                                float epsilon, const DropoutSite& dropout, cudaStream_t stream) {
  const std::int64_t N = B * T;
  if (N == 0) return;
  residual_layernorm_forward_kernel<<<grid_for(N, kRowsPerBlock), kThreads, 0, stream>>>(
      residual_out, out, mean, rstd, residual, inp, weight, bias, N, T, C, epsilon, dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean, const float* rstd,
                        std::int64_t N, std::int64_t C, cudaStream_t stream,
                        const Scratch& scratch) {
  if (N == 0) return;
  layernorm_backward_input_kernel<<<grid_for(N, kRowsPerBlock), kThreads, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  ZERO_CUDA_CHECK(cudaGetLastError());
  column_sums(dweight, dbias, LayernormTerms{dout, inp, mean, rstd}, N, C, stream, scratch);
}

void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t OC,
                   cudaStream_t stream, const Scratch& scratch) {
  column_sums(dbias, nullptr, BiasTerms{dout}, N, OC, stream, scratch);
}

void residual_dropout_forward(float* out, const float* residual, const float* inp, std::int64_t B,
                              std::int64_t T, std::int64_t C, const DropoutSite& dropout,
                              cudaStream_t stream) {
  const std::int64_t n = B * T * C;
  if (n == 0) return;
  residual_dropout_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, residual, inp, n, T, C,
                                                                dropout);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void dropout_backward(float* dinp, const float* dout, std::int64_t B, std::int64_t T,
                      std::int64_t C, const DropoutSite& dropout, cudaStream_t stream) {
  residual_dropout_forward(dinp, nullptr, dout, B, T, C, dropout, stream);
}

void gelu_forward(float* out, const float* inp, std::int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n,
                   cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, inp, dout, n);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_forward(float* losses, float* logsumexp, const float* logits, const int* targets,
                          std::int64_t N, std::int64_t V, std::int64_t Vp, cudaStream_t stream) {
  ZERO_CHECK(V > 0 && V <= Vp, "crossentropy_forward: V = ", V, " must be in [1, Vp = ", Vp, "]");
  if (N == 0) return;
  ZERO_CHECK(N < (std::int64_t{1} << 31), "crossentropy_forward: ", N, " rows exceed the grid");
  crossentropy_forward_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      losses, logsumexp, logits, targets, V, Vp);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

void crossentropy_backward(float* logits, const float* logsumexp, const int* targets,
                           std::int64_t N, std::int64_t V, std::int64_t Vp, float scale,
                           cudaStream_t stream) {
  ZERO_CHECK(V > 0 && V <= Vp, "crossentropy_backward: V = ", V, " must be in [1, Vp = ", Vp, "]");
  if (N == 0) return;
  ZERO_CHECK(N < (std::int64_t{1} << 31), "crossentropy_backward: ", N, " rows exceed the grid");
  crossentropy_backward_kernel<<<static_cast<unsigned>(N), kThreads, 0, stream>>>(
      logits, logsumexp, targets, V, Vp, scale);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
