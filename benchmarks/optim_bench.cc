// CPU AdamW throughput against the memory bandwidth its own traffic can reach, measured in the
// same run with the same threads and arrays. All report bytes_per_second as the bytes that really
// cross the memory bus per element:
//   BM_AdamW       reads p, g, m, v and writes p, m, v in place: 4 reads + 3 writes = 28 B
//   BM_SameTraffic the ceiling: the same four arrays read and the same three written in place
//                  with one add or multiply-add each (p += g; m = 0.9m + g; v = 0.9v + g), so the
//                  traffic is AdamW's 28 B with no arithmetic to hide; AdamW / SameTraffic is the
//                  fraction of attainable bandwidth AdamW reaches
//   BM_Triad       STREAM's triad a = b + s·c over three fresh arrays: 2 reads + 1 write + the
//                  write-allocate read of a's lines = 16 B (STREAM itself counts 12; ordinary
//                  stores fetch the line first)
// A plain memcpy is not the ceiling: glibc copies large buffers with non-temporal stores (no
// write-allocate), a pattern the in-place optimizer cannot use.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <vector>

#include "zero/optim/kernels.h"

namespace {

constexpr std::size_t kElements = std::size_t{1} << 24;  // 16M floats: 64 MiB per array

struct Arrays {
  std::vector<float> p, g, m, v;
  Arrays() : p(kElements, 0.5f), g(kElements, 0.01f), m(kElements, 0.0f), v(kElements, 0.0f) {}
};

void BM_AdamW(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  Arrays a;
  zero::optim::AdamHyperparams hyper;
  hyper.weight_decay = 0.01;
  for (auto _ : state) {
    zero::optim::adam_step(a.p.data(), a.g.data(), a.m.data(), a.v.data(), kElements, hyper);
    benchmark::DoNotOptimize(a.p.data());
    ++hyper.step;
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * 28));
}

void BM_SameTraffic(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  Arrays a;
  float* p = a.p.data();
  const float* g = a.g.data();
  float* m = a.m.data();
  float* v = a.v.data();
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < kElements; ++i) {
      p[i] += g[i];
      m[i] = 0.9f * m[i] + g[i];
      v[i] = 0.9f * v[i] + g[i];
    }
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * 28));
}

void BM_Triad(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> a(kElements, 0.0f), b(kElements, 1.0f), c(kElements, 2.0f);
  float* out = a.data();
  const float* x = b.data();
  const float* y = c.data();
  for (auto _ : state) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
    for (std::size_t i = 0; i < kElements; ++i) out[i] = x[i] + 3.0f * y[i];
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * 16));
}

}  // namespace

BENCHMARK(BM_Triad)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SameTraffic)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_AdamW)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
