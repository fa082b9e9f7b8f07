// The distances the parity and kernel tests compare results by: relative L2 and elementwise.
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

// Where a and b differ most, each element's difference relative to max(1, |b[i]|) (an absolute
// difference for values below 1): the index and the difference. Infinite where exactly one of the
// two is NaN or the sizes differ; two NaNs (an element neither wrote) are equal.
struct ElementwiseDifference {
  std::size_t index = 0;
  double difference = 0.0;
};
inline ElementwiseDifference elementwise_difference(const std::vector<float>& a,
                                                    const std::vector<float>& b) {
  if (a.size() != b.size()) return {0, std::numeric_limits<double>::infinity()};
  ElementwiseDifference worst;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    double difference = std::fabs(double(a[i]) - b[i]) / std::max(1.0, std::fabs(double(b[i])));
    if (std::isnan(difference)) difference = std::numeric_limits<double>::infinity();
    if (difference > worst.difference) worst = {i, difference};
  }
  return worst;
}

}  // namespace zero::testing
