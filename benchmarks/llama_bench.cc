// A Llama-family training step on CPU beside PyTorch's, in one run: zero's engine at world 1 (the
// path `zero train` runs: EngineModel's micro-step, then Engine::step's AdamW) in fp32 and in bf16
// (bf16 parameters, fp32 gradients, masters and moments, the update rounded to bf16), and
// transformers' LlamaForCausalLM with SDPA and fused AdamW (benchmarks/llama_bench_torch.py, fp32
// and bf16 autocast over fp32 parameters), the same config.json, B, T and thread count.
//
//   llama_bench [--config DIR/config.json] [--batch 4] [--seq 256] [--steps 2] [--rounds 3]
//               [--dtypes fp32,bf16 | fp32 | bf16] [--no_torch]
//
// Each round runs `steps` measured steps of zero fp32, zero bf16, then the PyTorch script (its own
// warm-up step per dtype, then `steps`), so both sides see the same drift of a shared machine; the
// first round starts with one unmeasured step per zero engine. The summary takes each side's best
// step (the least disturbed) and prints tokens/s and zero / torch. Process CPU seconds per step
// are printed beside the wall time: below threads × wall, other processes took the cores.
// Env: ZERO_PYTHON (a python with torch 2.x and transformers; default ~/.cache/zero/venv-torch2),
// OMP_NUM_THREADS and OMP_WAIT_POLICY (both sides), ZERO_GEMM_BACKEND, ZERO_GEMM_BF16_BACKEND.
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/device_context.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/engine_model.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/layers_cpu.h"

namespace {

using zero::gpt2::GPT2Config;

struct Flags {
  std::string config = ZERO_SOURCE_DIR "/benchmarks/configs/llama-124m-gqa/config.json";
  std::int64_t batch = 4, seq = 256, steps = 2, rounds = 3;
  std::string dtypes = "fp32,bf16";  // zero's sides and the PyTorch script's --dtypes
  bool torch = true;
};

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--no_torch") {
      flags.torch = false;
      continue;
    }
    if (i + 1 >= argc) throw std::runtime_error("flag " + name + " needs a value");
    const std::string value = argv[++i];
    if (name == "--config")
      flags.config = value;
    else if (name == "--batch")
      flags.batch = std::stoll(value);
    else if (name == "--seq")
      flags.seq = std::stoll(value);
    else if (name == "--steps")
      flags.steps = std::stoll(value);
    else if (name == "--rounds")
      flags.rounds = std::stoll(value);
    else if (name == "--dtypes")
      flags.dtypes = value;
    else
      throw std::runtime_error("unknown flag " + name);
  }
  if (flags.dtypes != "fp32,bf16" && flags.dtypes != "fp32" && flags.dtypes != "bf16")
    throw std::runtime_error("--dtypes takes fp32,bf16, fp32 or bf16, not " + flags.dtypes);
  if (flags.batch < 1 || flags.seq < 1 || flags.steps < 1 || flags.rounds < 1)
    throw std::runtime_error("--batch, --seq, --steps and --rounds must be positive");
  return flags;
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::string cpu_model_name() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  return "(unknown)";
}

// Training FLOPs of a step: 3 × the forward's matmuls (every linear, the untied or tied head) and
// the causal attention's two products over the half of T² computed.
double step_flops(const GPT2Config& config, std::int64_t B, std::int64_t T) {
  const double N = double(B * T), C = double(config.n_embd), H = double(config.hidden_size());
  const double HS = double(config.head_size()), NH = double(config.n_head);
  const double KVH = double(config.kv_heads());
  const double linears = C * (NH + 2 * KVH) * HS + NH * HS * C + 3 * C * H;
  const double forward =
      2.0 * N * linears * double(config.n_layer) + 2.0 * N * C * double(config.vocab_size) +
      2.0 * 2.0 * double(B) * double(T * (T + 1) / 2) * NH * HS * double(config.n_layer);
  return 3.0 * forward;
}

// One engine (fp32 or bf16) and the model over it, at world 1, stage 0.
struct ZeroSide {
  std::string name;
  std::unique_ptr<zero::DeviceContext> context;
  std::unique_ptr<zero::Communicator> communicator;
  std::unique_ptr<zero::Engine> engine;
  std::unique_ptr<zero::gpt2::EngineModel> model;
  std::vector<int> tokens, targets;
  std::int64_t steps_run = 0;

