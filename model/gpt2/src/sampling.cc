// Greedy and top-k sampling, and prompt continuation through a KV cache on a DeviceContext.
#include "zero/gpt2/sampling.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

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

NextTokenLogits::NextTokenLogits(const GPT2Model& model, DeviceContext& context,
                                 std::int64_t window, DType param_dtype)
    : decoder_(model, context, window, param_dtype) {}

std::vector<float> NextTokenLogits::operator()(std::span<const int> tokens) {
  ZERO_CHECK(!tokens.empty(), "next-token logits of an empty sequence");
  const std::int64_t length = std::min<std::int64_t>(window(), std::ssize(tokens));
  const std::span<const int> current = tokens.last(static_cast<std::size_t>(length));
  const bool extends = cached_.size() < current.size() &&
                       std::equal(cached_.begin(), cached_.end(), current.begin());
  if (!extends) {
    decoder_.reset();
    cached_.clear();
  }
  const std::vector<float> logits = decoder_.append(current.subspan(cached_.size()));
  cached_.assign(current.begin(), current.end());
  return logits;
}

std::int64_t generation_window(const GPT2Config& config, std::size_t prompt_tokens,
                               int max_new_tokens) {
  return std::min<std::int64_t>(
      config.n_positions, static_cast<std::int64_t>(prompt_tokens) + std::max(max_new_tokens, 1));
}

std::vector<int> generate(NextTokenLogits& next_logits, std::span<const int> prompt,
                          int max_new_tokens, const SamplingOptions& options,
                          std::span<const int> stop_tokens) {
  ZERO_CHECK(!prompt.empty(), "generate: the prompt is empty");
  ZERO_CHECK(max_new_tokens >= 0, "generate: max_new_tokens is ", max_new_tokens,
             ", expected >= 0");
  std::vector<int> tokens(prompt.begin(), prompt.end());
  for (int i = 0; i < max_new_tokens; ++i) {
    const std::vector<float> last = next_logits(tokens);
    const int next = options.top_k > 1 ? sample_top_k(last, options.top_k, options.temperature,
                                                      uniform_float(options.seed, i))
                                       : sample_greedy(last);
    tokens.push_back(next);
    if (std::find(stop_tokens.begin(), stop_tokens.end(), next) != stop_tokens.end()) break;
  }
  return tokens;
}

std::vector<int> generate(const GPT2Model& model, DeviceContext& context,
                          std::span<const int> prompt, int max_new_tokens,
                          const SamplingOptions& options, std::span<const int> stop_tokens,
                          DType param_dtype) {
  ZERO_CHECK(!prompt.empty(), "generate: the prompt is empty");
  NextTokenLogits next_logits(model, context,
                              generation_window(model.config(), prompt.size(), max_new_tokens),
                              param_dtype);
  return generate(next_logits, prompt, max_new_tokens, options, stop_tokens);
}

std::vector<int> eos_token_ids(const GPT2Config& config) {
  std::vector<int> ids;
  for (const std::int64_t id : config.eos_token_ids) ids.push_back(static_cast<int>(id));
  if (ids.empty() && config.eos_token_id >= 0) ids.push_back(static_cast<int>(config.eos_token_id));
  return ids;
}

}  // namespace zero::gpt2
