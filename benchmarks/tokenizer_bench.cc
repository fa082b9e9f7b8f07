// GPT-2 tokenizer throughput: single-thread encode of tiny shakespeare, in bytes per second.
// Data: $ZERO_SHARED_DATA (default ../shared/data beside the source tree). Compare with
// tests/golden/tokenizer_reference_bench.py (tiktoken and tokenizers on the same text).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zero/text/tokenizer.h"

namespace {

namespace fs = std::filesystem;

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
  state.counters["tokens"] = static_cast<double>(ids.size());
}
BENCHMARK(BM_EncodeTinyShakespeareWarmCache)->Unit(benchmark::kMillisecond)->MinTime(2.0);

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
}
BENCHMARK(BM_EncodeTinyShakespeareColdCache)->Unit(benchmark::kMillisecond)->MinTime(2.0);

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
  state.counters["lines"] = static_cast<double>(lines.size());
}
BENCHMARK(BM_EncodeTinyShakespearePerLine)->Unit(benchmark::kMillisecond)->MinTime(2.0);

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
BENCHMARK(BM_DecodeTinyShakespeare)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
