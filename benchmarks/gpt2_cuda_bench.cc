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

#include "attention_cudnn.h"
#include "layers_cuda.h"
#include "zero/core/cuda_ops.h"
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

// GPT-2 124M's sizes and the table being filled.
struct Bench {
  std::int64_t B = 16, T = 1024;
  static constexpr std::int64_t L = 12, C = 768, NH = 12, V = 50257, Vp = 50304;
  std::int64_t N() const { return B * T; }
  int reps = 10;
  Arena arena;
  std::vector<Row> rows;
  const zero::gpt2::DropoutSite no_dropout{};
  int* tokens = nullptr;  // (B, T), device
  std::vector<int> host_tokens;

  void add(std::string kernel, std::string shape, int calls, double work, bool flops,
           const std::function<void()>& call) {
    rows.push_back({std::move(kernel), std::move(shape), calls, time_ms(call, reps), work, flops});
  }
};

void time_embeddings_and_norms(Bench& b) {
  const std::int64_t N = b.N(), C = b.C, L = b.L;
  b.tokens = b.arena.take<int>(N);
  b.host_tokens.resize(N);
  for (std::int64_t i = 0; i < N; ++i) b.host_tokens[i] = static_cast<int>((i * 7919) % b.V);
  check(cudaMemcpy(b.tokens, b.host_tokens.data(), N * sizeof(int), cudaMemcpyHostToDevice),
        "tokens");
  float* wte = b.arena.take<float>(b.Vp * C);
  float* wpe = b.arena.take<float>(b.T * C);
  float* x = b.arena.take<float>(N * C);
  float* dx = b.arena.take<float>(N * C);
  b.add("encoder_forward", shape_of(N, C), 1, 3.0 * N * C * 4, false,
        [&] { cuda::encoder_forward(x, b.tokens, wte, wpe, b.B, b.T, C, b.no_dropout, nullptr); });
  b.add("encoder_backward", shape_of(N, C), 1, 3.0 * N * C * 4, false, [&] {
    cuda::encoder_backward(wte, wpe, dx, b.host_tokens.data(), b.B, b.T, C, b.no_dropout, nullptr);
  });
  // Layer norms: ln_1 and ln_2 fused with the residual, ln_f plain.
  float* ln = b.arena.take<float>(N * C);
  float* residual = b.arena.take<float>(N * C);
  float* mean = b.arena.take<float>(N);
  float* rstd = b.arena.take<float>(N);
  float* weight = b.arena.take<float>(C, 1.0f);
  float* bias = b.arena.take<float>(C);
  float* dweight = b.arena.take<float>(C);
  float* dbias = b.arena.take<float>(C);
  // fp32 outputs: an fp32 run's (0 calls: the step total is a bf16 run's, below).
  b.add("residual_layernorm_forward", shape_of(N, C), 0, 4.0 * N * C * 4, false, [&] {
    cuda::residual_layernorm_forward(residual, ln, DType::kFloat32, mean, rstd, x, dx, weight, bias,
                                     b.B, b.T, C, 1e-5f, b.no_dropout, nullptr);
  });
  b.add("layernorm_forward", shape_of(N, C), 0, 2.0 * N * C * 4, false, [&] {
    cuda::layernorm_forward(ln, DType::kFloat32, mean, rstd, x, weight, bias, N, C, 1e-5f, nullptr);
  });
  // The same with the bf16 outputs a bf16 run keeps (gemm_input_dtype): ln_1 and ln_2 fused with
  // the residual, ln_f plain.
  auto* ln16 = b.arena.take<std::uint16_t>(N * C);
  b.add("residual_layernorm_forward (bf16 out)", shape_of(N, C), int(2 * L), 3.5 * N * C * 4, false,
        [&] {
          cuda::residual_layernorm_forward(residual, ln16, DType::kBFloat16, mean, rstd, x, dx,
                                           weight, bias, b.B, b.T, C, 1e-5f, b.no_dropout, nullptr);
        });
  b.add("layernorm_forward (bf16 out)", shape_of(N, C), 1, 1.5 * N * C * 4, false, [&] {
    cuda::layernorm_forward(ln16, DType::kBFloat16, mean, rstd, x, weight, bias, N, C, 1e-5f,
                            nullptr);
  });
  b.add("layernorm_backward", shape_of(N, C), int(2 * L + 1), 4.0 * N * C * 4, false, [&] {
    cuda::layernorm_backward(dx, dweight, dbias, ln, x, weight, mean, rstd, N, C, nullptr);
  });
}

