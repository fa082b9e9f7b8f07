// resolve and rotate (zero/checkpoint/checkpoint_folders.h): `latest` or the highest complete
// checkpoint-N is resolved, an interrupted save's staging folder is neither resolved nor kept,
// rotation keeps the newest and the one `latest` names, a `latest` naming a missing folder is an
// error.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

TEST(CheckpointFolders, ResolveRotationAndLatest) {
  const fs::path root = scratch("rotate");
  for (int steps : {1, 2, 3}) train_and_save(root, 1, 2, steps);
  EXPECT_EQ(checkpoint::resolve(root), root / "checkpoint-3");
  // An interrupted save: a staging folder with a shard and no commit. Not resolved, cleaned by
  // rotation.
  fs::create_directories(root / ".tmp-checkpoint-4");
  std::ofstream(root / ".tmp-checkpoint-4" / checkpoint::shard_file_name(0, 2)) << "partial";
  EXPECT_EQ(checkpoint::resolve(root), root / "checkpoint-3");
  checkpoint::rotate(root, "checkpoint-", 2);
  EXPECT_FALSE(fs::exists(root / ".tmp-checkpoint-4"));
  EXPECT_FALSE(fs::exists(root / "checkpoint-1"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-3"));
  // keep 1 with `latest` naming an older one: both the newest and latest's stay.
  checkpoint::write_file_atomically(root / "latest", "checkpoint-2\n");
  checkpoint::rotate(root, "checkpoint-", 1);
  EXPECT_TRUE(fs::exists(root / "checkpoint-2"));
  EXPECT_TRUE(fs::exists(root / "checkpoint-3"));
  // `latest` naming a folder that is gone is an error naming it, not a silent fallback.
  checkpoint::write_file_atomically(root / "latest", "checkpoint-9\n");
  EXPECT_NE(message_of([&] { checkpoint::resolve(root); }).find("checkpoint-9"), std::string::npos);
  fs::remove_all(root);
}

}  // namespace
}  // namespace zero::testing
