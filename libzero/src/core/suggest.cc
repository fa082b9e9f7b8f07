// Edit distance and the nearest-name suggestion behind every "did you mean" message.
#include "zero/core/suggest.h"

#include <algorithm>
#include <vector>

namespace zero {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

namespace {

template <typename Candidates>
std::optional<std::string> nearest(std::string_view name, const Candidates& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  for (const auto& candidate : candidates) {
    const std::string_view other(candidate);
    std::size_t distance = edit_distance(name, other);
    const bool affix = name.size() >= 4 && other.size() >= 4 &&
                       (other.starts_with(name) || other.ends_with(name) ||
                        name.starts_with(other) || name.ends_with(other));
    if (distance > limit && !affix) continue;
    if (!best || distance < best_distance) {
      best = std::string(other);
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string> candidates) {
  return nearest(name, candidates);
}

std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string_view> candidates) {
  return nearest(name, candidates);
}

}  // namespace zero
