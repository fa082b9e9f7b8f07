// Generation's tokens/s on CPU for GPT-2 124M (random weights, fp32): greedy continuation of a
// random prompt with the KV cache (gpt2::generate, decoder.h) against the path it replaced, a full
// forward (GPT2Compute, B 1) over the whole window for every new token, in one run, with the
// tokens of both compared. Wall and process CPU seconds of each; tokens/s counts the new tokens
// over the whole call (prefill included).
// Usage: generate_bench [--prompt 64] [--new 128] [--skip_full_forward]; threads from
// OMP_NUM_THREADS.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "zero/core/allocator.h"
#include "zero/core/device_context.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/decoder.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"

namespace {

using namespace zero::gpt2;

struct Seconds {
  double wall = 0.0, cpu = 0.0;
};

template <typename Work>
Seconds timed(Work&& work) {
  const auto wall = std::chrono::steady_clock::now();
  const std::clock_t cpu = std::clock();
  work();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
          static_cast<double>(std::clock() - cpu) / CLOCKS_PER_SEC};
}

// The replaced path: for each new token a forward over `window` positions (the sequence's last
// tokens, the tail padded), the last real row's logits, greedy.
std::vector<int> full_forward_per_token(const GPT2Model& model, zero::DeviceContext& context,
                                        zero::Allocator& allocator, std::vector<int> tokens,
                                        int new_tokens, std::int64_t window) {
  const GPT2Config& config = model.config();
  GPT2Compute compute(config, 1, window, context, allocator);
  for (int i = 0; i < new_tokens; ++i) {
    const std::int64_t length = std::min<std::int64_t>(window, std::ssize(tokens));
    std::vector<int> input(static_cast<std::size_t>(window), 0);
    std::copy(tokens.end() - length, tokens.end(), input.begin());
    model.forward(compute, input);
    const float* row = compute.logits() + (length - 1) * config.padded_vocab_size();
    tokens.push_back(sample_greedy({row, static_cast<std::size_t>(config.vocab_size)}));
  }
  return tokens;
}

}  // namespace

int main(int argc, char** argv) {
  int prompt_length = 64, new_tokens = 128;
  bool full_forward = true;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--prompt" && i + 1 < argc) {
      prompt_length = std::atoi(argv[++i]);
    } else if (flag == "--new" && i + 1 < argc) {
      new_tokens = std::atoi(argv[++i]);
    } else if (flag == "--skip_full_forward") {
      full_forward = false;
    } else {
      std::fprintf(stderr, "usage: generate_bench [--prompt N] [--new N] [--skip_full_forward]\n");
      return 2;
    }
  }
  zero::MemoryLedger ledger;
  zero::HostAllocator allocator(ledger);
  const std::unique_ptr<zero::DeviceContext> context = zero::make_cpu_context();
  const GPT2Config config = GPT2Config::gpt2_124m();
  GPT2Model model(config, allocator);
  model.init(1);
  std::vector<int> prompt(static_cast<std::size_t>(prompt_length));
  for (int i = 0; i < prompt_length; ++i) prompt[i] = (i * 7919 + 13) % config.vocab_size;
  const std::int64_t window = generation_window(config, prompt.size(), new_tokens);
  std::printf("GPT-2 124M (random weights, fp32), B 1, prompt %d, %d new tokens, %d threads, %s\n",
              prompt_length, new_tokens, omp_get_max_threads(), cpu::gemm_backend().c_str());

  std::vector<int> cached;
  Seconds prefill;
  const Seconds with_cache =
      timed([&] { cached = generate(model, *context, prompt, new_tokens, {}); });
  {
    Decoder decoder(model, *context, window);
    prefill = timed([&] { decoder.append(prompt); });
  }
  std::printf("KV cache:     %7.2f s wall (%7.2f s CPU), %8.2f tokens/s; prefill alone %.3f s\n",
              with_cache.wall, with_cache.cpu, new_tokens / with_cache.wall, prefill.wall);
  if (!full_forward) return 0;
  std::vector<int> full;
  const Seconds without = timed([&] {
    full = full_forward_per_token(model, *context, allocator, prompt, new_tokens, window);
  });
  std::printf("full forward: %7.2f s wall (%7.2f s CPU), %8.2f tokens/s (window %lld)\n",
              without.wall, without.cpu, new_tokens / without.wall, static_cast<long long>(window));
  std::printf("speed-up %.1fx wall, %.1fx CPU; same tokens: %s\n", without.wall / with_cache.wall,
              without.cpu / with_cache.cpu, full == cached ? "yes" : "NO");
  return full == cached ? 0 : 1;
}
