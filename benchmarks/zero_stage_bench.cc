// Step-time overhead of ZeRO stage 3 over stage 0 for GPT-2 (20.0M parameters at the defaults)
// under MPI, with overlap_comm on and off, on the device zero train would pick (cuda:LOCAL_RANK
// where a GPU is visible, else the CPU; `--use_cpu 1` forces the CPU). Four engines (stage 0 and 3
// × overlap on and off), each with its own context on that device (the peak column counts its
// model states and activations), are built once over one communicator and measured interleaved:
// after `--warmup` steps each, every round runs each configuration for `--steps` optimizer steps,
// the order rotating by one per round, so slow phases of a shared machine fall on every
// configuration alike. A step is one micro-step (forward, backward, reductions) plus engine.step(),
// timed from a barrier to the end of its last kernel and collective; its time is the maximum over
// ranks. Reported on rank 0: per-configuration median (and min, mean, max) over all measured steps,
// the overhead of stage 3 over stage 0 per overlap setting, and one machine-readable line per
// overlap setting:
//   RESULT world=W overlap=1 stage0_ms=.. stage3_ms=.. overhead_pct=..
// Run by hand, never as a test:
//   export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
//   export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_vader_single_copy_mechanism=none
//   OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none -np 2 build/benchmarks/zero_stage_bench
//   OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none -np 4 build/benchmarks/zero_stage_bench
//   build/benchmarks/zero_stage_bench --help
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/config/ds_config.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/error.h"
#include "zero/core/launch.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/suggest.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/engine_model.h"

