// write_file_atomically and fsync_path (zero/checkpoint/durable_write.h): a file is replaced
// whole with no temporary left behind; failures name the path.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "checkpoint_test_util.h"

namespace zero::testing {
namespace {

std::string read_text(const fs::path& path) {
  std::ifstream stream(path);
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

TEST(DurableWrite, ReplacesTheFileWholeAndLeavesNoTemporary) {
  const fs::path folder = scratch("durable");
  checkpoint::write_file_atomically(folder / "latest", "checkpoint-10\n");
  EXPECT_EQ(read_text(folder / "latest"), "checkpoint-10\n");
  checkpoint::write_file_atomically(folder / "latest", "checkpoint-2\n");
  EXPECT_EQ(read_text(folder / "latest"), "checkpoint-2\n");
  EXPECT_FALSE(fs::exists(folder / "latest.tmp"));
  EXPECT_NO_THROW(checkpoint::fsync_path(folder / "latest"));
  EXPECT_NO_THROW(checkpoint::fsync_path(folder));
  fs::remove_all(folder);
}

TEST(DurableWrite, FailuresNameThePath) {
  const fs::path folder = scratch("durable_failures");
  const fs::path missing = folder / "missing";
  std::string message = message_of([&] { checkpoint::fsync_path(missing); });
  EXPECT_NE(message.find("cannot open " + missing.string() + " to fsync it"), std::string::npos)
      << message;
  message = message_of([&] { checkpoint::write_file_atomically(missing / "latest", "x\n"); });
  EXPECT_NE(message.find("cannot create " + (missing / "latest.tmp").string()), std::string::npos)
      << message;
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero::testing
