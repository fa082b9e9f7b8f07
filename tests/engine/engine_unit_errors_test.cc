// Errors about a model's unit name it ("fc1") and what it has, not its number (issue 43).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/test_data.h"
#include "zero/comm/communicator.h"
#include "zero/engine/engine.h"
#include "zero/factory/engine_factory.h"

namespace zero {
namespace {

using testing::error_of;

// An engine at stage 3 with two units, "fc0" and "fc1", in fp32 or bf16.
struct TwoUnits {
  explicit TwoUnits(bool bf16) : communicator(make_local_communicator()) {
    EngineOptions options;
    options.stage = 3;
    options.param_persistence_threshold = 0;
    options.bf16.enabled = bf16;
    engine = make_engine(options, *communicator);
    auto zeros = [](const TensorSlot&, std::span<float> values) {
      for (float& value : values) value = 0;
    };
    engine->register_unit("fc0", {{"w", {2, 2}}}, zeros);
    fc1 = engine->register_unit("fc1", {{"w", {4, 4}}, {"b", {4}}}, zeros);
  }
  std::unique_ptr<Communicator> communicator;
  std::unique_ptr<Engine> engine;
  UnitId fc1 = -1;
};

class EngineUnitErrors : public ::testing::TestWithParam<bool> {};  // bf16 or fp32

TEST_P(EngineUnitErrors, AMissingTensorNamesTheUnitAndItsTensors) {
  TwoUnits model(GetParam());
  const std::string gathered = error_of([&] { model.engine->gather(model.fc1).tensor("weight"); });
  EXPECT_NE(gathered.find("unit 'fc1' has no tensor 'weight'; it has: w, b"), std::string::npos)
      << gathered;
  const std::string gradients = error_of([&] { model.engine->grads(model.fc1).tensor("weight"); });
  EXPECT_NE(gradients.find("unit 'fc1' has no tensor 'weight'; it has: w, b"), std::string::npos)
      << gradients;
}

TEST_P(EngineUnitErrors, AnUnknownUnitNumberListsTheUnitsByName) {
  TwoUnits model(GetParam());
  const std::string message = error_of([&] { model.engine->gather(7); });
  EXPECT_NE(message.find("gather: no unit #7; the engine has 2 unit(s): fc0, fc1"),
            std::string::npos)
      << message;
  const std::string reduce = error_of([&] { model.engine->reduce_grads(-1); });
  EXPECT_NE(reduce.find("reduce_grads: no unit #-1; the engine has 2 unit(s): fc0, fc1"),
            std::string::npos)
      << reduce;
}

INSTANTIATE_TEST_SUITE_P(Precisions, EngineUnitErrors, ::testing::Values(false, true),
                         [](const auto& test) { return test.param ? "bf16" : "fp32"; });

TEST(EngineUnitErrors, AnFp32ReadOfABf16UnitNamesIt) {
  TwoUnits model(/*bf16=*/true);
  const std::string params = error_of([&] { model.engine->gather(model.fc1).tensor("w"); });
  EXPECT_NE(params.find("unit 'fc1' is stored in bf16, not read as fp32"), std::string::npos)
      << params;
  const std::string gradients = error_of([&] { model.engine->grads(model.fc1).tensor("w"); });
  EXPECT_NE(gradients.find("the gradients of unit 'fc1' are stored in bf16, not read as fp32"),
            std::string::npos)
      << gradients;
}

}  // namespace
}  // namespace zero
