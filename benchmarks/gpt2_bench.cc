// GPT-2 124M forward+backward on CPU at B=4, T=64, fp32 and bf16 parameters side by side: step
// time, tokens/s and GFLOP/s as a fraction of the best single-GEMM rate of that precision (GPT-2
// shapes, same run, same backend); then the same step in PyTorch (benchmarks/gpt2_bench_torch.py:
// transformers' GPT2LMHeadModel with SDPA attention where importable, else the op-by-op model of
// tests/golden/gpt2_reference.py; it says which ran).
// Flags: Google Benchmark's, plus --no_torch. Env: GPT2_BENCH_BATCH, GPT2_BENCH_SEQ,
// ZERO_GEMM_BACKEND, ZERO_GEMM_BF16_BACKEND (onednn | widen), ZERO_PYTHON. The "CPU" column is
// process CPU time: on a shared machine, CPU/real below the thread count means other processes took
// the cores.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/model.h"

namespace {

using zero::gpt2::GPT2Compute;
using zero::gpt2::GPT2Config;
using zero::gpt2::GPT2Model;

std::int64_t env_int(const char* name, std::int64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoll(value) : fallback;
}
const std::int64_t kBatch = env_int("GPT2_BENCH_BATCH", 4);
const std::int64_t kSeq = env_int("GPT2_BENCH_SEQ", 64);

double best_gemm_gflops = 0.0, best_bf16_gemm_gflops = 0.0;

// Training FLOPs of one step: 3 × forward (backward = 2 × forward), forward = matmuls + the
// causal attention actually computed + the tied head.
double step_flops(const GPT2Config& config, std::int64_t B, std::int64_t T) {
  const double N = double(B * T), C = double(config.n_embd), H = double(config.hidden_size());
  const double matmuls = 2.0 * N * (C * 3 * C + C * C + 2 * C * H) * double(config.n_layer);
  const double attention = 4.0 * double(B) * double(T * (T + 1) / 2) * C * double(config.n_layer);
  const double head = 2.0 * N * C * double(config.padded_vocab_size());
  return 3.0 * (matmuls + attention + head);
}

// One GEMM of the step: (M, K) · (K, N) with the given transposes.
void BM_Sgemm(benchmark::State& state) {
  const bool trans_a = state.range(3) & 1, trans_b = state.range(3) & 2;
  const std::int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  std::vector<float> a(M * K, 0.01f), b(K * N, 0.02f), c(M * N);
  for (auto _ : state) {
    zero::gpt2::cpu::gemm(trans_a, trans_b, M, N, K, 1.0f, a.data(), trans_a ? M : K, b.data(),
                          trans_b ? K : N, 0.0f, c.data(), N);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * double(M) * double(N) * double(K);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The same GEMMs with bf16 inputs and fp32 output (gemm_bf16).
void BM_Bf16Gemm(benchmark::State& state) {
  const bool trans_a = state.range(3) & 1, trans_b = state.range(3) & 2;
  const std::int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  std::vector<zero::BFloat16> a(M * K, zero::to_bf16(0.01f)), b(K * N, zero::to_bf16(0.02f));
  std::vector<float> c(M * N);
  for (auto _ : state) {
    zero::gpt2::cpu::gemm_bf16(trans_a, trans_b, M, N, K, a.data(), trans_a ? M : K, b.data(),
                               trans_b ? K : N, 0.0f, c.data(), N);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * double(M) * double(N) * double(K);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

struct Step {
  zero::MemoryLedger ledger;
  zero::HostAllocator allocator{ledger};
  const std::unique_ptr<zero::DeviceContext> context = zero::make_cpu_context();
  GPT2Config config = GPT2Config::gpt2_124m();
  std::unique_ptr<GPT2Model> model;
  std::unique_ptr<GPT2Compute> compute;
  std::vector<int> tokens, targets;
  Step(bool checkpointing) {
    model = std::make_unique<GPT2Model>(config, allocator);
    model->init(1);
    compute = std::make_unique<GPT2Compute>(
        config, kBatch, kSeq, *context, allocator,
        zero::gpt2::ComputeOptions{.activation_checkpointing = checkpointing});
    for (std::int64_t i = 0; i < kBatch * kSeq; ++i) {
      tokens.push_back(static_cast<int>((i * 7919) % config.vocab_size));
      targets.push_back(static_cast<int>((i * 7919 + 1) % config.vocab_size));
    }
  }
};

// The model's parameters (and gradients) in 16 bits, driven unit by unit as the engine does.
struct Step16 {
  zero::MemoryLedger ledger;
  zero::HostAllocator allocator{ledger};
  const std::unique_ptr<zero::DeviceContext> context = zero::make_cpu_context();
  GPT2Config config = GPT2Config::gpt2_124m();
  zero::DType grad_dtype;
  std::vector<std::vector<std::uint16_t>> params;
  std::vector<std::vector<float>> grads32;
  std::vector<std::vector<std::uint16_t>> grads16;
  std::unique_ptr<GPT2Compute> compute;
  std::vector<int> tokens, targets;
  Step16(zero::DType dtype, zero::DType grads) : grad_dtype(grads) {
    GPT2Model model(config, allocator);
    model.init(1);
    for (int unit = 0; unit < model.num_units(); ++unit) {
      const std::size_t count = model.params(unit).layout().padded_num_elements();
      params.emplace_back(count);
      zero::convert(model.param_data(unit), zero::DType::kFloat32, params.back().data(), dtype,
                    count);
      if (grads == zero::DType::kFloat32)
        grads32.emplace_back(count);
      else
        grads16.emplace_back(count);
    }
    compute = std::make_unique<GPT2Compute>(config, kBatch, kSeq, *context, allocator,
                                            zero::gpt2::ComputeOptions{.param_dtype = dtype});
    for (std::int64_t i = 0; i < kBatch * kSeq; ++i) {
      tokens.push_back(static_cast<int>((i * 7919) % config.vocab_size));
      targets.push_back(static_cast<int>((i * 7919 + 1) % config.vocab_size));
    }
  }
  zero::gpt2::ConstUnitData p(int unit) const {
    return {params[unit].data(), compute->param_dtype()};
  }
  zero::gpt2::UnitData g(int unit) {
    if (grad_dtype == zero::DType::kFloat32) return grads32[unit].data();
    return {grads16[unit].data(), grad_dtype};
  }
  float run() {
    for (auto& grad : grads32) std::fill(grad.begin(), grad.end(), 0.0f);
    for (auto& grad : grads16) std::fill(grad.begin(), grad.end(), std::uint16_t{0});
    using zero::gpt2::block_unit;
    const int emb = zero::gpt2::embeddings_unit(), head = zero::gpt2::final_norm_unit(config);
    compute->set_inputs(tokens, targets);
    compute->forward_embeddings(p(emb));
    for (int l = 0; l < config.n_layer; ++l) compute->forward_block(l, p(block_unit(l)));
    compute->forward_head(p(head), p(emb));
    compute->backward_head(p(head), p(emb), g(head), g(emb));
    for (int l = config.n_layer - 1; l >= 0; --l)
      compute->backward_block(l, p(block_unit(l)), g(block_unit(l)));
    compute->backward_embeddings(p(emb), g(emb));
    return compute->loss();
  }
};

void set_step_counters(benchmark::State& state, const GPT2Config& config) {
  const double flops = step_flops(config, kBatch, kSeq);
  state.counters["tokens/s"] =
      benchmark::Counter(double(kBatch * kSeq), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/step"] = flops * 1e-9;
}

void BM_GPT2Step(benchmark::State& state) {
  Step step(state.range(0) != 0);
  for (auto _ : state) {
    step.model->zero_grads();
    benchmark::DoNotOptimize(step.model->forward(*step.compute, step.tokens, step.targets));
    step.model->backward(*step.compute);
  }
  set_step_counters(state, step.config);
}

// bf16 parameters; gradients fp32 (grads:0, DeepSpeed's bf16 default) or bf16 (grads:1).
void BM_GPT2StepBf16(benchmark::State& state) {
  Step16 step(zero::DType::kBFloat16,
              state.range(0) != 0 ? zero::DType::kBFloat16 : zero::DType::kFloat32);
  for (auto _ : state) benchmark::DoNotOptimize(step.run());
  set_step_counters(state, step.config);
}

// Keeps the best rate of each benchmark over its repetitions (the least disturbed run on a shared
// machine) and prints the step as a fraction of the best single-GEMM rate at the end.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Iteration || !run.counters.count("GFLOP/s")) continue;
      const double rate = run.counters.at("GFLOP/s");
      if (run.benchmark_name().starts_with("BM_Sgemm"))
        best_gemm_gflops = std::max(best_gemm_gflops, rate);
      if (run.benchmark_name().starts_with("BM_Bf16Gemm"))
        best_bf16_gemm_gflops = std::max(best_bf16_gemm_gflops, rate);
      const char* steps[4] = {"BM_GPT2Step/checkpointing:0", "BM_GPT2Step/checkpointing:1",
                              "BM_GPT2StepBf16/bf16_grads:0", "BM_GPT2StepBf16/bf16_grads:1"};
      for (int i = 0; i < 4; ++i) {
        if (!run.benchmark_name().starts_with(steps[i])) continue;
        best_step_gflops_[i] = std::max(best_step_gflops_[i], rate);
        // Process CPU seconds per step (all threads): what the step costs when the cores are
        // shared and wall time mostly measures the other processes.
        const double cpu = run.GetAdjustedCPUTime() * 1e-3;  // unit: ms
        best_step_cpu_[i] = best_step_cpu_[i] > 0 ? std::min(best_step_cpu_[i], cpu) : cpu;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void print_summary(double step_flops) const {
    const char* labels[4] = {"", " (activation checkpointing)", " (bf16)", " (bf16, bf16 grads)"};
    for (int i = 0; i < 4; ++i) {
      const double rate = best_step_gflops_[i];
      if (rate <= 0) continue;
      const double seconds = step_flops * 1e-9 / rate;
      const double gemm_rate = i >= 2 ? best_bf16_gemm_gflops : best_gemm_gflops;
      std::printf("best step%s: %.3f s, %.0f tokens/s, %.1f GFLOP/s", labels[i], seconds,
                  double(kBatch * kSeq) / seconds, rate);
      if (gemm_rate > 0)
        std::printf(" = %.0f%% of the best %s GEMM rate (%.1f GFLOP/s)", 100.0 * rate / gemm_rate,
                    i >= 2 ? "bf16" : "fp32", gemm_rate);
      if (i >= 2 && best_step_gflops_[0] > 0)
        std::printf("; %.2fx the fp32 step", best_step_gflops_[0] / rate);
      std::printf("; least process CPU time %.3f s/step", best_step_cpu_[i]);
      if (i >= 2 && best_step_cpu_[0] > 0)
        std::printf(" (%.2fx fp32's)", best_step_cpu_[i] / best_step_cpu_[0]);
      std::printf("\n");
    }
  }

 private:
  double best_step_gflops_[4] = {0.0, 0.0, 0.0, 0.0};
  double best_step_cpu_[4] = {0.0, 0.0, 0.0, 0.0};
};

// The GEMMs of a GPT-2 124M step, (M, N, K, transposes): the fp32 and bf16 rates are measured on
// the same shapes.
void gpt2_gemm_shapes(benchmark::internal::Benchmark* benchmark) {
  benchmark
      ->ArgNames({"M", "N", "K", "trans"})
      // forward: qkv, attn proj, fc, fc proj, tied head (x · wteᵀ)
      ->Args({kBatch * kSeq, 2304, 768, 0})
      ->Args({kBatch * kSeq, 768, 768, 0})
      ->Args({kBatch * kSeq, 3072, 768, 0})
      ->Args({kBatch * kSeq, 768, 3072, 0})
      ->Args({kBatch * kSeq, 50304, 768, 2})
      // backward: dinp = dout · Wᵀ, dW = xᵀ · dout (fc), head dwte = dlogitsᵀ · x
      ->Args({kBatch * kSeq, 768, 3072, 2})
      ->Args({768, 3072, kBatch * kSeq, 1})
      ->Args({50304, 768, kBatch * kSeq, 1});
}

}  // namespace

BENCHMARK(BM_Sgemm)
    ->Apply(gpt2_gemm_shapes)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(BM_Bf16Gemm)
    ->Apply(gpt2_gemm_shapes)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->Repetitions(3)
    ->UseRealTime();
BENCHMARK(BM_GPT2Step)
    ->ArgName("checkpointing")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(5);
BENCHMARK(BM_GPT2StepBf16)
    ->ArgName("bf16_grads")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Iterations(1)
    ->Repetitions(5);

int main(int argc, char** argv) {
  // OpenBLAS 0.3.21 does not recognise recent Xeons and runs its generic (Prescott) kernels, so
  // the library falls back to Eigen; OPENBLAS_CORETYPE is read when OpenBLAS loads, so the
  // benchmark restarts itself once with the right core named (printed below).
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && std::getenv("ZERO_GEMM_BACKEND") == nullptr &&
      zero::gpt2::cpu::gemm_backend().find("generic kernels") != std::string::npos) {
    const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell";
    std::printf(
        "OpenBLAS chose generic kernels on this CPU; restarting with OPENBLAS_CORETYPE=%s\n", core);
    std::fflush(stdout);
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
  }
  bool run_torch = true;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_torch") == 0)
      run_torch = false;
    else
      args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const char* l2 = std::getenv("OPENBLAS_L2_SIZE");
  std::printf("GPT-2 124M, B=%lld T=%lld; GEMM backend: %s; bf16 GEMMs: %s\n",
              static_cast<long long>(kBatch), static_cast<long long>(kSeq),
              zero::gpt2::cpu::gemm_backend().c_str(),
              zero::gpt2::cpu::gemm_bf16_backend().c_str());
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s; %d OpenMP threads, OMP_WAIT_POLICY=%s\n",
              coretype ? coretype : "(unset)", l2 ? l2 : "(unset)", omp_get_max_threads(),
              wait_policy ? wait_policy : "(unset: threads spin, slow when the cores are shared)");
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  reporter.print_summary(step_flops(GPT2Config::gpt2_124m(), kBatch, kSeq));
  std::printf("bf16 GEMMs: %s\n", zero::gpt2::cpu::gemm_bf16_backend().c_str());
  if (!run_torch) return 0;
  // The private venv of scripts/setup.sh (transformers) when present, else Debian's python3.
  std::string python = "/usr/bin/python3";
  const char* venv = std::getenv("ZERO_VENV");
  const char* home = std::getenv("HOME");
  const std::string venv_python =
      venv ? std::string(venv) + "/bin/python"
           : (home ? std::string(home) + "/.cache/zero/venv/bin/python" : std::string());
  if (!venv_python.empty() && access(venv_python.c_str(), X_OK) == 0) python = venv_python;
  if (const char* forced = std::getenv("ZERO_PYTHON")) python = forced;
  const std::string command = python +
                              " " ZERO_SOURCE_DIR "/benchmarks/gpt2_bench_torch.py --batch " +
                              std::to_string(kBatch) + " --seq " + std::to_string(kSeq) +
                              " --steps 5 --threads " + std::to_string(omp_get_max_threads());
  std::printf("PyTorch reference: %s\n", command.c_str());
  std::fflush(stdout);
  const int status = std::system(command.c_str());
  if (status != 0) std::printf("PyTorch reference unavailable (exit status %d)\n", status);
  return 0;
}
