// zero::train under mpirun: the same losses as a world of one (run on every rank locally), at
// stage 3 with the global batch fixed at 8 blocks.
#include <gtest/gtest.h>

#include "train_test_util.h"
#include "zero/comm/communicator.h"
#include "zero/train/trainer.h"

namespace zero::testing {
namespace {

TEST(TrainerMpi, Stage3LogsTheLossesOfOneRank) {
  std::unique_ptr<Communicator> mpi = make_mpi_communicator();
  const int world = mpi->world_size();
  ASSERT_EQ(8 % world, 0);
  // Each rank its own folders: only rank 0 writes its output_dir.
  TempFolder folder("mpi_rank" + std::to_string(mpi->rank()));
  write_corpus(folder.path() / "corpus.txt", 600);
  train::TrainingArguments arguments =
      tiny_arguments(folder.path() / "corpus.txt", folder.path() / "out");
  arguments.deepspeed = write_ds_config(folder.path(), 3).string();
  arguments.do_eval = true;
  arguments.per_device_train_batch_size = 8 / world;
  const train::TrainResult sharded = train::train(arguments, *mpi, {.print = false});

  std::unique_ptr<Communicator> local = make_local_communicator();
  train::TrainingArguments single = arguments;
  single.per_device_train_batch_size = 8;
  single.output_dir = (folder.path() / "single").string();
  const train::TrainResult reference = train::train(single, *local, {.print = false});
  const std::vector<double> a = logged_losses(sharded.log_history);
  const std::vector<double> b = logged_losses(reference.log_history);
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << "step " << i + 1;
  ASSERT_TRUE(sharded.eval_loss && reference.eval_loss);
  EXPECT_NEAR(*sharded.eval_loss, *reference.eval_loss, 1e-5);
  if (mpi->rank() == 0) {
    EXPECT_TRUE(fs::exists(folder.path() / "out" / "model.safetensors"));
  } else {
    EXPECT_FALSE(fs::exists(folder.path() / "out")) << "only rank 0 writes";
  }
}

}  // namespace
}  // namespace zero::testing
