// A golden test's model holding a reference file's parameters, found by their Hugging Face names.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "zero/checkpoint/safetensors.h"
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

}  // namespace zero::testing
