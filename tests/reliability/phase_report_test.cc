// The phase report (zero/core/phase_report.h): the line a process keeps in ZERO_PHASE_DIR, as
// benchmarks/chaos_soak.sh reads it, and the collective the communicator's stream runs.
#include "zero/core/phase_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include "zero/comm/communicator.h"
#include "zero/core/error.h"

namespace zero {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The words of the line, without the padding.
std::string words(const std::string& line) {
  std::istringstream in(line);
  std::string word, out;
  while (in >> word) out += (out.empty() ? "" : " ") + word;
  return out;
}

// One rank whose collectives wait in run() until released: a collective held in flight.
class HeldCommunicator final : public Communicator {
 public:
  HeldCommunicator() : Communicator(CommOptions{}) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string_view backend() const override { return "held"; }
  void wait_until_running() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return running_; });
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 protected:
  void run(const CollectiveInfo&, const void*, void*) override {
    std::unique_lock lock(mutex_);
    running_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return released_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool running_ = false, released_ = false;
};

TEST(PhaseReport, TheLineFollowsThePhaseAndTheCollectiveInFlight) {
  const fs::path folder =
      fs::temp_directory_path() / ("phase_report_" + std::to_string(::getpid()));
  fs::remove_all(folder);
  // A folder that does not exist: an error naming it, and nothing opened.
  ::setenv("ZERO_PHASE_DIR", folder.c_str(), 1);
  try {
    start_phase_report(3);
    FAIL() << "no error for a missing ZERO_PHASE_DIR";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("ZERO_PHASE_DIR='" + folder.string() + "'"),
              std::string::npos)
        << error.what();
  }
  report_phase("train");  // no report open: nothing happens

  fs::create_directories(folder);
  start_phase_report(3);
  const fs::path file = folder / ("rank3-" + std::to_string(::getpid()));
  ASSERT_TRUE(fs::exists(file));
  std::string line = read_line(file);
  ASSERT_EQ(line.size(), static_cast<std::size_t>(kPhaseLineBytes));
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(words(line), "rank 3 phase start collective -");

  report_phase("final save");
  EXPECT_EQ(words(read_line(file)), "rank 3 phase final_save collective -");
  report_phase("train");

  HeldCommunicator communicator;
  communicator.barrier("held");
  communicator.wait_until_running();
  EXPECT_EQ(words(read_line(file)), "rank 3 phase train collective barrier#1");
  communicator.release();
  communicator.synchronize();
  EXPECT_EQ(words(read_line(file)), "rank 3 phase train collective -");
  {
    const CollectiveReport outer("all_reduce", 7);
    const CollectiveReport inner("all_gather", 8);  // a second communicator's, at once
    EXPECT_EQ(words(read_line(file)), "rank 3 phase train collective all_gather#8");
  }
  EXPECT_EQ(words(read_line(file)), "rank 3 phase train collective -");
  start_phase_report(5);  // once per process: the report stays rank 3's
  EXPECT_EQ(words(read_line(file)), "rank 3 phase train collective -");
  fs::remove_all(folder);
}

}  // namespace
}  // namespace zero
