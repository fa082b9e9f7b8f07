// What the causal LM prints of its model (internal to zero::train): perplexity, and text samples
// from the final model (--num_samples).
#pragma once

#include <string>
#include <vector>

#include "zero/core/device_context.h"
#include "zero/gpt2/model.h"
#include "zero/text/tokenizer.h"
#include "zero/train/arguments.h"

namespace zero::train::detail {

// exp(loss), inf where that overflows (run_clm catches math.exp's OverflowError as inf).
double perplexity_of(double loss);

// --num_samples continuations of --prompt (the end-of-text token when empty) by `model`, top-k
// sampled with --seed + sample index, decoded without special tokens; computed on `context`'s
// device with the parameters in `param_dtype` (gpt2::NextTokenLogits).
std::vector<std::string> generate_samples(const gpt2::GPT2Model& model, DeviceContext& context,
                                          DType param_dtype, const text::Tokenizer& tokenizer,
                                          const TrainingArguments& arguments);

}  // namespace zero::train::detail
