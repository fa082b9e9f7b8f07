// The CPU AdamW step on a 100M-element fp32 shard (ZeRO-Offload's bottleneck), at 1..N threads,
// against the memory bandwidth its own traffic can reach and against DeepSpeed's CPU Adam, in the
// same run with the same thread counts. Reported per element and as the bytes that really cross
// the memory bus per element:
//   BM_AdamW       zero::optim::adam_step: reads p, g, m, v and writes p, m, v in place:
//                  4 reads + 3 writes = 28 B
//   BM_AdamW_bf16  the same step also writing the bf16 copy of p in the same pass (the fused
//                  16-bit output an offloaded step sends to the device): 30 B
//   BM_SameTraffic the ceiling: the same four arrays read and the same three written in place
//                  with one add or multiply-add each (p += g; m = 0.9m + g; v = 0.9v + g), so the
//                  traffic is AdamW's 28 B with no arithmetic to hide; AdamW / SameTraffic is the
//                  fraction of attainable bandwidth AdamW reaches
//   BM_Triad       STREAM's triad a = b + s·c over three fresh arrays: 2 reads + 1 write + the
//                  write-allocate read of a's lines = 16 B (STREAM itself counts 12; ordinary
//                  stores fetch the line first)
// Then benchmarks/optim_bench_deepspeed.py runs DeepSpeedCPUAdam (and torch.optim.AdamW, foreach)
// on the same number of elements at each thread count, and a table puts the medians side by side.
//
//   optim_bench [--elements=N] [--max_threads=T] [--no_deepspeed] [benchmark flags]
//
// Threads: 1..T, T = the CPUs this process may run on (its binding). The machine may be shared:
// each figure is the median of --benchmark_repetitions (default 5) runs.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "zero/optim/kernels.h"

namespace {

std::size_t g_elements = 100'000'000;

// n values of T, 64-byte aligned as the engine's buffers and torch's tensors are (a plain vector
// of this size starts 16 bytes past a page, so every vector load would straddle two lines).
template <typename T>
class AlignedArray {
 public:
  AlignedArray(std::size_t n, T value)
      : data_(static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64))), size_(n) {
    if (data_ == nullptr) throw std::bad_alloc();
    std::fill(begin(), end(), value);
  }
  AlignedArray(const AlignedArray&) = delete;
  AlignedArray& operator=(const AlignedArray&) = delete;
  ~AlignedArray() { std::free(data_); }
  T* data() { return data_; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }

 private:
  T* data_;
  std::size_t size_;
};

// One set of arrays for every benchmark: allocated and first-touched once (1.8 GB at 100M).
struct Arrays {
  AlignedArray<float> p, g, m, v;
  AlignedArray<std::uint16_t> half;
  explicit Arrays(std::size_t n) : p(n, 0.5f), g(n, 0.01f), m(n, 0.0f), v(n, 0.0f), half(n, 0) {}
};

Arrays& arrays() {
  static Arrays a(g_elements);
  return a;
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Bytes and elements per second of wall time, and the process CPU seconds (all threads) per
// step since `cpu_start`.
void set_rates(benchmark::State& state, std::size_t bytes_per_element, double cpu_start) {
  const double cpu = process_cpu_seconds() - cpu_start;
  const auto elements = static_cast<double>(state.iterations()) * static_cast<double>(g_elements);
  state.SetBytesProcessed(static_cast<std::int64_t>(elements * bytes_per_element));
  state.counters["elements"] = benchmark::Counter(elements, benchmark::Counter::kIsRate);
  state.counters["cpu_s"] =
      cpu / static_cast<double>(std::max<benchmark::IterationCount>(1, state.iterations()));
}

void BM_AdamW(benchmark::State& state) {
  Arrays& a = arrays();
  zero::optim::AdamHyperparams hyper;
  hyper.weight_decay = 0.01;
  hyper.threads = static_cast<int>(state.range(0));
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    zero::optim::adam_step(a.p.data(), a.g.data(), a.m.data(), a.v.data(), g_elements, hyper);
    benchmark::DoNotOptimize(a.p.data());
    ++hyper.step;
  }
  set_rates(state, 28, cpu_start);
}

void BM_AdamW_bf16(benchmark::State& state) {
  Arrays& a = arrays();
  zero::optim::AdamHyperparams hyper;
  hyper.weight_decay = 0.01;
  hyper.threads = static_cast<int>(state.range(0));
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
    zero::optim::adam_step(a.p.data(), a.g.data(), a.m.data(), a.v.data(), g_elements, hyper,
                           a.half.data(), zero::DType::kBFloat16);
    benchmark::DoNotOptimize(a.half.data());
    ++hyper.step;
  }
  set_rates(state, 30, cpu_start);
}

