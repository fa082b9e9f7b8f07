// Seeded random inputs for the kernel tests (GPT-2's, libzero's CUDA bodies): normal values (drawn
// in double, stored as Real) and token ids below a vocabulary size. The same seed gives the same
// inputs on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace zero::testing {

template <typename Real = float>
std::vector<Real> random_vector(std::size_t count, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<Real> values(count);
  for (Real& value : values) value = static_cast<Real>(normal(generator));
  return values;
}

inline std::vector<int> random_tokens(std::size_t count, int vocab, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<int> tokens(count);
  for (int& token : tokens) token = static_cast<int>(generator() % static_cast<unsigned>(vocab));
  return tokens;
}

}  // namespace zero::testing

namespace zero::gpt2::testing {
using zero::testing::random_tokens;
using zero::testing::random_vector;
}  // namespace zero::gpt2::testing
