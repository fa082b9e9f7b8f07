// Nearest-name suggestions.
#include "zero/core/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zero {
namespace {

TEST(Suggest, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("ab", "ba"), 1u);  // adjacent swap
}

TEST(Suggest, FindsPlausibleTypos) {
  const std::vector<std::string> keys = {"stage3_param_persistence_threshold",
                                         "stage3_max_live_parameters", "reduce_bucket_size",
                                         "overlap_comm"};
  EXPECT_EQ(nearest_name("stage3_param_persitence_threshold", keys),
            "stage3_param_persistence_threshold");
  EXPECT_EQ(nearest_name("overlap_com", keys), "overlap_comm");
  EXPECT_EQ(nearest_name("reduce_bucket", keys), "reduce_bucket_size");  // prefix
  EXPECT_FALSE(nearest_name("learning_rate", keys).has_value());
  EXPECT_FALSE(nearest_name("x", std::vector<std::string>{}).has_value());
}

}  // namespace
}  // namespace zero
