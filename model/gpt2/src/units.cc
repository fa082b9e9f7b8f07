// GPT-2's parameter units and their sharding-independent initialisation.
#include "zero/gpt2/units.h"

#include <algorithm>
#include <cmath>

#include "zero/core/error.h"
#include "zero/gpt2/rng.h"

namespace zero::gpt2 {

std::size_t UnitSpec::num_elements() const {
  std::size_t count = 0;
  for (const TensorSpec& tensor : tensors) count += tensor.num_elements();
  return count;
}

std::vector<UnitSpec> gpt2_units(const GPT2Config& config) {
  config.validate();
  const std::int64_t C = config.n_embd, H = config.hidden_size();
  std::vector<UnitSpec> units;
  units.push_back(
      {"embeddings",
       UnitKind::kEmbeddings,
       -1,
       {{"wte.weight", {config.padded_vocab_size(), C}}, {"wpe.weight", {config.n_positions, C}}}});
  for (int layer = 0; layer < config.n_layer; ++layer) {
    units.push_back({"h." + std::to_string(layer),
                     UnitKind::kBlock,
                     layer,
                     {{"ln_1.weight", {C}},
                      {"ln_1.bias", {C}},
                      {"attn.c_attn.weight", {C, 3 * C}},
                      {"attn.c_attn.bias", {3 * C}},
                      {"attn.c_proj.weight", {C, C}},
                      {"attn.c_proj.bias", {C}},
                      {"ln_2.weight", {C}},
                      {"ln_2.bias", {C}},
                      {"mlp.c_fc.weight", {C, H}},
                      {"mlp.c_fc.bias", {H}},
                      {"mlp.c_proj.weight", {H, C}},
                      {"mlp.c_proj.bias", {C}}}});
  }
  units.push_back({"ln_f", UnitKind::kFinalNorm, -1, {{"ln_f.weight", {C}}, {"ln_f.bias", {C}}}});
  return units;
}

std::string hf_tensor_name(const UnitSpec& unit, const std::string& tensor_name) {
  if (unit.kind == UnitKind::kBlock) return "transformer." + unit.name + "." + tensor_name;
  return "transformer." + tensor_name;
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
    const bool is_norm_weight = name.starts_with("ln_") && name.ends_with(".weight");
    const bool is_residual = name == "attn.c_proj.weight" || name == "mlp.c_proj.weight";
    const std::uint64_t key = derive_key(seed, hash_name(hf_tensor_name(unit, name)));
    // Rows of wte past the real vocabulary stay zero.
    const std::size_t real_count =
        name == "wte.weight" ? static_cast<std::size_t>(config.vocab_size * config.n_embd) : count;
    const double std = is_residual ? residual_std : config.initializer_range;
    float* destination = out + (overlap.begin - range.begin);
    const std::int64_t n = static_cast<std::int64_t>(overlap.size());
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) {
      const std::size_t element = overlap.begin - tensor_range.begin + static_cast<std::size_t>(i);
      float value = 0.0f;
      if (is_norm_weight)
        value = 1.0f;
      else if (!is_bias && element < real_count)
        value = static_cast<float>(std * normal_double(key, element));
      destination[i] = value;
    }
  }
}

}  // namespace zero::gpt2
