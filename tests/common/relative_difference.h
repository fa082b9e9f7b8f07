// The relative distance the parity tests compare parameters by.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace zero::testing {

// ‖a − b‖ / ‖b‖ in double, leaving out elements [skip_begin, skip_end) (e.g. the embeddings'
// padded vocabulary rows, which a Hugging Face checkpoint does not carry). Vectors of different
// sizes are infinitely far apart.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b,
                                  std::size_t skip_begin = 0, std::size_t skip_end = 0) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (i >= skip_begin && i < skip_end) continue;
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-30));
}

}  // namespace zero::testing
