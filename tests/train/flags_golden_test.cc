// The flag table's Hugging Face defaults against transformers 4.46 (ZERO_PYTHON, the project's
// venv): for each TrainingArguments row, the default recorded for the installed version (4.46.x,
// or 5.x when ZERO_PYTHON has that) is the dataclass field's default as Python writes it, and a
// row recorded as absent in that version is no field of it; then every field of the installed
// TrainingArguments is a row (or an alias) of `zero train`. Skips when ZERO_PYTHON lacks
// transformers or has another version.
#include "flags_golden.h"

namespace zero::train {
namespace {

using testing::compare_with;
using testing::reference_defaults;

TEST(FlagTableGolden, TrainingArgumentsDefaultsMatchTransformers) {
  std::string why;
  const nlohmann::json reference = reference_defaults("ZERO_PYTHON", why);
  if (reference.is_null()) GTEST_SKIP() << why;
  const std::string version = reference["version"];
  const bool v4_46 = version.starts_with("4.46.");
  if (!v4_46 && !version.starts_with("5.")) GTEST_SKIP() << "transformers " << version;
  EXPECT_GT(compare_with(reference, v4_46), 20);
  EXPECT_GE(reference["defaults"].size(), v4_46 ? 131u : 110u);
}

}  // namespace
}  // namespace zero::train