void time_gelu_and_attention(Bench& b) {
  const std::int64_t N = b.N(), C = b.C, L = b.L, NH = b.NH, B = b.B, T = b.T;
  float* h = b.arena.take<float>(N * 4 * C);
  float* dh = b.arena.take<float>(N * 4 * C);
  b.add("gelu_forward", shape_of(N, 4 * C), 0, 2.0 * N * 4 * C * 4, false,
        [&] { cuda::gelu_forward(dh, DType::kFloat32, h, N * 4 * C, nullptr); });
  // A bf16 run's GELU writes bf16 (gemm_input_dtype) from the fc GEMM's fp32 output.
  auto* h16 = b.arena.take<std::uint16_t>(N * 4 * C);
  b.add("gelu_forward (bf16 out)", shape_of(N, 4 * C), int(L), 1.5 * N * 4 * C * 4, false,
        [&] { cuda::gelu_forward(h16, DType::kBFloat16, h, N * 4 * C, nullptr); });
  // GELU's backward as its own pass: 0 calls, fc's backward applies it in its staged pass
  // (gelu_bias_backward_staged, below).
  b.add("gelu_backward", shape_of(N, 4 * C), 0, 3.0 * N * 4 * C * 4, false,
        [&] { cuda::gelu_backward(dh, h, dh, N * 4 * C, nullptr); });
  // Attention: the tiled kernels (the model's), and the plain ones with their T×T probabilities.
  float* out = b.arena.take<float>(N * C);
  float* dout = b.arena.take<float>(N * C);
  float* qkv = b.arena.take<float>(N * 3 * C);
  float* dqkv = b.arena.take<float>(N * 3 * C);
  float* att = b.arena.take<float>(B * NH * T * T);
  float* datt = b.arena.take<float>(B * NH * T * T);
  const double flops = 4.0 * B * NH * T * T * (C / NH);  // QKᵀ and AV, the causal half counted
  // cuDNN's fused SDPA in bf16 (the model's attention in a bf16 run without dropout; its fp32 ↔
  // bf16 conversions not counted here) when the build and the device have it; then the tiled
  // fp32 kernels count 0 calls per step.
  static zero::gpt2::cuda::CudnnAttention cudnn;
  std::string why;
  const bool with_cudnn = cudnn.supports(B, T, C, NH, &why);
  if (with_cudnn) {
    auto* qkv16 = b.arena.take<std::uint16_t>(N * 3 * C);
    auto* dqkv16 = b.arena.take<std::uint16_t>(N * 3 * C);
    auto* out16 = b.arena.take<std::uint16_t>(N * C);
    auto* dout16 = b.arena.take<std::uint16_t>(N * C);
    const std::size_t workspace_bytes =
        std::max(cudnn.forward_workspace(B, T, C, NH), cudnn.backward_workspace(B, T, C, NH));
    void* workspace = b.arena.take<std::uint8_t>(workspace_bytes);
    b.add("attention_cudnn_forward", shape_of(B * NH, T, T), int(L), flops, true,
          [&, workspace] { cudnn.forward(out16, att, qkv16, B, T, C, NH, workspace, nullptr); });
    b.add("attention_cudnn_backward", shape_of(B * NH, T, T), int(L), 2.0 * flops, true,
          [&, workspace] {
            cudnn.backward(dqkv16, qkv16, out16, dout16, att, B, T, C, NH, workspace, nullptr);
          });
  } else {
    std::printf("cuDNN attention not timed: %s\n", why.c_str());
  }
  const int tiled_calls = with_cudnn ? 0 : int(L);
  b.add("attention_forward", shape_of(B * NH, T, T), tiled_calls, flops, true,
        [&] { cuda::attention_forward(out, att, qkv, B, T, C, NH, b.no_dropout, nullptr); });
  b.add("attention_backward", shape_of(B * NH, T, T), tiled_calls, 2.0 * flops, true, [&] {
    cuda::attention_backward(dqkv, datt, dout, out, qkv, att, B, T, C, NH, b.no_dropout, nullptr);
  });
  // Not in the model's step (0 calls per step): the reference the tiled kernels replace.
  b.add("attention_plain_forward", shape_of(B * NH, T, T), 0, flops, true,
        [&] { cuda::attention_plain_forward(out, att, qkv, B, T, C, NH, b.no_dropout, nullptr); });
  b.add("attention_plain_backward", shape_of(B * NH, T, T), 0, 2.0 * flops, true, [&] {
    cuda::attention_plain_backward(dqkv, datt, dout, qkv, att, B, T, C, NH, b.no_dropout, nullptr);
  });
}

