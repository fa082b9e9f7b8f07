// Rotary embeddings' inverse frequencies and cos/sin table (rope.h), each fp32 operation in the
// order transformers 4.46 runs it on its fp32 tensors (compiled with -ffp-contract=off, so no
// product is fused into a sum). torch's scalar / tensor is reciprocal(tensor) · scalar, a Python
// scalar meets an fp32 tensor as fp32, and theta^x is torch's fp32 pow (Sleef, within 1 ulp; here
// pow in double rounded once: tests/golden/llama_kernels_reference.py measures the difference).
#include "zero/gpt2/rope.h"

#include <cmath>
#include <numbers>

#include "zero/core/error.h"

namespace zero::gpt2 {

void validate(const RopeParameters& p) {
  ZERO_CHECK(p.head_dim > 0 && p.head_dim % 2 == 0, "rotary embedding: head_dim must be even and ",
             "positive, got ", p.head_dim);
  ZERO_CHECK(p.theta > 0.0 && std::isfinite(p.theta), "rotary embedding: rope_theta must be ",
             "positive, got ", p.theta);
  if (p.scaling.type != RopeScaling::Type::kLlama3) return;
  const RopeScaling& s = p.scaling;
  ZERO_CHECK(s.factor > 0.0, "rope_scaling (llama3): factor must be positive, got ", s.factor);
  ZERO_CHECK(s.original_max_position_embeddings > 0.0,
             "rope_scaling (llama3): original_max_position_embeddings must be positive, got ",
             s.original_max_position_embeddings);
  ZERO_CHECK(s.low_freq_factor > 0.0,
             "rope_scaling (llama3): low_freq_factor must be positive, got ", s.low_freq_factor);
  ZERO_CHECK(s.high_freq_factor > s.low_freq_factor, "rope_scaling (llama3): high_freq_factor ",
             s.high_freq_factor, " must be above low_freq_factor ", s.low_freq_factor);
}

namespace {

// _compute_llama3_parameters on one fp32 inverse frequency.
float llama3_frequency(float frequency, const RopeScaling& s) {
  const float factor = static_cast<float>(s.factor);
  const float original = static_cast<float>(s.original_max_position_embeddings);
  const float low_wavelength =
      static_cast<float>(s.original_max_position_embeddings / s.low_freq_factor);
  const float high_wavelength =
      static_cast<float>(s.original_max_position_embeddings / s.high_freq_factor);
  const float wavelength = (1.0f / frequency) * static_cast<float>(2.0 * std::numbers::pi);
  const float scaled = wavelength > low_wavelength ? frequency / factor : frequency;
  const float smooth = ((1.0f / wavelength) * original - static_cast<float>(s.low_freq_factor)) /
                       static_cast<float>(s.high_freq_factor - s.low_freq_factor);
  const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
  const bool medium = !(wavelength < high_wavelength) && !(wavelength > low_wavelength);
  return medium ? smoothed : scaled;
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const RopeParameters& p) {
  validate(p);
  const std::int64_t half = p.head_dim / 2;
  const float theta = static_cast<float>(p.theta);
  std::vector<float> frequencies(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(p.head_dim);
    const float power = static_cast<float>(std::pow(double{theta}, double{exponent}));
    float frequency = 1.0f / power;
    if (p.scaling.type == RopeScaling::Type::kLlama3)
      frequency = llama3_frequency(frequency, p.scaling);
    frequencies[static_cast<std::size_t>(i)] = frequency;
  }
  return frequencies;
}

std::vector<float> rope_table(const RopeParameters& p, std::int64_t positions) {
  ZERO_CHECK(positions >= 0, "rotary embedding: a table of ", positions, " positions");
  const std::vector<float> frequencies = rope_inverse_frequencies(p);
  const std::int64_t half = p.head_dim / 2;
  std::vector<float> table(static_cast<std::size_t>(rope_table_elements(p.head_dim, positions)));
  for (std::int64_t position = 0; position < positions; ++position) {
    float* row = table.data() + position * p.head_dim;
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(position) * frequencies[static_cast<std::size_t>(i)];
      row[i] = static_cast<float>(std::cos(double{angle}));
      row[half + i] = static_cast<float>(std::sin(double{angle}));
    }
  }
  return table;
}

}  // namespace zero::gpt2
