// A custom model's units seen as their stored dtype (GatheredUnit/GradientBuffer::tensor_as), and
// errors about a unit naming it ("fc1") and what it has, not its number (issue 43).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
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

TEST(EngineUnitErrors, AnFp32ReadOfABf16UnitNamesItsTensorAndBothDtypes) {
  TwoUnits model(/*bf16=*/true);
  const std::string params = error_of([&] { model.engine->gather(model.fc1).tensor("w"); });
  EXPECT_NE(params.find("tensor 'w' of unit 'fc1' is stored in bf16, not read as fp32"),
            std::string::npos)
      << params;
  const std::string fp16 =
      error_of([&] { model.engine->gather(model.fc1).tensor_as<Float16>("b"); });
  EXPECT_NE(fp16.find("tensor 'b' of unit 'fc1' is stored in bf16, not read as fp16"),
            std::string::npos)
      << fp16;
  const std::string gradients = error_of([&] {
    GradientBuffer grads = model.engine->grads(model.fc1);
    if (grads.dtype == DType::kBFloat16) {
      grads.tensor("w");
    } else {
      grads.tensor_as<BFloat16>("w");
    }
  });
  const std::string wanted = model.engine->grad_dtype() == DType::kBFloat16
                                 ? "stored in bf16, not read as fp32"
                                 : "stored in fp32, not read as bf16";
  EXPECT_NE(gradients.find("the gradients of tensor 'w' of unit 'fc1' are " + wanted),
            std::string::npos)
      << gradients;
}

TEST(EngineUnitErrors, AReleasedUnitStillNamesItself) {
  TwoUnits model(/*bf16=*/true);
  GatheredUnit unit = model.engine->gather(model.fc1);
  unit.release();
  const std::string message = error_of([&] { unit.tensor("nope"); });
  EXPECT_NE(message.find("unit 'fc1' has no tensor 'nope'"), std::string::npos) << message;
  EXPECT_EQ(message.find("#"), std::string::npos) << message;
}

// The initial values: none of them a bf16 or fp16 value, so a view of the fp32 master instead of
// the 16-bit parameters, or a wrong rounding, shows.
void fill_values(const TensorSlot& slot, std::span<float> values) {
  const float base = slot.name == "b" ? -3.3f : 0.7f;
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = base + 0.01234567f * static_cast<float>(i + 1);
}

template <typename T>
std::uint16_t bits_of(T value) {
  return value.bits;
}

// A 16-bit engine's gathered unit viewed in its dtype equals its fp32 master rounded to nearest
// even, tensor by tensor (each at its own offset); its gradients written through the typed view
// are where data_as() finds them. Stages 0 and 3, bf16 and fp16.
template <typename T>
void expect_views_of_the_rounded_master(int stage, T (*round)(float)) {
  auto communicator = make_local_communicator();
  EngineOptions options;
  options.stage = stage;
  options.param_persistence_threshold = 0;
  (dtype_of<T>() == DType::kBFloat16 ? options.bf16.enabled : options.fp16.enabled) = true;
  std::unique_ptr<Engine> engine = make_engine(options, *communicator);
  engine->register_unit("fc0", {{"w", {2, 2}}}, fill_values);
  const UnitId fc1 = engine->register_unit("fc1", {{"w", {4, 3}}, {"b", {5}}}, fill_values);
  ASSERT_EQ(engine->param_dtype(), dtype_of<T>());
  const Buffer master = engine->gather_master(fc1);
  GatheredUnit unit = engine->gather(fc1);
  EXPECT_EQ(unit.name(), "fc1");
  for (const TensorSlot& slot : unit.layout().slots()) {
    const std::span<T> view = unit.tensor_as<T>(slot.name);
    ASSERT_EQ(view.size(), slot.num_elements) << slot.name;
    for (std::size_t i = 0; i < view.size(); ++i) {
      const float value = master.data_as<float>()[slot.offset_elements + i];
      ASSERT_EQ(bits_of(view[i]), bits_of(round(value)))
          << slot.name << "[" << i << "]: master " << value;
      ASSERT_NE(to_float(view[i]), value) << slot.name << "[" << i << "] is not rounded";
    }
  }
  unit.release();
  GradientBuffer grads = engine->grads(fc1);
  if (grads.dtype == dtype_of<T>()) {
    const TensorSlot& b = grads.layout->slots()[1];
    grads.tensor_as<T>("b")[2] = round(0.5f);
    EXPECT_EQ(bits_of(grads.data_as<T>()[b.offset_elements + 2]), bits_of(round(0.5f)));
  } else {
    const TensorSlot& b = grads.layout->slots()[1];
    grads.tensor_as<float>("b")[2] = 0.5f;
    EXPECT_EQ(grads.data_as<float>()[b.offset_elements + 2], 0.5f);
  }
}

TEST(EngineUnitViews, ABf16UnitViewedAsBf16IsItsMasterRounded) {
  for (const int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    expect_views_of_the_rounded_master<BFloat16>(stage, &to_bf16);
  }
}

TEST(EngineUnitViews, AnFp16UnitViewedAsFp16IsItsMasterRounded) {
  for (const int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    expect_views_of_the_rounded_master<Float16>(stage, &to_fp16);
  }
}

}  // namespace
}  // namespace zero
