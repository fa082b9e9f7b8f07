// "Did you mean ...?": the nearest known name to a misspelled one.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace zero {

// Optimal-string-alignment edit distance (insertions, deletions, substitutions, adjacent swaps).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name`, when it is close enough to be a plausible typo: distance at
// most max(2, |name| / 3), or `name` a prefix/suffix of it (or it of `name`) for names of 4+ chars.
std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string> candidates);
std::optional<std::string> nearest_name(std::string_view name,
                                        std::span<const std::string_view> candidates);

}  // namespace zero
