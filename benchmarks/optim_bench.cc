// CPU AdamW throughput against memory-copy bandwidth measured in the same run. Both report
// bytes_per_second as bytes moved: AdamW reads p, g, m, v and writes p, m, v (28 B/element);
// a copy reads and writes its buffer (8 B/element).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "zero/optim/kernels.h"

namespace {

constexpr std::size_t kElements = std::size_t{1} << 24;  // 16M floats: 64 MiB per array

void BM_AdamW(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  std::vector<float> p(kElements, 0.5f), g(kElements, 0.01f), m(kElements, 0.0f),
      v(kElements, 0.0f);
  zero::optim::AdamHyperparams hyper;
  hyper.weight_decay = 0.01;
  for (auto _ : state) {
    zero::optim::adam_step(p.data(), g.data(), m.data(), v.data(), kElements, hyper);
    benchmark::DoNotOptimize(p.data());
    ++hyper.step;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * 28));
}

// The copy runs with the same thread count over the same chunks as the optimizer.
void BM_Memcpy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> source(4 * kElements, 1.0f), destination(4 * kElements, 0.0f);
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      const std::size_t team = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t per = source.size() / team;
      const std::size_t begin = static_cast<std::size_t>(omp_get_thread_num()) * per;
      std::memcpy(destination.data() + begin, source.data() + begin, per * sizeof(float));
    }
    benchmark::DoNotOptimize(destination.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * source.size() * 8));
}

}  // namespace

BENCHMARK(BM_Memcpy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamW)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
