// What the decoder's golden tests read from a reference file (tests/golden's scripts write it):
// the model's parameters and the batch by their Hugging Face names, and the gradients and logits
// compared with it.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "golden.h"
#include "zero/checkpoint/safetensors.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"

namespace zero::testing {

// Every unit tensor of `model` from the reference's "param.<Hugging Face name>" (fp32); the
// vocabulary's padding rows stay zero.
inline void load_reference_params(gpt2::GPT2Model& model, const SafetensorsReader& reference) {
  for (int u = 0; u < model.num_units(); ++u) {
    float* data = model.param_data(u);
    for (const TensorSlot& slot : model.params(u).layout().slots()) {
      const std::vector<float> values =
          reference.read_float("param." + gpt2::hf_tensor_name(model.units()[u], slot.name));
      EXPECT_LE(values.size(), slot.num_elements) << slot.name;
      std::fill_n(data + slot.offset_elements, slot.num_elements, 0.0f);
      std::copy(values.begin(), values.end(), data + slot.offset_elements);
    }
  }
}

// An int64 tensor of the reference (token ids, targets, labels) as ints.
inline std::vector<int> read_ids(const SafetensorsReader& reference, const std::string& name) {
  std::vector<int> ids;
  for (const std::int64_t id : reference.read_int(name)) ids.push_back(static_cast<int>(id));
  return ids;
}

// The reference's batch: "tokens" and "targets", both [B, T].
struct ReferenceBatch {
  std::vector<int> tokens, targets;
  std::int64_t B = 0, T = 0;
};
inline ReferenceBatch read_reference_batch(const SafetensorsReader& reference) {
  const auto& shape = reference.tensor("tokens").shape;
  return {read_ids(reference, "tokens"), read_ids(reference, "targets"), shape.at(0), shape.at(1)};
}

// Expects every parameter gradient of `model` within `tolerance` (relative to its scale) of the
// reference's "grad.<Hugging Face name>", and the vocabulary's padding rows' gradients zero.
inline void expect_reference_grads(const gpt2::GPT2Model& model, const SafetensorsReader& reference,
                                   double tolerance) {
  for (int u = 0; u < model.num_units(); ++u)
    for (const TensorSlot& slot : model.grads(u).layout().slots()) {
      const std::string name = gpt2::hf_tensor_name(model.units()[u], slot.name);
      const std::vector<float> expected = reference.read_float("grad." + name);
      const float* actual = model.grad_data(u) + slot.offset_elements;
      expect_within("grad " + name, relative_error(actual, expected.data(), expected.size()),
                    tolerance);
      for (std::size_t i = expected.size(); i < slot.num_elements; ++i)
        ASSERT_EQ(actual[i], 0.0f) << name << " padded row element " << i;
    }
}

// The logits of the `rows` positions of `compute`'s last forward over the real vocabulary (the
// padding columns dropped), row after row.
inline std::vector<float> real_logits(const gpt2::GPT2Compute& compute,
                                      const gpt2::GPT2Config& config, std::int64_t rows) {
  std::vector<float> logits;
  for (std::int64_t row = 0; row < rows; ++row) {
    const float* begin = compute.logits() + row * config.padded_vocab_size();
    logits.insert(logits.end(), begin, begin + config.vocab_size);
  }
  return logits;
}

}  // namespace zero::testing