  ZeroSide(const GPT2Config& config, const Flags& flags, bool bf16) : name(bf16 ? "bf16" : "fp32") {
    zero::EngineOptions options;
    options.stage = 0;
    options.bf16.enabled = bf16;
    options.optimizer.type = zero::config::OptimizerType::kAdamW;
    options.optimizer.lr = 1e-4;
    options.optimizer.weight_decay = 0.01;  // torch.optim.AdamW's default
    context = zero::make_cpu_context();
    communicator = zero::make_local_communicator();
    engine = zero::make_engine(options, *communicator, {.context = context.get()});
    model =
        std::make_unique<zero::gpt2::EngineModel>(*engine, config, flags.batch, flags.seq, 42,
                                                  context->allocator(zero::MemorySpace::kDevice));
    // Token ids as the PyTorch side draws them (uniform over V); next-token targets.
    std::uint64_t state = 0x9e3779b97f4a7c15ULL;
    std::vector<int> row(static_cast<std::size_t>(flags.batch * (flags.seq + 1)));
    for (int& id : row) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      id = static_cast<int>((state >> 33) % static_cast<std::uint64_t>(config.vocab_size));
    }
    for (std::int64_t b = 0; b < flags.batch; ++b)
      for (std::int64_t t = 0; t < flags.seq; ++t) {
        tokens.push_back(row[b * (flags.seq + 1) + t]);
        targets.push_back(row[b * (flags.seq + 1) + t + 1]);
      }
  }

  // One full step: forward, backward, AdamW; returns {wall seconds, process CPU seconds, loss}.
  std::vector<double> step() {
    const auto start = std::chrono::steady_clock::now();
    const double cpu = process_cpu_seconds();
    const double loss =
        model->train_micro_step(tokens, targets, {.step = std::uint64_t(steps_run)});
    engine->step();
    context->compute_stream().synchronize();
    ++steps_run;
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            process_cpu_seconds() - cpu, loss};
  }
};

std::string torch_python() {
  if (const char* forced = std::getenv("ZERO_PYTHON")) return forced;
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/zero/venv-torch2/bin/python" : "python3";
}

// Runs the PyTorch peer once; records its measured steps per dtype (wall seconds) and echoes its
// output. Returns false when it failed.
bool run_torch(const Flags& flags, std::map<std::string, std::vector<double>>& seconds,
               std::map<std::string, std::vector<double>>& cpu_seconds) {
  const std::string command =
      torch_python() + " " ZERO_SOURCE_DIR "/benchmarks/llama_bench_torch.py --config " +
      flags.config + " --batch " + std::to_string(flags.batch) + " --seq " +
      std::to_string(flags.seq) + " --steps " + std::to_string(flags.steps) + " --dtypes " +
      flags.dtypes + " --threads " + std::to_string(omp_get_max_threads()) + " 2>&1";
  std::printf("PyTorch: %s\n", command.c_str());
  std::fflush(stdout);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return false;
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::fputs(line, stdout);
    char dtype[16];
    double wall = 0, cpu = 0;
    if (std::sscanf(line, "torch_step %15s %lf cpu %lf", dtype, &wall, &cpu) == 3) {
      seconds[dtype].push_back(wall);
      cpu_seconds[dtype].push_back(cpu);
    }
  }
  std::fflush(stdout);
  return pclose(pipe) == 0;
}