// The bf16 linear backward's one pass over dout (fp32, N × OC) per linear: dbias's column sums and
// dout rounded into the GEMMs' bf16 staging (read 4 bytes, write 2 per element); fc's also reads
// the GELU's pre-activation and applies GELU's backward (gelu_bias_backward_staged: 10 bytes per
// element, where gelu_backward then bias_backward_staged moved 12 + 6). The passes fc's replaced,
// and the fp32 run's bias_backward, count 0 calls.
void time_bias_passes(Bench& b, const float* dout, std::uint16_t* staged) {
  const std::int64_t N = b.N(), C = b.C, L = b.L;
  constexpr DType kBf16 = DType::kBFloat16;
  float* dbias = b.arena.take<float>(4 * C);
  float* preactivation = b.arena.take<float>(N * 4 * C);
  struct Pass {
    const char* linear;
    std::int64_t OC;
    int calls;
  };
  for (const Pass& p : {Pass{"qkv", 3 * C, int(L)}, Pass{"attn_proj, fc_proj", C, int(2 * L)},
                        Pass{"fc (unfused)", 4 * C, 0}}) {
    b.add(std::string("bias_backward_staged ") + p.linear, shape_of(N, p.OC), p.calls,
          6.0 * N * p.OC, false,
          [&] { cuda::bias_backward_staged(dbias, staged, kBf16, dout, N, p.OC, nullptr); });
  }
  b.add("gelu_bias_backward_staged fc", shape_of(N, 4 * C), int(L), 10.0 * N * 4 * C, false, [&] {
    cuda::gelu_bias_backward_staged(dbias, staged, kBf16, dout, preactivation, N, 4 * C, nullptr);
  });
  b.add("bias_backward (fp32)", shape_of(N, 3 * C), 0, double(N) * 3 * C * 4, false,
        [&] { cuda::bias_backward(dbias, dout, N, 3 * C, nullptr); });
}

// bf16 operands, fp32 accumulation and output, as the model's bf16 path: forward out = inp · W,
// backward dinp = dout · Wᵀ and dW += inpᵀ · dout, per layer and the lm head; then the bias
// passes (time_bias_passes) and the fused softmax + cross-entropy over the padded vocabulary (fp32
// logits).
void time_gemms_and_loss(Bench& b) {
  const std::int64_t N = b.N(), C = b.C, L = b.L, Vp = b.Vp;
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
  std::uint16_t* a16 = b.arena.take<std::uint16_t>(N * 4 * C);
  std::uint16_t* w16 = b.arena.take<std::uint16_t>(C * Vp);
  std::uint16_t* d16 = b.arena.take<std::uint16_t>(N * Vp);
  float* out32 = b.arena.take<float>(N * Vp);
  float* dw32 = b.arena.take<float>(C * Vp);
  constexpr DType kBf16 = DType::kBFloat16, kFp32 = DType::kFloat32;
  for (const Linear& l : linears) {
    const double flops = 2.0 * N * l.in * l.out;
    const std::string name = std::string("gemm_bf16 ") + l.name;
    b.add(name + " fwd", shape_of(N, l.in, l.out), l.count, flops, true, [&] {
      cuda::gemm(false, false, N, l.out, l.in, a16, l.in, w16, l.out, kBf16, 0.0f, out32, l.out,
                 kFp32, {}, nullptr);
    });
    b.add(name + " dinp", shape_of(N, l.out, l.in), l.count, flops, true, [&] {
      cuda::gemm(false, true, N, l.in, l.out, d16, l.out, w16, l.out, kBf16, 0.0f, out32, l.in,
                 kFp32, {}, nullptr);
    });
    b.add(name + " dweight", shape_of(l.in, N, l.out), l.count, flops, true, [&] {
      cuda::gemm(true, false, l.in, l.out, N, a16, l.in, d16, l.out, kBf16, 1.0f, dw32, l.out,
                 kFp32, {}, nullptr);
    });
  }
  time_bias_passes(b, out32, d16);
  float* losses = b.arena.take<float>(N);
  float* logsumexp = b.arena.take<float>(N);
  b.add("crossentropy_forward", shape_of(N, Vp), 1, double(N) * Vp * 4, false, [&] {
    cuda::crossentropy_forward(losses, logsumexp, out32, b.tokens, N, b.V, Vp, nullptr);
  });
  b.add("crossentropy_backward", shape_of(N, Vp), 1, 2.0 * N * Vp * 4, false, [&] {
    cuda::crossentropy_backward(out32, logsumexp, b.tokens, N, b.V, Vp, 1.0f / N, nullptr);
  });
}

