// CheckpointSave (zero/checkpoint/checkpoint_save.h) over thread ranks: the commit renames the
// staging folder and then names the new folder in `latest`; saving a tag again replaces it whole.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

TEST(CheckpointSave, CommitRenamesTheStagingFolderAndThenWritesLatest) {
  const fs::path root = scratch("commit");
  for (int steps : {1, 2, 3}) train_and_save(root, 1, 2, steps);
  {
    std::ifstream latest(root / "latest");
    std::string tag;
    latest >> tag;
    EXPECT_EQ(tag, "checkpoint-3");
  }
  EXPECT_FALSE(fs::exists(root / ".tmp-checkpoint-3"));
  EXPECT_NO_THROW(
      checkpoint::validate(root / "checkpoint-3", checkpoint::read_index(root / "checkpoint-3")));
  fs::remove_all(root);
}

TEST(CheckpointSave, SavingTheSameTagAgainReplacesItWhole) {
  const fs::path root = scratch("same_tag");
  train_and_save(root, 1, 2, 3);
  EXPECT_EQ(checkpoint::read_index(root / "checkpoint-3").world_size, 2);
  train_and_save(root, 3, 4, 3);
  EXPECT_EQ(checkpoint::read_index(root / "checkpoint-3").world_size, 4);
  EXPECT_NO_THROW(
      checkpoint::validate(root / "checkpoint-3", checkpoint::read_index(root / "checkpoint-3")));
  EXPECT_FALSE(fs::exists(root / ".tmp-old-checkpoint-3"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
