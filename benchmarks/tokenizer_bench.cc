// GPT-2 tokenizer throughput: tiny shakespeare encoded on one thread, and as a batch of lines on
// 1 and 2 threads. Every figure is wall-clock (UseRealTime). Besides Google Benchmark's
// bytes_per_second (binary prefixes: Mi/s = 2^20 B/s), the encode benchmarks report MB_per_s: 10^6
// bytes of UTF-8 input per wall-clock second, the unit of
// tests/golden/tokenizer_reference_bench.py's tiktoken and tokenizers lines on the same text. Warm:
// the per-thread piece cache already filled (the reference's figures are warm too: best of ten
// after a warm-up pass); cold: a fresh tokenizer, so an empty cache, for every pass. Data:
// $ZERO_SHARED_DATA (default ../shared/data beside the source tree).
#include <benchmark/benchmark.h>
#include <time.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zero/text/token_batch.h"
#include "zero/text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

// 10^6 bytes per wall-clock second (with UseRealTime, kIsRate divides by real time).
void report_decimal_megabytes(benchmark::State& state, std::size_t bytes_per_iteration) {
  state.counters["MB_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(bytes_per_iteration) / 1e6,
      benchmark::Counter::kIsRate);
}

fs::path data_dir() {
  const char* path = std::getenv("ZERO_SHARED_DATA");
  return path ? fs::path(path) : fs::path(ZERO_SOURCE_DIR) / ".." / "shared" / "data";
}

std::string read_all(const fs::path& path) {
  std::ifstream stream(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << stream.rdbuf();
  return buffer.str();
}

struct Fixture {
  std::string text;
  std::unique_ptr<zero::text::Tokenizer> tokenizer;
  Fixture() {
    const fs::path corpus = data_dir() / "tinyshakespeare" / "input.txt";
    if (!fs::exists(corpus)) return;
    text = read_all(corpus);
    tokenizer =
        std::make_unique<zero::text::Tokenizer>(zero::text::Tokenizer::load(data_dir() / "gpt2"));
  }
};

const Fixture& fixture() {
  static const Fixture instance;
  return instance;
}

// Steady state: the per-thread piece cache is warm (as it is after the first megabyte of a corpus).
void BM_EncodeTinyShakespeareWarmCache(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  std::vector<zero::text::TokenId> ids;
  for (auto _ : state) {
    ids.clear();
    data.tokenizer->encode_append(data.text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.text.size()));
  report_decimal_megabytes(state, data.text.size());
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_EncodeTinyShakespeareWarmCache)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// One 1-token text: the fixed cost of a call (zero.Tokenizer.encode is compared with it,
// benchmarks/tokenizer_binding_bench.py).
void BM_EncodeOneToken(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  for (auto _ : state) {
    std::vector<zero::text::TokenId> ids = data.tokenizer->encode("hello");
    benchmark::DoNotOptimize(ids.data());
  }
}
BENCHMARK(BM_EncodeOneToken)->Unit(benchmark::kNanosecond)->UseRealTime();

// Cold: a fresh tokenizer (and so an empty piece cache) for every pass over the text.
void BM_EncodeTinyShakespeareColdCache(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  std::vector<zero::text::TokenId> ids;
  for (auto _ : state) {
    state.PauseTiming();
    const zero::text::Tokenizer fresh(data.tokenizer->vocabulary());
    ids.clear();
    state.ResumeTiming();
    fresh.encode_append(data.text, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.text.size()));
  report_decimal_megabytes(state, data.text.size());
}
BENCHMARK(BM_EncodeTinyShakespeareColdCache)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// As the data pipeline encodes: each line (an example) on its own.
void BM_EncodeTinyShakespearePerLine(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < data.text.size();) {
    const std::size_t end = std::min(data.text.find('\n', start), data.text.size() - 1) + 1;
    lines.emplace_back(data.text.data() + start, end - start);
    start = end;
  }
  std::vector<zero::text::TokenId> ids;
  for (auto _ : state) {
    ids.clear();
    for (std::string_view line : lines)
      data.tokenizer->encode_append(line, ids, zero::text::SpecialTokens::kRecognize);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.text.size()));
  report_decimal_megabytes(state, data.text.size());
  state.counters["lines"] = static_cast<double>(lines.size());
}
BENCHMARK(BM_EncodeTinyShakespearePerLine)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// zero.Tokenizer.encode_batch's C++ part: text::encode_batch over the lines of tiny shakespeare
// (split at '\n' as Python's str.split does) on state.range(0) threads. CPU_ms_per_pass: the
// process's CPU time per pass; above real time x threads, the threads contend (or wait).
void BM_EncodeBatchTinyShakespeare(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  std::vector<std::string_view> lines;
  for (std::size_t start = 0;;) {
    const std::size_t end = data.text.find('\n', start);
    lines.emplace_back(data.text.data() + start,
                       (end == std::string::npos ? data.text.size() : end) - start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  const int threads = static_cast<int>(state.range(0));
  zero::text::encode_batch(*data.tokenizer, lines, threads);  // every thread's cache warm
  timespec cpu_start{}, cpu_end{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_start);
  for (auto _ : state) {
    zero::text::TokenBatch batch = zero::text::encode_batch(*data.tokenizer, lines, threads);
    benchmark::DoNotOptimize(batch.ids.data());
  }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu_end);
  const double cpu_seconds = static_cast<double>(cpu_end.tv_sec - cpu_start.tv_sec) +
                             static_cast<double>(cpu_end.tv_nsec - cpu_start.tv_nsec) * 1e-9;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.text.size()));
  report_decimal_megabytes(state, data.text.size());
  state.counters["CPU_ms_per_pass"] = cpu_seconds * 1e3 / static_cast<double>(state.iterations());
}
BENCHMARK(BM_EncodeBatchTinyShakespeare)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

void BM_DecodeTinyShakespeare(benchmark::State& state) {
  const Fixture& data = fixture();
  if (!data.tokenizer) {
    state.SkipWithError("tiny shakespeare not found: set ZERO_SHARED_DATA");
    return;
  }
  const auto ids = data.tokenizer->encode(data.text);
  for (auto _ : state) benchmark::DoNotOptimize(data.tokenizer->decode(ids));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.text.size()));
}
BENCHMARK(BM_DecodeTinyShakespeare)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