int run(const Flags& flags) {
  const GPT2Config config = GPT2Config::load(flags.config);
  const double tokens = double(flags.batch * flags.seq);
  const double flops = step_flops(config, flags.batch, flags.seq);
  std::printf("llama_bench: %s\n", flags.config.c_str());
  std::printf(
      "model: %s, L=%lld C=%lld NH=%lld KVH=%lld HS=%lld H=%lld V=%lld, %s head, %lld parameters; "
      "B=%lld T=%lld (%.0f tokens/step, %.1f GFLOP/step)\n",
      std::string(zero::gpt2::family_spec(config.family).architecture).c_str(),
      (long long)config.n_layer, (long long)config.n_embd, (long long)config.n_head,
      (long long)config.kv_heads(), (long long)config.head_size(), (long long)config.hidden_size(),
      (long long)config.vocab_size, config.tie_word_embeddings ? "tied" : "untied",
      (long long)config.num_parameters(), (long long)flags.batch, (long long)flags.seq, tokens,
      flops * 1e-9);
  auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "(unset)";
  };
  std::printf(
      "CPU: %s, %d OpenMP threads; OPENBLAS_CORETYPE=%s ZERO_GEMM_BACKEND=%s "
      "OMP_WAIT_POLICY=%s\n",
      cpu_model_name().c_str(), omp_get_max_threads(), env("OPENBLAS_CORETYPE"),
      env("ZERO_GEMM_BACKEND"), env("OMP_WAIT_POLICY"));
  std::fflush(stdout);

  std::vector<std::unique_ptr<ZeroSide>> sides;
  for (const bool bf16 : {false, true})
    if (flags.dtypes.find(bf16 ? "bf16" : "fp32") != std::string::npos)
      sides.push_back(std::make_unique<ZeroSide>(config, flags, bf16));
  // Per dtype: wall seconds and process CPU seconds of each measured step.
  std::map<std::string, std::vector<double>> zero_wall, zero_cpu, torch_wall, torch_cpu;
  bool torch_ok = flags.torch;
  for (std::int64_t round = 0; round < flags.rounds; ++round) {
    for (auto& side : sides) {
      if (round == 0) {
        const std::vector<double> warm = side->step();
        std::printf("zero_warmup %s %.4f cpu %.3f loss %.4f\n", side->name.c_str(), warm[0],
                    warm[1], warm[2]);
      }
      for (std::int64_t s = 0; s < flags.steps; ++s) {
        const std::vector<double> m = side->step();
        zero_wall[side->name].push_back(m[0]);
        zero_cpu[side->name].push_back(m[1]);
        std::printf("zero_step %s %.4f cpu %.3f loss %.4f\n", side->name.c_str(), m[0], m[1], m[2]);
      }
      std::fflush(stdout);
    }
    if (torch_ok) torch_ok = run_torch(flags, torch_wall, torch_cpu);
  }
  std::printf("zero GEMMs: fp32 %s; bf16 %s\n", zero::gpt2::cpu::gemm_backend().c_str(),
              zero::gpt2::cpu::gemm_bf16_backend().c_str());
  auto best = [](const std::vector<double>& values) {
    return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
  };
  std::printf("\n%-6s %12s %12s %12s %12s %11s %12s %12s %11s\n", "dtype", "zero best s",
              "zero tok/s", "torch best s", "torch tok/s", "zero/torch", "zero cpu s",
              "torch cpu s", "by cpu");
  for (const char* dtype : {"fp32", "bf16"}) {
    if (zero_wall[dtype].empty()) continue;
    const double zw = best(zero_wall[dtype]), zc = best(zero_cpu[dtype]);
    const double tw = best(torch_wall[dtype]), tc = best(torch_cpu[dtype]);
    if (tw <= 0) {
      std::printf("%-6s %12.3f %12.0f %12s %12s %11s %12.3f\n", dtype, zw, tokens / zw, "-", "-",
                  "-", zc);
      continue;
    }
    std::printf("%-6s %12.3f %12.0f %12.3f %12.0f %10.2fx %12.3f %12.3f %10.2fx\n", dtype, zw,
                tokens / zw, tw, tokens / tw, tw / zw, zc, tc, tc / zc);
  }
  std::printf(
      "(best of %lld measured steps per side and dtype; zero/torch = torch's best wall time over "
      "zero's; by cpu: the same for the least process CPU seconds per step; zero fp32 at its best "
      "%.1f GFLOP/s)\n",
      (long long)(flags.rounds * flags.steps),
      zero_wall["fp32"].empty() ? 0.0 : flops * 1e-9 / best(zero_wall["fp32"]));
  if (flags.torch && !torch_ok) std::printf("PyTorch peer failed: see its output above\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_flags(argc, argv));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "llama_bench: %s\n", error.what());
    return 2;
  }
}