namespace {

using Clock = std::chrono::steady_clock;

// Every flag is `--name value` or `--name=value`; numbers may be written 5e8.
struct BenchFlags {
  std::int64_t n_layer = 6;           // L
  std::int64_t n_embd = 512;          // C
  std::int64_t n_head = 8;            // NH
  std::int64_t vocab_size = 2048;     // V (padded to a multiple of 128 by the model)
  std::int64_t block_size = 128;      // T
  std::int64_t micro_batch_size = 2;  // B, rows per rank and step
  std::int64_t rounds = 5;
  std::int64_t steps = 3;   // measured steps per configuration and round
  std::int64_t warmup = 2;  // unmeasured steps per configuration before the first round
  // DeepSpeed's defaults, in elements, except the prefetch bucket: -1 is Hugging Face's "auto"
  // (0.9 × n_embd², as the config resolves it), so stage 3 gathers about a block at a time as a
  // Trainer run does, not the whole model at once (DeepSpeed's 5e7 exceeds the model).
  std::int64_t reduce_bucket_size = 500'000'000;
  std::int64_t stage3_prefetch_bucket_size = -1;
  std::int64_t stage3_max_live_parameters = 1'000'000'000;
  std::int64_t stage3_param_persistence_threshold = 100'000;
  std::int64_t seed = 1234;
  std::int64_t use_cpu = 0;  // 1: the CPU even where a GPU is visible
};

struct FlagSpec {
  std::string_view name;
  std::int64_t BenchFlags::*field;
  std::int64_t minimum;
  std::string_view help;
};

constexpr std::array kFlagSpecs = {
    FlagSpec{"n_layer", &BenchFlags::n_layer, 1, "transformer blocks (L)"},
    FlagSpec{"n_embd", &BenchFlags::n_embd, 1, "width (C)"},
    FlagSpec{"n_head", &BenchFlags::n_head, 1, "attention heads (NH)"},
    FlagSpec{"vocab_size", &BenchFlags::vocab_size, 2, "vocabulary (V)"},
    FlagSpec{"block_size", &BenchFlags::block_size, 2, "sequence length (T)"},
    FlagSpec{"micro_batch_size", &BenchFlags::micro_batch_size, 1, "rows per rank and step (B)"},
    FlagSpec{"rounds", &BenchFlags::rounds, 1, "measurement rounds (R)"},
    FlagSpec{"steps", &BenchFlags::steps, 1, "measured steps per configuration and round (K)"},
    FlagSpec{"warmup", &BenchFlags::warmup, 0, "unmeasured steps per configuration, first round"},
    FlagSpec{"reduce_bucket_size", &BenchFlags::reduce_bucket_size, 1, "elements"},
    FlagSpec{"stage3_prefetch_bucket_size", &BenchFlags::stage3_prefetch_bucket_size, -1,
             "elements; -1: \"auto\" (0.9 x n_embd^2)"},
    FlagSpec{"stage3_max_live_parameters", &BenchFlags::stage3_max_live_parameters, 0, "elements"},
    FlagSpec{"stage3_param_persistence_threshold", &BenchFlags::stage3_param_persistence_threshold,
             0, "elements"},
    FlagSpec{"seed", &BenchFlags::seed, 0, "initialisation, tokens and dropout"},
    FlagSpec{"use_cpu", &BenchFlags::use_cpu, 0,
             "1: the CPU even where a GPU is visible (0: cuda:LOCAL_RANK where one is)"},
};

std::string usage(const char* program) {
  std::string text = std::string("usage: [mpirun -np W] ") + program + " [--flag value]...\n";
  const BenchFlags defaults;
  for (const FlagSpec& spec : kFlagSpecs) {
    char line[200];
    std::snprintf(line, sizeof(line), "  --%-36s %s (default %lld)\n",
                  std::string(spec.name).c_str(), std::string(spec.help).c_str(),
                  static_cast<long long>(defaults.*spec.field));
    text += line;
  }
  return text;
}

// Throws zero::Error naming the flag: unknown flags (with the nearest known one), missing or
// malformed values, values below the flag's minimum.
BenchFlags parse_flags(int argc, char** argv, bool& help) {
  BenchFlags flags;
  std::vector<std::string_view> names;
  for (const FlagSpec& spec : kFlagSpecs) names.push_back(spec.name);
  for (int i = 1; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument == "--help" || argument == "-h") {
      help = true;
      continue;
    }
    ZERO_CHECK(argument.rfind("--", 0) == 0, "unexpected argument '", argument,
               "' (flags are --name value)");
    std::string name = argument.substr(2), value;
    const std::size_t equals = name.find('=');
    if (equals != std::string::npos) {
      value = name.substr(equals + 1);
      name.resize(equals);
    } else {
      ZERO_CHECK(i + 1 < argc, "flag --", name, " needs a value");
      value = argv[++i];
    }
    const auto spec = std::find_if(kFlagSpecs.begin(), kFlagSpecs.end(),
                                   [&](const FlagSpec& s) { return s.name == name; });
    if (spec == kFlagSpecs.end()) {
      const std::optional<std::string> nearest = zero::nearest_name(name, names);
      ZERO_THROW("unknown flag --", name,
                 nearest ? " (did you mean --" + *nearest + "?)" : std::string(" (see --help)"));
    }
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    ZERO_CHECK(!value.empty() && *end == '\0' && std::isfinite(number) &&
                   number == std::floor(number) && std::abs(number) < 9e18,
               "flag --", name, ": '", value, "' is not an integer");
    ZERO_CHECK(number >= static_cast<double>(spec->minimum), "flag --", name, ": ", value,
               " is below its minimum ", spec->minimum);
    flags.*(spec->field) = static_cast<std::int64_t>(number);
  }
  if (flags.stage3_prefetch_bucket_size < 0) {
    // "auto" resolved by the config code that resolves it for a DeepSpeed JSON (one place).
    zero::config::TrainerValues trainer;
    trainer.hidden_size = flags.n_embd;
    const std::string json =
        R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
            "stage3_prefetch_bucket_size": "auto"}})";
    flags.stage3_prefetch_bucket_size =
        zero::config::resolve_config(json, trainer, "zero_stage_bench")
            .config.zero_optimization.prefetch_bucket_size;
  }
  return flags;
}

struct BenchConfig {
  int stage;
  bool overlap;
  std::string name() const {
    return "stage " + std::to_string(stage) + (overlap ? ", overlap on" : ", overlap off");
  }
};

