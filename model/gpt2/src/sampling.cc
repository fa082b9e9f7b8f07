// Greedy and top-k sampling, and the forward-per-token prompt continuation.
#include "zero/gpt2/sampling.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

int sample_greedy(std::span<const float> logits) {
  ZERO_CHECK(!logits.empty(), "sampling from empty logits");
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int sample_top_k(std::span<const float> logits, int k, float temperature, float coin) {
  ZERO_CHECK(!logits.empty(), "sampling from empty logits");
  ZERO_CHECK(temperature > 0.0f, "sampling temperature must be positive, got ", temperature);
  if (k <= 1) return sample_greedy(logits);
  k = std::min<int>(k, static_cast<int>(logits.size()));
  std::vector<int> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> weights(k);
  const double max = logits[order[0]];
  double sum = 0.0;
  for (int i = 0; i < k; ++i) sum += weights[i] = std::exp((logits[order[i]] - max) / temperature);
  double target = static_cast<double>(coin) * sum;
  for (int i = 0; i < k; ++i) {
    target -= weights[i];
    if (target < 0.0) return order[i];
  }
  return order[k - 1];
}

std::vector<int> generate(const GPT2Model& model, Allocator& allocator, std::span<const int> prompt,
                          int max_new_tokens, const SamplingOptions& options, int stop_token) {
  ZERO_CHECK(!prompt.empty(), "generate: the prompt is empty");
  const GPT2Config& config = model.config();
  std::vector<int> tokens(prompt.begin(), prompt.end());
  const std::int64_t window = std::min<std::int64_t>(
      config.n_positions, static_cast<std::int64_t>(tokens.size()) + max_new_tokens);
  // GPT2Model's parameters are host memory: the CPU backend's kernels, on this thread.
  const std::unique_ptr<DeviceContext> context = make_cpu_context();
  GPT2Compute compute(config, 1, window, *context, allocator);
  std::vector<int> input(static_cast<std::size_t>(window));
  const std::int64_t Vp = config.padded_vocab_size();
  for (int i = 0; i < max_new_tokens; ++i) {
    const std::int64_t length =
        std::min<std::int64_t>(window, static_cast<std::int64_t>(tokens.size()));
    std::fill(input.begin(), input.end(), 0);
    std::copy(tokens.end() - length, tokens.end(), input.begin());
    model.forward(compute, input);
    const std::span<const float> last(compute.logits() + (length - 1) * Vp,
                                      static_cast<std::size_t>(config.vocab_size));
    const int next = options.top_k > 1 ? sample_top_k(last, options.top_k, options.temperature,
                                                      uniform_float(options.seed, i))
                                       : sample_greedy(last);
    tokens.push_back(next);
    if (next == stop_token) break;
  }
  return tokens;
}

}  // namespace zero::gpt2
