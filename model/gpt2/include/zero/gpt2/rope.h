// Rotary position embeddings' frequencies and their cos/sin table, as transformers 4.46's
// LlamaRotaryEmbedding computes them (modeling_rope_utils.py: `_compute_default_rope_parameters`,
// `_compute_llama3_parameters`), for the kernels' rope_forward/rope_backward (kernels.h). The
// values are taken from a family's config.json (rope_theta, head_dim, rope_scaling) by the
// caller; this header reads no config.
#pragma once

#include <cstdint>
#include <vector>

namespace zero::gpt2 {

// config.json's rope_scaling: none, or type "llama3" (Llama 3.1, 3.2) with its four fields. The
// one definition: GPT2Config::rope_scaling (config.h) holds what the kernels read.
struct RopeScaling {
  enum class Type : std::uint8_t { kNone, kLlama3 };
  Type type = Type::kNone;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  bool enabled() const { return type != Type::kNone; }
  bool operator==(const RopeScaling& o) const {  // spelled out: nvcc compiles this header as C++17
    return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
           high_freq_factor == o.high_freq_factor &&
           original_max_position_embeddings == o.original_max_position_embeddings;
  }
};

struct RopeParameters {
  std::int64_t head_dim = 0;  // HS, even
  double theta = 10000.0;     // rope_theta
  RopeScaling scaling;
};

// Throws zero::Error naming the field for an odd or non-positive head_dim, a non-positive theta,
// or llama3 scaling with factor, original_max_position_embeddings or low_freq_factor not
// positive, or high_freq_factor not above low_freq_factor.
void validate(const RopeParameters& parameters);

// The head_dim / 2 inverse frequencies f_i, in fp32 by transformers' own sequence of fp32
// operations: f_i = 1 / theta^(2i / head_dim), then for llama3 (wavelength w_i = 2π / f_i, taken
// as reciprocal times 2π as torch's scalar division by a tensor does): f_i / factor where w_i >
// original / low_freq_factor, f_i where w_i < original / high_freq_factor, and between them
// (1 - s)·f_i / factor + s·f_i with s = (original / w_i - low_freq_factor) / (high_freq_factor -
// low_freq_factor).
std::vector<float> rope_inverse_frequencies(const RopeParameters& parameters);

// The table rope_forward reads: for each position p in [0, positions), head_dim floats, the
// head_dim / 2 cosines cos(p·f_i) and then the head_dim / 2 sines sin(p·f_i). The angle p·f_i is
// the fp32 product (HF computes inv_freq @ position_ids in fp32, autocast off); its cos and sin are
// rounded once to fp32. Computed once per (parameters, positions): a model keeps it.
std::vector<float> rope_table(const RopeParameters& parameters, std::int64_t positions);
inline std::int64_t rope_table_elements(std::int64_t head_dim, std::int64_t positions) {
  return head_dim * positions;
}

// The heads a rotation applies to: the first `heads` heads of head_dim channels of each (b, t) row
// of a (B, T, row_stride) array, at positions position_offset + t (a generation step's offset
// into its KV cache; 0 in training). In the attention's qkv (B, T, (NH + 2·NKV)·HS) = [q | k | v]
// the q and k heads lead each row: heads NH + NKV, row_stride (NH + 2·NKV)·HS rotate both.
struct RopeLayout {
  std::int64_t B = 0, T = 0;
  std::int64_t heads = 0, head_dim = 0;
  std::int64_t row_stride = 0;
  std::int64_t position_offset = 0;
};

}  // namespace zero::gpt2
