// Greedy and top-k sampling, and the forward-per-token prompt continuation on a DeviceContext.
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
    : model_(model), context_(context), window_(window) {
  const GPT2Config& config = model.config();
  ZERO_CHECK(window >= 1 && window <= config.n_positions, "generation window ", window,
             " must be in [1, n_positions = ", config.n_positions, "]");
  if (param_dtype != DType::kFloat32 || !context.host_addressable(MemorySpace::kDevice))
    upload_params(param_dtype);
  compute_ = std::make_unique<GPT2Compute>(config, 1, window, context,
                                           ComputeOptions{.param_dtype = param_dtype});
  last_row_ = context.allocator(MemorySpace::kHostPinned)
                  .allocate(static_cast<std::size_t>(config.vocab_size) * sizeof(float),
                            MemoryCategory::kWorkspace);
}

NextTokenLogits::~NextTokenLogits() {
  try {  // queued work may still read the parameters
    context_.compute_stream().synchronize();
  } catch (...) {
  }
}

// Each unit rounded on the host: into its device buffer where the host addresses it, else into
// one pinned buffer of the largest unit's size, copied and waited for unit by unit (the host's
// rounding is the slower part; the pinned memory stays one unit's, whatever the model's size).
// Waited for before the first forward, which may run on this thread (the CPU's host mode).
void NextTokenLogits::upload_params(DType param_dtype) {
  Allocator& device_memory = context_.allocator(MemorySpace::kDevice);
  const bool host_addressable = context_.host_addressable(MemorySpace::kDevice);
  std::size_t largest = 0;
  for (int unit = 0; unit < model_.num_units(); ++unit)
    largest = std::max(largest, model_.params(unit).layout().padded_num_elements());
  Buffer staging;
  if (!host_addressable)
    staging = context_.allocator(MemorySpace::kHostPinned)
                  .allocate(largest * size_of(param_dtype), MemoryCategory::kWorkspace);
  Stream& stream = context_.compute_stream();
  for (int unit = 0; unit < model_.num_units(); ++unit) {
    const FlatBuffer& host = model_.params(unit);
    FlatBuffer& device = device_params_.emplace_back(host.layout(), param_dtype, device_memory,
                                                     MemoryCategory::kParams);
    void* rounded = host_addressable ? device.data() : staging.data();
    convert(host.data(), DType::kFloat32, rounded, param_dtype,
            host.layout().padded_num_elements());
    if (host_addressable) continue;
    context_.copy(stream, rounded, device.data(), device.size_bytes());
    stream.synchronize();  // before the staging buffer takes the next unit
  }
}

ConstUnitData NextTokenLogits::unit_params(int unit) const {
  if (device_params_.empty()) return model_.param_data(unit);
  return {device_params_[unit].data(), device_params_[unit].dtype()};
}

std::vector<float> NextTokenLogits::operator()(std::span<const int> tokens) {
  ZERO_CHECK(!tokens.empty(), "next-token logits of an empty sequence");
  const GPT2Config& config = model_.config();
  const std::int64_t length = std::min<std::int64_t>(window_, std::ssize(tokens));
  std::vector<int> input(static_cast<std::size_t>(window_), 0);  // causal: the tail is not read
  std::copy(tokens.end() - length, tokens.end(), input.begin());
  compute_->set_inputs(input, {});
  compute_->forward_embeddings(unit_params(embeddings_unit()));
  for (int layer = 0; layer < config.n_layer; ++layer)
    compute_->forward_block(layer, unit_params(block_unit(layer)));
  compute_->forward_head(unit_params(final_norm_unit(config)), unit_params(head_unit(config)));
  const DType dtype = compute_->logits_dtype();
  const std::size_t row_bytes = static_cast<std::size_t>(config.vocab_size) * size_of(dtype);
  const auto* logits = static_cast<const std::byte*>(compute_->logits_data());
  Stream& stream = context_.compute_stream();
  context_.copy(
      stream,
      logits + static_cast<std::size_t>((length - 1) * config.padded_vocab_size()) * size_of(dtype),
      last_row_.data(), row_bytes);
  stream.synchronize();
  std::vector<float> row(static_cast<std::size_t>(config.vocab_size));
  convert(last_row_.data(), dtype, row.data(), DType::kFloat32, row.size());
  return row;
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
