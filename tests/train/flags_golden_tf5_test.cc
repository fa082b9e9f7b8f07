// The flag table's 5.x column against transformers 5 through ZERO_PYTHON_TF5 (a Python with
// transformers >= 5, e.g. a private venv; the CMake cache variable of that name sets it): every
// default recorded for 5.x is the 5.x dataclass field's, a row absent in 5.x is no field of it,
// and every 5.x field is a row or an alias. Skips when ZERO_PYTHON_TF5 is unset or has no
// transformers 5.
#include "flags_golden.h"

namespace zero::train {
namespace {

using testing::compare_with;
using testing::reference_defaults;

TEST(FlagTableGolden, TheFiveColumnMatchesTransformersFive) {
  std::string why;
  const nlohmann::json reference = reference_defaults("ZERO_PYTHON_TF5", why);
  if (reference.is_null()) GTEST_SKIP() << why;
  const std::string version = reference["version"];
  if (!version.starts_with("5.")) GTEST_SKIP() << "ZERO_PYTHON_TF5 has transformers " << version;
  EXPECT_GT(compare_with(reference, false), 20);
}

}  // namespace
}  // namespace zero::train
