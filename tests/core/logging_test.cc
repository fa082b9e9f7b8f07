// The library's log records go to the sink its host sets; without one, only warnings and errors
// reach stderr (Python logging's last resort), never the launch banner or other info lines.
#include "zero/core/logging.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zero/comm/communicator.h"

namespace zero {
namespace {

TEST(Logging, ALibraryProgramWithoutASinkPrintsOnlyWarningsAndErrors) {
  ::testing::internal::CaptureStderr();
  auto communicator = make_communicator(DeviceKind::kCpu);  // logs the launch line
  log_info("an info line");
  log_warning("a warning");
  log_error("an error");
  communicator.reset();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "[rank 0/1] warning: a warning\n[rank 0/1] error: an error\n");
}

TEST(Logging, TheSinkTheHostSetsReceivesTheLaunchLineAndNothingGoesToStderr) {
  std::vector<LogRecord> records;
  std::vector<std::string> messages;
  const LogSink previous = set_log_sink([&](const LogRecord& record) {
    records.push_back(record);
    messages.emplace_back(record.message);
  });
  ::testing::internal::CaptureStderr();
  auto communicator = make_communicator(DeviceKind::kCpu);
  log_warning("disk ", 3, " is slow");
  communicator.reset();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  set_log_sink(previous);
  EXPECT_EQ(printed, "");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].level, LogLevel::kInfo);
  EXPECT_EQ(messages[0].rfind("launch: none, backend local, world size 1", 0), 0u) << messages[0];
  EXPECT_EQ(records[0].rank, 0);
  EXPECT_EQ(records[0].world_size, 1);
  EXPECT_EQ(records[1].level, LogLevel::kWarning);
  EXPECT_EQ(messages[1], "disk 3 is slow");
}

TEST(Logging, TheStderrSinkPrintsTheCommandsFormat) {
  const LogSink previous = set_log_sink(stderr_log_sink);
  set_log_rank(0, 4);
  ::testing::internal::CaptureStderr();
  log_info("launch: mpi");
  log_warning("pinned memory is pageable");
  const std::string printed = ::testing::internal::GetCapturedStderr();
  set_log_rank(0, 1);
  set_log_sink(previous);
  EXPECT_EQ(printed, "[rank 0/4] launch: mpi\n[rank 0/4] warning: pinned memory is pageable\n");
  ::testing::internal::CaptureStderr();
  log_info("after the sink is removed");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace zero
