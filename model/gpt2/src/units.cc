// The decoder's parameter units (the family's tensors, family.h) and their sharding-independent
// initialisation.
#include "zero/gpt2/units.h"

#include <algorithm>
#include <cmath>

#include "zero/core/error.h"
#include "zero/gpt2/family.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

std::size_t UnitSpec::num_elements() const {
  std::size_t count = 0;
  for (const TensorSpec& tensor : tensors) count += tensor.num_elements();
  return count;
}

std::vector<UnitSpec> gpt2_units(const GPT2Config& config) {
  config.validate();
  const FamilySpec& family = family_spec(config.family);
  std::vector<UnitSpec> units;
  units.push_back(
      {"embeddings", UnitKind::kEmbeddings, -1, embedding_tensors(config), config.family});
  const std::vector<TensorSpec> block = block_tensors(config);
  for (int layer = 0; layer < config.n_layer; ++layer)
    units.push_back({std::string(family.block_unit) + "." + std::to_string(layer), UnitKind::kBlock,
                     layer, block, config.family});
  units.push_back({std::string(family.final_unit), UnitKind::kFinalNorm, -1, final_tensors(config),
                   config.family});
  return units;
}

std::string hf_tensor_name(const UnitSpec& unit, const std::string& tensor_name) {
  if (tensor_name == "lm_head.weight") return tensor_name;  // outside the decoder's module
  const std::string prefix(family_spec(unit.family).hf_prefix);
  if (unit.kind == UnitKind::kBlock) return prefix + unit.name + "." + tensor_name;
  return prefix + tensor_name;
}

void init_unit_range(const GPT2Config& config, const UnitSpec& unit, std::uint64_t seed,
                     ElementRange range, float* out) {
  std::size_t tensor_begin = 0;
  std::fill(out, out + range.size(), 0.0f);
  const double residual_std =
      config.initializer_range / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  for (const TensorSpec& tensor : unit.tensors) {
    const std::size_t count = tensor.num_elements();
    const ElementRange tensor_range{tensor_begin, tensor_begin + count};
    tensor_begin += count;
    const ElementRange overlap = intersect(tensor_range, range);
    if (overlap.empty()) continue;
    const std::string& name = tensor.name;
    const bool is_bias = name.ends_with(".bias");
    const bool is_norm = is_norm_weight(unit.family, name);
    const bool is_residual = is_scaled_residual(unit.family, name);
    const std::uint64_t key = derive_key(seed, hash_name(hf_tensor_name(unit, name)));
    // Rows of the vocabulary's matrices (wte, embed_tokens, lm_head) past the real vocabulary
    // stay zero.
    const bool vocabulary_rows = tensor.shape.size() == 2 && unit.kind != UnitKind::kBlock &&
                                 tensor.shape[0] == config.padded_vocab_size() &&
                                 name != "wpe.weight";
    const std::size_t real_count =
        vocabulary_rows ? static_cast<std::size_t>(config.vocab_size * config.n_embd) : count;
    const double std = is_residual ? residual_std : config.initializer_range;
    float* destination = out + (overlap.begin - range.begin);
    const std::int64_t n = static_cast<std::int64_t>(overlap.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t element = overlap.begin - tensor_range.begin + static_cast<std::size_t>(i);
      float value = 0.0f;
      if (is_norm)
        value = 1.0f;
      else if (!is_bias && element < real_count)
        value = static_cast<float>(std * normal_double(key, element));
      destination[i] = value;
    }
  }
}

}  // namespace zero::gpt2
