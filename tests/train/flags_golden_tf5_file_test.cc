// The flag table's 5.x column against transformers 5's TrainingArguments as recorded in
// tests/golden/data/transformers5_training_arguments.json (tests/golden/record_torch2_goldens.py
// states the versions): runs in CI, with no Python. Every default recorded for 5.x is the 5.x
// dataclass field's, a row absent in 5.x is no field of it, and every 5.x field is a row or an
// alias of `zero train`.
#include "flags_golden.h"

namespace zero::train {
namespace {

using testing::compare_with;

TEST(FlagTableGolden, TheFiveColumnMatchesTheRecordedTransformersFive) {
  const char* source = std::getenv("ZERO_SOURCE_DIR");
  ASSERT_NE(source, nullptr) << "ZERO_SOURCE_DIR unset";
  const std::string path =
      std::string(source) + "/tests/golden/data/transformers5_training_arguments.json";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  const nlohmann::json reference = nlohmann::json::parse(file);
  const std::string version = reference["version"];
  ASSERT_TRUE(version.starts_with("5.")) << path << " records transformers " << version;
  EXPECT_GE(reference["defaults"].size(), 110u);
  EXPECT_GT(compare_with(reference, false), 20);
}

}  // namespace
}  // namespace zero::train