// The embedding rows at U = 4096 distinct tokens (rows.cu, one launch each): the forward's widen of
// the bf16 wte rows, the backward's accumulate into them, each after the upload of its row indices
// from pinned memory (CudaKernels::with_device_rows); copy_rows is the classifier head's (0 calls
// in the LM's step). The per-row conversions they replaced are timed for reference (0 calls).
void time_rows(Bench& b) {
  constexpr std::int64_t U = 4096, C = Bench::C;
  std::uint16_t* wte16 = b.arena.take<std::uint16_t>(b.Vp * C);
  float* out = b.arena.take<float>(U * C);
  float* wte32 = b.arena.take<float>(b.Vp * C);
  int* rows = b.arena.take<int>(U);
  std::int64_t* wide = b.arena.take<std::int64_t>(U);
  std::vector<int> host(U);
  std::vector<std::int64_t> host_wide(U);
  for (std::int64_t i = 0; i < U; ++i) host_wide[i] = host[i] = static_cast<int>(i * 7919 % b.V);
  check(cudaMemcpy(wide, host_wide.data(), U * sizeof(std::int64_t), cudaMemcpyHostToDevice),
        "rows");
  int* pinned = nullptr;
  check(cudaMallocHost(&pinned, U * sizeof(int)), "cudaMallocHost");
  std::copy(host.begin(), host.end(), pinned);
  auto upload = [&] {
    check(cudaMemcpyAsync(rows, pinned, U * sizeof(int), cudaMemcpyHostToDevice, nullptr),
          "upload");
  };
  constexpr DType kBf16 = DType::kBFloat16;
  b.add("widen_rows bf16 (+ upload)", shape_of(U, C), 1, double(U) * C * 6 + U * 4, false, [&] {
    upload();
    cuda::widen_rows(out, wte16, kBf16, rows, U, C, nullptr);
  });
  b.add("accumulate_rows bf16 (+ upload)", shape_of(U, C), 1, double(U) * C * 8 + U * 4, false,
        [&] {
          upload();
          cuda::accumulate_rows(wte16, kBf16, out, rows, U, C, nullptr);
        });
  b.add("copy_rows gather fp32", shape_of(U, C), 0, double(U) * C * 8, false,
        [&] { cuda::copy_rows(out, wte32, wide, U, C, false, nullptr); });
  b.add("widen_rows per row (before)", shape_of(U, C), 0, double(U) * C * 6, false, [&] {
    for (std::int64_t i = 0; i < U; ++i)
      zero::convert_on_device(wte16 + std::int64_t{host[i]} * C, kBf16, out + i * C,
                              DType::kFloat32, C, nullptr);
  });
  check(cudaFreeHost(pinned), "cudaFreeHost");
}

void print_table(const Bench& b) {
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  std::printf("# %s, GPT-2 124M shapes, B=%lld T=%lld, median of %d calls; %s\n", properties.name,
              static_cast<long long>(b.B), static_cast<long long>(b.T), b.reps,
              cuda::cublaslt_version());
  std::printf("%-32s %-18s %6s %10s %10s %10s\n", "kernel", "shape", "calls", "ms/call", "ms/step",
              "rate");
  double total = 0.0;
  for (const Row& row : b.rows) {
    const double per_step = row.ms * row.calls;
    total += per_step;
    const double rate = row.work / (row.ms / 1e3) / (row.flops ? 1e12 : 1e9);
    std::printf("%-32s %-18s %6d %10.3f %10.3f %7.1f %s\n", row.kernel.c_str(), row.shape.c_str(),
                row.calls, row.ms, per_step, rate, row.flops ? "TFLOP/s" : "GB/s");
  }
  std::printf(
      "total %.1f ms per training step of kernels alone = %.0f tokens/s (no optimizer, "
      "no overlap)\n",
      total, double(b.N()) / (total / 1e3));
}

}  // namespace

int main(int argc, char** argv) {
  Bench bench;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batch") == 0)
      bench.B = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--seq") == 0)
      bench.T = std::atoll(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reps") == 0)
      bench.reps = std::atoi(argv[i + 1]);
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
    time_embeddings_and_norms(bench);
    time_gelu_and_attention(bench);
    time_gemms_and_loss(bench);
    time_rows(bench);
    print_table(bench);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gpt2_cuda_bench: %s\n", error.what());
    return 1;
  }
  return 0;
}
