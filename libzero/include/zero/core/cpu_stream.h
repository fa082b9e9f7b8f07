// The CPU backend's stream: one worker thread that runs its tasks in submission order. It is the
// oracle of the stream interface, and with stress on it delays each task at random (seeded) so an
// ordering bug (a missing event wait) shows up as a wrong result instead of hiding behind timing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "zero/core/stream.h"

namespace zero {

// Stress mode: before each task the worker sleeps, with probability 1/2, a uniform random time up
// to max_delay. seed 0 is off. ZERO_STREAM_STRESS=<seed> (and ZERO_STREAM_STRESS_MAX_US, default
// 200) in the environment turn it on for every CPU stream of the process.
struct StreamStress {
  std::uint64_t seed = 0;
  std::chrono::microseconds max_delay{200};
  bool enabled() const { return seed != 0; }
  static StreamStress from_environment();
};

class CpuStream final : public Stream {
 public:
  explicit CpuStream(std::string name = "stream",
                     StreamStress stress = StreamStress::from_environment());
  ~CpuStream() override;  // drains the queue, joins the worker; never throws

  void submit(std::function<void()> task) override;
  Event record() override;
  void wait(const Event& event) override;
  void synchronize() override;
  const std::string& name() const override { return name_; }

 private:
  struct Task {
    std::function<void()> body;
    bool runs_after_failure = false;  // event markers complete even on a failed stream
  };
  void enqueue(Task task);
  void run();

  std::string name_;
  StreamStress stress_;
  std::mt19937_64 random_;  // worker thread only
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace zero
