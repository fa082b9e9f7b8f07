// Every GPT-2 CUDA kernel of model/gpt2/src/cuda at GPT-2 124M shapes (L 12, C 768, NH 12,
// Vp 50304; B and T from the flags, default 16 × 1024): time per call (CUDA events, the median of
// --reps calls after two warm-ups), calls per training step, milliseconds per step and the rate
// (TFLOP/s for GEMMs and attention, GB/s of compulsory traffic for the rest). The sum over a step
// is what today's kernels cost before any overlap or fusion the model's device path adds: the
// per-kernel table the GPU issue asks for, before GPT2Compute drives these kernels.
//   gpt2_cuda_bench [--batch 16] [--seq 1024] [--reps 10]
// Exits 0 with a message when no CUDA device is visible.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "layers_cuda.h"
#include "zero/core/device.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"

namespace {

using zero::DType;
namespace cuda = zero::gpt2::cuda;

void check(cudaError_t status, const char* what) {
  ZERO_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

// Device memory filled with small values (so no kernel sees inf/NaN), freed at exit.
class Arena {
 public:
  ~Arena() {
    for (void* block : blocks_) cudaFree(block);
  }
  template <typename T>
  T* take(std::size_t count, float value = 0.01f) {
    void* data = nullptr;
    check(cudaMalloc(&data, std::max<std::size_t>(count, 1) * sizeof(T)), "cudaMalloc");
    blocks_.push_back(data);
    if constexpr (std::is_same_v<T, float>) {
      std::vector<float> host(count, value);
      check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "fill");
    } else if constexpr (std::is_same_v<T, std::uint16_t>) {
      check(cudaMemset(data, 0x3c, count * sizeof(T)), "cudaMemset");  // bf16 0x3c3c = 0.0115
    } else {
      check(cudaMemset(data, 0, count * sizeof(T)), "cudaMemset");
    }
    return static_cast<T*>(data);
  }

 private:
  std::vector<void*> blocks_;
};

struct Row {
  std::string kernel, shape;
  int calls = 0;       // per training step
  double ms = 0.0;     // per call
  double work = 0.0;   // FLOPs or bytes per call
  bool flops = false;  // work counts FLOPs (else bytes)
};

double time_ms(const std::function<void()>& call, int reps) {
  cudaEvent_t begin, end;
  check(cudaEventCreate(&begin), "cudaEventCreate");
  check(cudaEventCreate(&end), "cudaEventCreate");
  for (int i = 0; i < 2; ++i) call();
  std::vector<float> times;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(begin), "cudaEventRecord");
    call();
    check(cudaEventRecord(end), "cudaEventRecord");
    check(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    times.push_back(ms);
  }
  check(cudaGetLastError(), "a kernel launch");
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string shape_of(std::int64_t a, std::int64_t b, std::int64_t c = 0) {
  std::string text = std::to_string(a) + "x" + std::to_string(b);
  if (c > 0) text += "x" + std::to_string(c);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t B = 16, T = 1024;
  int reps = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0) B = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seq") == 0) T = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s (--batch N, --seq N, --reps N)\n", argv[i]);
      return 2;
    }
  }
  if (zero::cuda_device_count() == 0) {
    std::printf("gpt2_cuda_bench: no CUDA device visible\n");
    return 0;
  }
  try {
    const std::int64_t L = 12, C = 768, NH = 12, V = 50257, Vp = 50304, N = B * T;
    const zero::gpt2::DropoutSite no_dropout{};
    Arena arena;
    std::vector<Row> rows;
    auto add = [&](std::string kernel, std::string shape, int calls, double work, bool flops,
                   const std::function<void()>& call) {
      rows.push_back({std::move(kernel), std::move(shape), calls, time_ms(call, reps), work, flops});
    };
    // Embeddings.
    int* tokens = arena.take<int>(N);
    std::vector<int> host_tokens(N);
    for (std::int64_t i = 0; i < N; ++i) host_tokens[i] = static_cast<int>((i * 7919) % V);
    check(cudaMemcpy(tokens, host_tokens.data(), N * sizeof(int), cudaMemcpyHostToDevice), "tokens");
    float* wte = arena.take<float>(Vp * C);
    float* wpe = arena.take<float>(T * C);
    float* x = arena.take<float>(N * C);
    float* dx = arena.take<float>(N * C);
    add("encoder_forward", shape_of(N, C), 1, 3.0 * N * C * 4, false,
        [&] { cuda::encoder_forward(x, tokens, wte, wpe, B, T, C, no_dropout, nullptr); });
    add("encoder_backward", shape_of(N, C), 1, 3.0 * N * C * 4, false, [&] {
      cuda::encoder_backward(wte, wpe, dx, host_tokens.data(), B, T, C, no_dropout, nullptr);
    });
    // Layer norms (ln_1, ln_2 fused with the residual; ln_f plain).
    float* ln = arena.take<float>(N * C);
    float* residual = arena.take<float>(N * C);
    float* mean = arena.take<float>(N);
    float* rstd = arena.take<float>(N);
    float* weight = arena.take<float>(C, 1.0f);
    float* bias = arena.take<float>(C);
    float* dweight = arena.take<float>(C);
    float* dbias = arena.take<float>(C);
    add("residual_layernorm_forward", shape_of(N, C), int(2 * L), 4.0 * N * C * 4, false, [&] {
      cuda::residual_layernorm_forward(residual, ln, mean, rstd, x, dx, weight, bias, B, T, C,
                                       1e-5f, no_dropout, nullptr);
    });
    add("layernorm_forward", shape_of(N, C), 1, 2.0 * N * C * 4, false,
        [&] { cuda::layernorm_forward(ln, mean, rstd, x, weight, bias, N, C, 1e-5f, nullptr); });
    add("layernorm_backward", shape_of(N, C), int(2 * L + 1), 4.0 * N * C * 4, false, [&] {
      cuda::layernorm_backward(dx, dweight, dbias, ln, x, weight, mean, rstd, N, C, nullptr);
    });
    // GELU (fp32 activations (N, 4C)).
    float* h = arena.take<float>(N * 4 * C);
    float* dh = arena.take<float>(N * 4 * C);
    add("gelu_forward", shape_of(N, 4 * C), int(L), 2.0 * N * 4 * C * 4, false,
        [&] { cuda::gelu_forward(dh, h, N * 4 * C, nullptr); });
    add("gelu_backward", shape_of(N, 4 * C), int(L), 3.0 * N * 4 * C * 4, false,
        [&] { cuda::gelu_backward(dh, h, dh, N * 4 * C, nullptr); });
    // Plain attention: T×T scores per head, kept for the backward.
    float* qkv = arena.take<float>(N * 3 * C);
    float* dqkv = arena.take<float>(N * 3 * C);
    float* att = arena.take<float>(B * NH * T * T);
    float* datt = arena.take<float>(B * NH * T * T);
    const double attention_flops = 4.0 * B * NH * T * T * (C / NH);  // QKᵀ and AV, causal ÷2 not taken
    add("attention_forward", shape_of(B * NH, T, T), int(L), attention_flops, true,
        [&] { cuda::attention_forward(x, att, qkv, B, T, C, NH, no_dropout, nullptr); });
    add("attention_backward", shape_of(B * NH, T, T), int(L), 2.0 * attention_flops, true, [&] {
      cuda::attention_backward(dqkv, datt, dx, qkv, att, B, T, C, NH, no_dropout, nullptr);
    });
    // GEMMs, bf16 operands with fp32 accumulation and output, as the model's bf16 path: forward
    // out = inp · W, backward dinp = dout · Wᵀ and dW = inpᵀ · dout, per layer and the lm head.
    struct Linear {
      const char* name;
      std::int64_t in, out;
      int count;
    };
    const Linear linears[] = {{"qkv", C, 3 * C, int(L)},
                              {"attn_proj", C, C, int(L)},
                              {"fc", C, 4 * C, int(L)},
                              {"fc_proj", 4 * C, C, int(L)},
                              {"lm_head", C, Vp, 1}};
    std::int64_t largest = 0;
    for (const Linear& linear : linears) largest = std::max(largest, linear.in * linear.out);
    std::uint16_t* a16 = arena.take<std::uint16_t>(N * 4 * C);
    std::uint16_t* w16 = arena.take<std::uint16_t>(largest);
    std::uint16_t* d16 = arena.take<std::uint16_t>(N * Vp);
    float* out32 = arena.take<float>(N * Vp);
    float* dw32 = arena.take<float>(largest);
    for (const Linear& linear : linears) {
      const double flops = 2.0 * N * linear.in * linear.out;
      const std::string name = std::string("gemm_bf16 ") + linear.name;
      add(name + " fwd", shape_of(N, linear.in, linear.out), linear.count, flops, true, [&] {
        cuda::gemm(false, false, N, linear.out, linear.in, a16, linear.in, w16, linear.out,
                   DType::kBFloat16, 0.0f, out32, linear.out, DType::kFloat32, {}, nullptr);
      });
      add(name + " dinp", shape_of(N, linear.out, linear.in), linear.count, flops, true, [&] {
        cuda::gemm(false, true, N, linear.in, linear.out, d16, linear.out, w16, linear.out,
                   DType::kBFloat16, 0.0f, out32, linear.in, DType::kFloat32, {}, nullptr);
      });
      add(name + " dweight", shape_of(linear.in, N, linear.out), linear.count, flops, true, [&] {
        cuda::gemm(true, false, linear.in, linear.out, N, a16, linear.in, d16, linear.out,
                   DType::kBFloat16, 1.0f, dw32, linear.out, DType::kFloat32, {}, nullptr);
      });
    }
    float* dbias_out = arena.take<float>(4 * C);
    add("bias_backward", shape_of(N, 3 * C), int(4 * L), double(N) * 3 * C * 4, false,
        [&] { cuda::bias_backward(dbias_out, out32, N, 3 * C, nullptr); });
    // Fused softmax + cross-entropy over the padded vocabulary (fp32 logits).
    float* losses = arena.take<float>(N);
    float* logsumexp = arena.take<float>(N);
    add("crossentropy_forward", shape_of(N, Vp), 1, double(N) * Vp * 4, false, [&] {
      cuda::crossentropy_forward(losses, logsumexp, out32, tokens, N, V, Vp, nullptr);
    });
    add("crossentropy_backward", shape_of(N, Vp), 1, 2.0 * N * Vp * 4, false, [&] {
      cuda::crossentropy_backward(out32, logsumexp, tokens, N, V, Vp, 1.0f / N, nullptr);
    });

    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
    std::printf("# %s, GPT-2 124M shapes, B=%lld T=%lld, median of %d calls; %s\n",
                properties.name, static_cast<long long>(B), static_cast<long long>(T), reps,
                cuda::cublaslt_version());
    std::printf("%-32s %-18s %6s %10s %10s %10s\n", "kernel", "shape", "calls", "ms/call",
                "ms/step", "rate");
    double total = 0.0;
    for (const Row& row : rows) {
      const double per_step = row.ms * row.calls;
      total += per_step;
      const double rate = row.work / (row.ms / 1e3) / (row.flops ? 1e12 : 1e9);
      std::printf("%-32s %-18s %6d %10.3f %10.3f %7.1f %s\n", row.kernel.c_str(),
                  row.shape.c_str(), row.calls, row.ms, per_step, rate,
                  row.flops ? "TFLOP/s" : "GB/s");
    }
    std::printf("total %.1f ms per training step of kernels alone = %.0f tokens/s (no optimizer, "
                "no overlap)\n",
                total, double(N) / (total / 1e3));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt2_cuda_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
