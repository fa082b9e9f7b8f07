// Perplexity and text samples (samples.h).
#include "task/samples.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "zero/gpt2/sampling.h"

namespace zero::train::detail {

double perplexity_of(double loss) {
  return loss < 700.0 ? std::exp(loss) : std::numeric_limits<double>::infinity();
}

std::vector<std::string> generate_samples(const gpt2::GPT2Model& model, DeviceContext& context,
                                          DType param_dtype, const text::Tokenizer& tokenizer,
                                          const TrainingArguments& arguments) {
  const std::optional<text::TokenId> end_of_text = tokenizer.end_of_text_id();
  std::vector<int> stop;
  if (end_of_text) stop.push_back(static_cast<int>(*end_of_text));
  std::vector<int> prompt;
  for (const text::TokenId id : tokenizer.encode(arguments.prompt))
    prompt.push_back(static_cast<int>(id));
  if (prompt.empty() && end_of_text) prompt.push_back(static_cast<int>(*end_of_text));
  if (prompt.empty()) prompt.push_back(0);
  std::vector<std::string> samples;
  gpt2::NextTokenLogits next_logits(
      model, context,
      gpt2::generation_window(model.config(), prompt.size(), arguments.sample_tokens), param_dtype);
  for (int s = 0; s < arguments.num_samples; ++s) {
    const std::vector<int> tokens =
        gpt2::generate(next_logits, prompt, arguments.sample_tokens,
                       {.top_k = arguments.top_k,
                        .temperature = static_cast<float>(arguments.temperature),
                        .seed = arguments.seed + static_cast<std::uint64_t>(s)},
                       stop);
    const std::vector<text::TokenId> ids(tokens.begin(), tokens.end());
    samples.push_back(tokenizer.decode(ids, text::SkipSpecialTokens::kYes));
  }
  return samples;
}

}  // namespace zero::train::detail
