// Counter-based random numbers for GPT-2: initialisation and dropout as pure functions of keys
// and element indices, so values never depend on how work is split across ranks or threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace zero::gpt2 {

// splitmix64's finaliser: a bijective 64-bit mix (Steele, Lea, Flood 2014).
constexpr std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Key derived from a parent key and one more field.
constexpr std::uint64_t derive_key(std::uint64_t key, std::uint64_t field) {
  return mix64(key ^ mix64(field + 0x632BE59BD9B4E019ull));
}

// FNV-1a of a name (tensor names key their initialisation).
constexpr std::uint64_t hash_name(std::string_view name) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return hash;
}

// Uniform in (0, 1) with 24 random bits, element `counter` of stream `key`. constexpr, as the
// dropout functions below, so the CUDA kernels (nvcc --expt-relaxed-constexpr) draw the same masks.
constexpr float uniform_float(std::uint64_t key, std::uint64_t counter) {
  const std::uint64_t bits = mix64(key + counter * 0xD1B54A32D192ED03ull) >> 40;
  return (static_cast<float>(bits) + 0.5f) * (1.0f / 16777216.0f);
}

// Standard normal, element `counter` of stream `key` (Box-Muller in double on two 53-bit uniforms).
inline double normal_double(std::uint64_t key, std::uint64_t counter) {
  const std::uint64_t a = mix64(key + (2 * counter) * 0xD1B54A32D192ED03ull);
  const std::uint64_t b = mix64(key + (2 * counter + 1) * 0xD1B54A32D192ED03ull);
  const double u1 = (static_cast<double>(a >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Where a dropout mask is drawn: key (seed, step, site) and, per row, (global sample, position);
// element e of row (b, t) is kept when uniform(row_key(b, t), e) >= probability, and scaled by
// 1 / (1 - probability). Sites: 0 embeddings, 1 + 3l attention probabilities of block l,
// 2 + 3l attention output, 3 + 3l MLP output.
struct DropoutSite {
  float probability = 0.0f;
  std::uint64_t key = 0;           // derive_key(derive_key(derive_key(seed, step), site), ...)
  std::int64_t sample_offset = 0;  // global index of batch row 0

  constexpr bool active() const { return probability > 0.0f; }
  constexpr float scale() const { return 1.0f / (1.0f - probability); }
  constexpr std::uint64_t row_key(std::int64_t b, std::int64_t t) const {
    return derive_key(derive_key(key, static_cast<std::uint64_t>(sample_offset + b)),
                      static_cast<std::uint64_t>(t));
  }
  constexpr bool keep(std::uint64_t row, std::uint64_t element) const {
    return uniform_float(row, element) >= probability;
  }
};

}  // namespace zero::gpt2