// One configuration: its own context on the rank's device (streams, allocators, one ledger with
// the activations), its engine and the GPT-2 over it.
struct Bench {
  BenchConfig config{};
  std::unique_ptr<zero::DeviceContext> context;  // outlives the engine and the model
  std::unique_ptr<zero::Engine> engine;
  std::unique_ptr<zero::gpt2::EngineModel> model;
  std::int64_t steps_run = 0;
  std::vector<double> step_ms;  // measured steps, max over ranks
  std::vector<double> cpu_ms;   // CPU time of each step, mean over ranks
};

// Rank `rank`'s rows of global batch `step`: deterministic tokens, next-token targets.
void fill_batch(std::uint64_t seed, std::int64_t step, int rank, std::int64_t B, std::int64_t T,
                std::int64_t V, std::vector<int>& tokens, std::vector<int>& targets) {
  tokens.resize(static_cast<std::size_t>(B * T));
  targets.resize(tokens.size());
  auto token = [&](std::int64_t row, std::int64_t t) {
    std::uint64_t x = seed ^ (static_cast<std::uint64_t>(step) << 40) ^
                      (static_cast<std::uint64_t>(row) << 20) ^ static_cast<std::uint64_t>(t);
    x += 0x9e3779b97f4a7c15ULL;  // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return static_cast<int>(x % static_cast<std::uint64_t>(V));
  };
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t row = rank * B + b;  // global sample index
    for (std::int64_t t = 0; t < T; ++t) {
      tokens[b * T + t] = token(row, t);
      targets[b * T + t] = token(row, t + 1);
    }
  }
}

