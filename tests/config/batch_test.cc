// DeepSpeed's batch rule: every combination of the batch triple, at several world sizes.
#include "config_test_util.h"

namespace zero::config::testing {
namespace {

struct BatchCase {
  const char* json;
  std::int64_t world_size;
  std::int64_t train, micro, accumulation;  // expected; 0 when an error is expected
  const char* error;                        // expected substring of the error, or nullptr
};

class BatchRule : public ::testing::TestWithParam<BatchCase> {};

TEST_P(BatchRule, DerivesOrRejectsAsDeepSpeed) {
  const BatchCase& c = GetParam();
  TrainerValues trainer;
  trainer.world_size = c.world_size;
  if (c.error != nullptr) {
    EXPECT_CONTAINS(error_of(c.json, trainer), c.error);
    return;
  }
  const DeepSpeedConfig config = resolve(c.json, trainer).config;
  EXPECT_EQ(config.train_batch_size, c.train);
  EXPECT_EQ(config.train_micro_batch_size_per_gpu, c.micro);
  EXPECT_EQ(config.gradient_accumulation_steps, c.accumulation);
  EXPECT_EQ(config.world_size, c.world_size);
}

INSTANTIATE_TEST_SUITE_P(
    Triple, BatchRule,
    ::testing::Values(
        // all three given: only checked
        BatchCase{R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 8,
                      "gradient_accumulation_steps": 3})",
                  2, 48, 8, 3, nullptr},
        BatchCase{R"({"train_batch_size": 50, "train_micro_batch_size_per_gpu": 8,
                      "gradient_accumulation_steps": 3})",
                  2, 0, 0, 0,
                  "50 is not train_micro_batch_size_per_gpu 8 × gradient_accumulation_steps 3 × "
                  "world_size 2 = 48"},
        // train + micro: accumulation = train // micro // world
        BatchCase{R"({"train_batch_size": 512, "train_micro_batch_size_per_gpu": 32})", 1, 512, 32,
                  16, nullptr},
        BatchCase{R"({"train_batch_size": 512, "train_micro_batch_size_per_gpu": 32})", 4, 512, 32,
                  4, nullptr},
        BatchCase{R"({"train_batch_size": 512, "train_micro_batch_size_per_gpu": 32})", 3, 0, 0, 0,
                  "DeepSpeed derives gradient_accumulation_steps = train_batch_size 512 // "
                  "train_micro_batch_size_per_gpu 32 // world_size 3 = 5"},
        BatchCase{R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 16})", 1, 0, 0, 0,
                  "gradient_accumulation_steps: must be at least 1, got 0"},
        // train + accumulation: micro = train // world // accumulation
        BatchCase{R"({"train_batch_size": 16, "gradient_accumulation_steps": 2})", 2, 16, 4, 2,
                  nullptr},
        BatchCase{R"({"train_batch_size": 10, "gradient_accumulation_steps": 3})", 1, 0, 0, 0,
                  "10 is not train_micro_batch_size_per_gpu 3 × gradient_accumulation_steps 3"},
        // micro + accumulation: train = micro × accumulation × world
        BatchCase{R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 3})", 1,
                  24, 8, 3, nullptr},
        BatchCase{R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 3})", 2,
                  48, 8, 3, nullptr},
        // train only: accumulation 1, micro = train // world
        BatchCase{R"({"train_batch_size": 8})", 2, 8, 4, 1, nullptr},
        BatchCase{R"({"train_batch_size": 1})", 2, 0, 0, 0,
                  "train_micro_batch_size_per_gpu: must be at least 1, got 0"},
        BatchCase{R"({"train_batch_size": 9})", 2, 0, 0, 0, "9 is not"},
        // micro only: accumulation 1, train = micro × world
        BatchCase{R"({"train_micro_batch_size_per_gpu": 4})", 8, 32, 4, 1, nullptr},
        // accumulation only, or nothing: DeepSpeed's assertion
        BatchCase{R"({"gradient_accumulation_steps": 4})", 1, 0, 0, 0, "no batch size given"},
        BatchCase{R"({})", 1, 0, 0, 0, "no batch size given"},
        // values themselves
        BatchCase{R"({"train_batch_size": 0})", 1, 0, 0, 0,
                  "train_batch_size: expected an integer >= 1, got 0"},
        BatchCase{R"({"train_micro_batch_size_per_gpu": -2})", 1, 0, 0, 0,
                  "expected an integer >= 1, got -2"},
        BatchCase{R"({"train_batch_size": 8.0, "train_micro_batch_size_per_gpu": 4e0})", 1, 8, 4, 2,
                  nullptr},
        BatchCase{R"({"train_batch_size": 8.5})", 1, 0, 0, 0, "fractional part"},
        BatchCase{R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": null,
                      "gradient_accumulation_steps": null})",
                  2, 8, 4, 1, nullptr},
        BatchCase{R"({"train_micro_batch_size_per_gpu": 4294967296,
                      "gradient_accumulation_steps": 4294967296})",
                  4, 0, 0, 0, "overflows a 64-bit integer"}));

TEST(BatchRule, RejectsWorldSizeBelowOne) {
  TrainerValues trainer;
  trainer.world_size = 0;
  EXPECT_CONTAINS(error_of(R"({"train_batch_size": 8})", trainer), "world_size must be at least 1");
}

}  // namespace
}  // namespace zero::config::testing