void BM_SameTraffic(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Arrays& a = arrays();
  float* p = a.p.data();
  const float* g = a.g.data();
  float* m = a.m.data();
  float* v = a.v.data();
  const std::size_t n = g_elements;
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      p[i] += g[i];
      m[i] = 0.9f * m[i] + g[i];
      v[i] = 0.9f * v[i] + g[i];
    }
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
  }
  set_rates(state, 28, cpu_start);
  // Undo the drift so the AdamW runs after this one see ordinary values.
  std::fill(a.p.begin(), a.p.end(), 0.5f);
  std::fill(a.m.begin(), a.m.end(), 0.0f);
  std::fill(a.v.begin(), a.v.end(), 0.0f);
}

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Arrays& a = arrays();  // p, g, m as a, b, c: three arrays the size of the shard
  float* out = a.p.data();
  const float* x = a.g.data();
  const float* y = a.m.data();
  const std::size_t n = g_elements;
  const double cpu_start = process_cpu_seconds();
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < n; ++i) out[i] = x[i] + 3.0f * y[i];
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  set_rates(state, 16, cpu_start);
  std::fill(a.p.begin(), a.p.end(), 0.5f);
}

// Keeps the median of every benchmark's repetitions (and prints as the console does).
class MedianReporter : public benchmark::ConsoleReporter {
 public:
  struct Median {
    double bytes_per_second = 0, elements_per_second = 0, seconds = 0, cpu_seconds = 0;
  };
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type != Run::RT_Aggregate || run.aggregate_name != "median") continue;
      Median median;
      if (auto it = run.counters.find("bytes_per_second"); it != run.counters.end())
        median.bytes_per_second = it->second.value;
      if (auto it = run.counters.find("elements"); it != run.counters.end())
        median.elements_per_second = it->second.value;
      if (auto it = run.counters.find("cpu_s"); it != run.counters.end())
        median.cpu_seconds = it->second.value;
      median.seconds = run.GetAdjustedRealTime() / 1e3;  // reported in ms
      medians[run.run_name.function_name][std::stoi(run.run_name.args)] = median;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, std::map<int, Median>> medians;
};

struct Reference {
  std::string name;
  double seconds = 0, elements_per_second = 0, cpu_seconds = 0;
};

// Runs the Python helper at `threads` threads; its RESULT lines, and its other lines echoed.
std::vector<Reference> run_reference(const std::string& python, int threads,
                                     std::vector<std::string>& notes) {
  const std::string command = "OMP_NUM_THREADS=" + std::to_string(threads) + " " + python +
                              " " ZERO_SOURCE_DIR "/benchmarks/optim_bench_deepspeed.py" +
                              " --elements " + std::to_string(g_elements) + " --threads " +
                              std::to_string(threads) + " 2>&1";
  std::printf("reference: %s\n", command.c_str());
  std::fflush(stdout);
  std::vector<Reference> out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    notes.push_back("could not start " + command);
    return out;
  }
  char line[4096];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    char name[256];
    int t = 0;
    Reference r;
    if (std::sscanf(line, "RESULT %255s %d %lf %lf %lf", name, &t, &r.seconds,
                    &r.elements_per_second, &r.cpu_seconds) == 5) {
      r.name = name;
      r.elements_per_second *= 1e9;
      out.push_back(r);
    } else if (std::strncmp(line, "UNAVAILABLE", 11) == 0) {
      notes.emplace_back(line);
    }
    std::fputs(line, stdout);
  }
  const int status = pclose(pipe);
  if (status != 0) notes.push_back("the helper exited with status " + std::to_string(status));
  return out;
}

std::string default_python() {
  if (const char* forced = std::getenv("ZERO_PYTHON")) return forced;
  const char* venv = std::getenv("ZERO_VENV");
  const char* home = std::getenv("HOME");
  const std::string venv_python =
      venv ? std::string(venv) + "/bin/python"
           : (home ? std::string(home) + "/.cache/zero/venv/bin/python" : std::string());
  if (!venv_python.empty() && access(venv_python.c_str(), X_OK) == 0) return venv_python;
  return "/usr/bin/python3";
}

}  // namespace