// CPU time of this process (every thread: compute, communication stream, status), in ms.
double process_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto ms = [](const timeval& t) { return 1e3 * static_cast<double>(t.tv_sec) + 1e-3 * t.tv_usec; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

// One optimizer step of `bench`; returns its wall time in ms, the maximum over ranks, and records
// its CPU time, the mean over ranks (bench.cpu_ms). All ranks.
double timed_step(Bench& bench, zero::Communicator& comm, const BenchFlags& flags,
                  std::vector<int>& tokens, std::vector<int>& targets) {
  const std::int64_t B = flags.micro_batch_size, T = flags.block_size;
  fill_batch(static_cast<std::uint64_t>(flags.seed), bench.steps_run, comm.rank(), B, T,
             flags.vocab_size, tokens, targets);
  const zero::gpt2::DropoutKey dropout{.seed = static_cast<std::uint64_t>(flags.seed),
                                       .step = static_cast<std::uint64_t>(bench.steps_run),
                                       .sample_offset = comm.rank() * B,
                                       .training = true};
  comm.barrier();
  comm.synchronize();  // every rank starts the step together, the stream idle
  const Clock::time_point start = Clock::now();
  const double cpu_start = process_cpu_ms();
  bench.model->train_micro_step(tokens, targets, dropout);
  bench.engine->step();
  bench.context->compute_stream().synchronize();  // the device's work (a GPU's kernels)
  comm.synchronize();  // what the step left on the stream (stage 3's persistent re-gather)
  float times[2] = {
      static_cast<float>(std::chrono::duration<double, std::milli>(Clock::now() - start).count()),
      static_cast<float>(process_cpu_ms() - cpu_start)};
  comm.all_reduce(&times[0], &times[0], 1, zero::DType::kFloat32, zero::ReduceOp::kMax);
  comm.all_reduce(&times[1], &times[1], 1, zero::DType::kFloat32, zero::ReduceOp::kAvg);
  comm.synchronize();
  ++bench.steps_run;
  bench.cpu_ms.push_back(times[1]);
  return times[0];
}

struct Summary {
  double median = 0, min = 0, mean = 0, max = 0;
};

Summary summarize(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  Summary summary;
  const std::size_t n = values.size();
  summary.median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  summary.min = values.front();
  summary.max = values.back();
  for (const double value : values) summary.mean += value / static_cast<double>(n);
  return summary;
}

// What runs, on rank 0's stdout: the command, the world, the model, the buckets, the schedule.
void print_header(const BenchFlags& flags, const zero::DeviceChoice& device,
                  zero::Communicator& comm, const zero::gpt2::GPT2Config& config, int argc,
                  char** argv) {
  const int world = comm.world_size();
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::printf("zero_stage_bench: %s\n", command.c_str());
  std::printf("world %d (%s), device %s, OMP_NUM_THREADS=%s\n", world,
              std::string(comm.backend()).c_str(), device.describe().c_str(),
              threads ? threads : "(unset)");
  std::printf(
      "GPT-2: L=%lld C=%lld NH=%lld V=%lld (Vp=%lld) T=%lld, %lld parameters (%.2fM); B=%lld "
      "rows per rank, dropout %g, fp32, AdamW, clip 1.0\n",
      static_cast<long long>(config.n_layer), static_cast<long long>(config.n_embd),
      static_cast<long long>(config.n_head), static_cast<long long>(config.vocab_size),
      static_cast<long long>(config.padded_vocab_size()),
      static_cast<long long>(config.n_positions), static_cast<long long>(config.num_parameters()),
      static_cast<double>(config.num_parameters()) / 1e6,
      static_cast<long long>(flags.micro_batch_size), config.resid_pdrop);
  std::printf(
      "buckets (elements): reduce %lld, stage3 prefetch %lld, max live %lld, persistence %lld\n",
      static_cast<long long>(flags.reduce_bucket_size),
      static_cast<long long>(flags.stage3_prefetch_bucket_size),
      static_cast<long long>(flags.stage3_max_live_parameters),
      static_cast<long long>(flags.stage3_param_persistence_threshold));
  std::printf(
      "measure: %lld warm-up steps each, then %lld rounds x %lld steps per "
      "configuration, order rotating each round\n",
      static_cast<long long>(flags.warmup), static_cast<long long>(flags.rounds),
      static_cast<long long>(flags.steps));
  std::fflush(stdout);
}

int run(const BenchFlags& flags, const zero::DeviceChoice& device, zero::Communicator& comm,
        int argc, char** argv) {
  const int rank = comm.rank(), world = comm.world_size();
  const bool print = rank == 0;
  zero::gpt2::GPT2Config config;
  config.vocab_size = flags.vocab_size;
  config.n_positions = flags.block_size;
  config.n_layer = flags.n_layer;
  config.n_embd = flags.n_embd;
  config.n_head = flags.n_head;
  config.validate();

  if (print) print_header(flags, device, comm, config, argc, argv);

  std::vector<Bench> benches;
  for (const BenchConfig bench_config :
       {BenchConfig{0, true}, BenchConfig{3, true}, BenchConfig{0, false}, BenchConfig{3, false}}) {
    zero::EngineOptions options;
    options.stage = bench_config.stage;
    options.overlap_comm = bench_config.overlap;
    options.reduce_bucket_size = static_cast<std::size_t>(flags.reduce_bucket_size);
    options.prefetch_bucket_size = static_cast<std::size_t>(flags.stage3_prefetch_bucket_size);
    options.max_live_parameters = static_cast<std::size_t>(flags.stage3_max_live_parameters);
    options.param_persistence_threshold =
        static_cast<std::size_t>(flags.stage3_param_persistence_threshold);
    options.gradient_clipping = 1.0;
    options.optimizer.type = zero::config::OptimizerType::kAdamW;
    options.optimizer.lr = 1e-4;
    options.optimizer.weight_decay = 0.01;
    Bench bench;
    bench.config = bench_config;
    bench.context = zero::make_device_context(device.device);
    bench.engine = zero::make_engine(options, comm, {.context = bench.context.get()});
    bench.model = std::make_unique<zero::gpt2::EngineModel>(
        *bench.engine, config, flags.micro_batch_size, flags.block_size,
        static_cast<std::uint64_t>(flags.seed),
        bench.context->allocator(zero::MemorySpace::kDevice));
    benches.push_back(std::move(bench));
  }

  std::vector<int> tokens, targets;
  for (Bench& bench : benches)
    for (std::int64_t s = 0; s < flags.warmup; ++s) timed_step(bench, comm, flags, tokens, targets);
  for (Bench& bench : benches) bench.cpu_ms.clear();
  const Clock::time_point measure_start = Clock::now();
  const int num_configs = static_cast<int>(benches.size());
  for (std::int64_t round = 0; round < flags.rounds; ++round) {
    for (int i = 0; i < num_configs; ++i) {
      Bench& bench = benches[(round + i) % num_configs];
      for (std::int64_t s = 0; s < flags.steps; ++s)
        bench.step_ms.push_back(timed_step(bench, comm, flags, tokens, targets));
    }
  }
  const double measure_seconds =
      std::chrono::duration<double>(Clock::now() - measure_start).count();

  if (print) {
    std::printf("\n%-24s %10s %10s %10s %10s %8s %14s %14s\n", "configuration", "median ms",
                "min ms", "mean ms", "max ms", "steps", "cpu ms/rank", "peak MiB/rank");
    std::map<std::pair<int, bool>, double> medians, cpu_medians;
    for (Bench& bench : benches) {
      const Summary summary = summarize(bench.step_ms);
      medians[{bench.config.stage, bench.config.overlap}] = summary.median;
      const double cpu = summarize(bench.cpu_ms).median;
      cpu_medians[{bench.config.stage, bench.config.overlap}] = cpu;
      const double peak_mib =
          static_cast<double>(
              bench.engine->ledger().space_total(zero::MemorySpace::kDevice).peak_bytes) /
          (1 << 20);
      std::printf("%-24s %10.1f %10.1f %10.1f %10.1f %8zu %14.1f %14.1f\n",
                  bench.config.name().c_str(), summary.median, summary.min, summary.mean,
                  summary.max, bench.step_ms.size(), cpu, peak_mib);
    }
    std::printf("\n%-12s %14s %14s %12s\n", "overlap", "stage 0 ms", "stage 3 ms", "overhead");
    for (const bool overlap : {true, false}) {
      const double stage0 = medians[{0, overlap}], stage3 = medians[{3, overlap}];
      std::printf("%-12s %14.1f %14.1f %+11.1f%%\n", overlap ? "on" : "off", stage0, stage3,
                  100.0 * (stage3 - stage0) / stage0);
    }
    std::printf("(medians over %lld steps each; measured for %.1f s)\n\n",
                static_cast<long long>(flags.rounds * flags.steps), measure_seconds);
    for (const bool overlap : {true, false}) {
      const double stage0 = medians[{0, overlap}], stage3 = medians[{3, overlap}];
      std::printf(
          "RESULT world=%d overlap=%d stage0_ms=%.1f stage3_ms=%.1f overhead_pct=%.1f "
          "stage0_cpu_ms=%.1f stage3_cpu_ms=%.1f\n",
          world, overlap ? 1 : 0, stage0, stage3, 100.0 * (stage3 - stage0) / stage0,
          cpu_medians[{0, overlap}], cpu_medians[{3, overlap}]);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchFlags flags;
  try {
    bool help = false;
    flags = parse_flags(argc, argv, help);
    if (help) {
      if (zero::detect_launch().rank == 0) std::printf("%s", usage(argv[0]).c_str());
      return 0;
    }
  } catch (const std::exception& error) {
    if (zero::detect_launch().rank == 0)
      std::fprintf(stderr, "zero_stage_bench: %s\n", error.what());
    return 2;
  }
  int exit_code = 0;
  std::unique_ptr<zero::Communicator> comm;
  try {
    // The rank's device as zero train picks it; the communicator takes buffers where they live.
    const zero::DeviceChoice device = zero::choose_device(flags.use_cpu != 0);
    comm = zero::make_communicator(device.device.kind);
    exit_code = run(flags, device, *comm, argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] zero_stage_bench: %s\n", comm ? comm->rank() : 0, error.what());
    std::fflush(stderr);
    zero::abort_job(1);
  }
  comm.reset();
  zero::finalize_communication();
  return exit_code;
}
