// ZeRO-1, 2 and 3 trained by zero::train at worlds 2 and 4 through the thread communicator (each
// collective stream work of its device context: copies, and sums as the context's convert and
// axpy in rank order) equal, bit for bit, the same runs through a host-rendezvous oracle that
// reduces with plain loops in the same order (tests/comm/host_rendezvous_communicator.h): every
// logged loss, the final loss and the saved model. Once on the communicator's own CPU context
// with the model on the host, once with the communicator's and every rank's context asynchronous
// under stream stress (the model's kernels on the compute stream, as on a GPU).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../comm/host_rendezvous_communicator.h"
#include "train_test_util.h"
#include "zero/comm/thread_communicator.h"
#include "zero/core/cpu_context.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

struct Outcome {
  std::vector<double> losses;
  std::optional<double> train_loss;
  std::string model;  // model.safetensors' bytes
};

Outcome read_outcome(const train::TrainResult& result, const train::TrainingArguments& arguments) {
  const fs::path model = fs::path(arguments.output_dir) / "model.safetensors";
  std::ifstream in(model, std::ios::binary);
  EXPECT_TRUE(in.good()) << "no model saved at " << model;
  Outcome outcome;
  outcome.losses = logged_losses(result.log_history);
  outcome.train_loss = result.train_loss;
  outcome.model.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return outcome;
}

CpuContextOptions stressed(std::uint64_t seed) {
  return {.stress = {seed, std::chrono::microseconds(50)}, .asynchronous = true};
}

class TrainerThreadComm : public ::testing::TestWithParam<std::tuple<int, int, bool>> {
 protected:
  void SetUp() override { write_corpus(folder_.path() / "corpus.txt", 300); }

  train::TrainingArguments arguments(const std::string& out) const {
    const auto [stage, world, bf16] = GetParam();
    train::TrainingArguments a =
        tiny_arguments(folder_.path() / "corpus.txt", folder_.path() / out);
    a.deepspeed = write_ds_config(folder_.path(), stage, /*precision_auto=*/true).string();
    a.bf16 = bf16;
    a.use_cpu = true;
    a.max_steps = 10;
    a.per_device_train_batch_size = 8 / world;
    return a;
  }

  TempFolder folder_{"trainer_thread_comm"};
};

TEST_P(TrainerThreadComm, MatchesTheHostRendezvousRunBitwise) {
  const int world = std::get<1>(GetParam());
  const train::TrainingArguments oracle_arguments = arguments("oracle");
  train::TrainResult oracle_result;
  HostRendezvousGroup oracle(world);
  oracle.run([&](Communicator& comm) {
    train::TrainResult result = train::train(oracle_arguments, comm, {.print = false});
    if (comm.rank() == 0) oracle_result = std::move(result);
  });
  const Outcome expected = read_outcome(oracle_result, oracle_arguments);
  ASSERT_EQ(expected.losses.size(), 10u);

  const train::TrainingArguments host_arguments = arguments("thread_host");
  const Outcome host = read_outcome(train_on(world, host_arguments), host_arguments);

  const train::TrainingArguments async_arguments = arguments("thread_async");
  std::unique_ptr<DeviceContext> communicator_context = make_cpu_context(stressed(7));
  train::TrainResult async_result;
  run_ranks(
      world,
      [&](Communicator& comm) {
        train::RunOptions options{.print = false};
        options.make_device_context = [&comm](const Device&) {
          return make_cpu_context(stressed(100 + static_cast<std::uint64_t>(comm.rank())));
        };
        train::TrainResult result = train::train(async_arguments, comm, options);
        if (comm.rank() == 0) async_result = std::move(result);
      },
      {}, communicator_context.get());
  const Outcome async = read_outcome(async_result, async_arguments);

  for (const auto& [what, run] : {std::pair{"host mode", &host}, {"asynchronous", &async}}) {
    EXPECT_EQ(run->losses, expected.losses) << what;
    EXPECT_EQ(run->train_loss, expected.train_loss) << what;
    EXPECT_TRUE(run->model == expected.model) << what << ": the saved models differ";
  }
}

INSTANTIATE_TEST_SUITE_P(StagesWorlds, TrainerThreadComm,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(2, 4),
                                            ::testing::Bool()),
                         [](const auto& instance) {
                           return "stage" + std::to_string(std::get<0>(instance.param)) + "_world" +
                                  std::to_string(std::get<1>(instance.param)) +
                                  (std::get<2>(instance.param) ? "_bf16" : "_fp32");
                         });

}  // namespace
}  // namespace zero::testing