int main(int argc, char** argv) {
  bool run_deepspeed = true;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  int max_threads = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed)
                                                                        : omp_get_num_procs();
  std::vector<char*> args;
  bool repetitions_given = false;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no_deepspeed") == 0) {
      run_deepspeed = false;
    } else if (std::strncmp(argv[i], "--elements=", 11) == 0) {
      g_elements = std::strtoull(argv[i] + 11, nullptr, 10);
    } else if (std::strncmp(argv[i], "--max_threads=", 14) == 0) {
      max_threads = std::atoi(argv[i] + 14);
    } else {
      if (std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0) repetitions_given = true;
      args.push_back(argv[i]);
    }
  }
  if (g_elements == 0 || max_threads < 1) {
    std::fprintf(stderr, "optim_bench: --elements and --max_threads must be positive\n");
    return 2;
  }
  std::string repetitions = "--benchmark_repetitions=5";
  if (!repetitions_given) args.push_back(repetitions.data());
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());

  for (int threads = 1; threads <= max_threads; ++threads) {
    for (auto [name, function] :
         {std::pair{"BM_Triad", &BM_Triad}, std::pair{"BM_SameTraffic", &BM_SameTraffic},
          std::pair{"BM_AdamW", &BM_AdamW}, std::pair{"BM_AdamW_bf16", &BM_AdamW_bf16}}) {
      benchmark::RegisterBenchmark(name, function)
          ->Arg(threads)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime()
          ->ReportAggregatesOnly(true);
    }
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "AdamW over %zu fp32 elements (%.2f GB of p, g, m, v); threads 1..%d; "
      "CPU optimizer default threads here: %d; OPENBLAS_CORETYPE=%s\n",
      g_elements, 16.0 * static_cast<double>(g_elements) / 1e9, max_threads,
      zero::optim::cpu_optimizer_threads(), coretype ? coretype : "(unset)");
  std::fflush(stdout);
  MedianReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::map<int, std::vector<Reference>> references;
  std::vector<std::string> notes;
  if (run_deepspeed) {
    const std::string python = default_python();
    for (int threads = 1; threads <= max_threads; ++threads)
      references[threads] = run_reference(python, threads, notes);
  }

  auto median = [&](const char* name, int threads) {
    const auto& runs = reporter.medians[name];
    auto it = runs.find(threads);
    return it == runs.end() ? MedianReporter::Median{} : it->second;
  };
  // Wall-clock rate, and in brackets the rate had each thread a core to itself: elements over
  // (process CPU seconds per step / threads). On a shared machine the wall figure undercounts.
  auto rates = [](double elements_per_second, double cpu_seconds, int threads) {
    char text[64];
    const double unloaded =
        cpu_seconds > 0 ? static_cast<double>(g_elements) * threads / cpu_seconds : 0.0;
    std::snprintf(text, sizeof text, "%6.3f [%6.3f]", elements_per_second / 1e9, unloaded / 1e9);
    return std::string(text);
  };
  std::vector<std::string> reference_names;
  for (const auto& [threads, list] : references)
    for (const Reference& r : list)
      if (std::find(reference_names.begin(), reference_names.end(), r.name) ==
          reference_names.end())
        reference_names.push_back(r.name);
  std::printf(
      "\nMedians. Bandwidth in GB/s at the bytes each kernel moves per element; optimizers in G "
      "elements/s of wall time [and per CPU time: elements / (process CPU s / threads)]:\n");
  std::printf("%7s %9s %9s %17s %17s %9s %17s", "threads", "triad", "same-traf", "zero AdamW",
              "zero AdamW+bf16", "AdamW/ceil", "ceiling (triad)");
  for (const std::string& name : reference_names) std::printf(" %28s", name.c_str());
  std::printf("\n");
  for (int threads = 1; threads <= max_threads; ++threads) {
    const auto triad = median("BM_Triad", threads);
    const auto same = median("BM_SameTraffic", threads);
    const auto adam = median("BM_AdamW", threads);
    const auto fused = median("BM_AdamW_bf16", threads);
    std::printf(
        "%7d %9.1f %9.1f %17s %17s %8.0f%% %17.3f", threads, triad.bytes_per_second / 1e9,
        same.bytes_per_second / 1e9,
        rates(adam.elements_per_second, adam.cpu_seconds, threads).c_str(),
        rates(fused.elements_per_second, fused.cpu_seconds, threads).c_str(),
        same.bytes_per_second > 0 ? 100.0 * adam.bytes_per_second / same.bytes_per_second : 0.0,
        triad.bytes_per_second / 28 / 1e9);
    for (const std::string& name : reference_names) {
      const Reference* found = nullptr;
      for (const Reference& r : references[threads])
        if (r.name == name) found = &r;
      std::printf(
          " %28s",
          found ? rates(found->elements_per_second, found->cpu_seconds, threads).c_str() : "-");
    }
    std::printf("\n");
  }
  std::printf(
      "AdamW/ceil: zero AdamW's bytes/s over the same-traffic kernel's (28 B/element both); "
      "ceiling (triad): the triad's bytes/s over AdamW's 28 B/element, in G elements/s.\n");
  for (const std::string& note : notes) std::printf("note: %s", note.c_str());
  return 0;
}
