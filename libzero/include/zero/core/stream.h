// CPU streams and events: a stream is a worker thread that runs its tasks in submission order;
// an event marks a point in a stream that the host or another stream can wait for. The engine
// orders work with these exactly as it orders CUDA streams and events on a GPU.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace zero {

class Stream;

// Shared, copyable marker. Default-constructed events count as already complete.
class Event {
 public:
  Event();
  // True once every task submitted to the recorded stream before record() has run.
  bool query() const;
  // Blocks the calling host thread until complete. Rethrows the error of the stream's first
  // failed task when the stream failed before reaching the event.
  void synchronize() const;

 private:
  friend class Stream;
  struct State;
  std::shared_ptr<State> state_;
};

// Owning, move-only worker. Errors are sticky, as on CUDA: once a task throws, later tasks are
// skipped and synchronize() (and events recorded after the failure) rethrow the first error.
class Stream {
 public:
  explicit Stream(std::string name = "stream");
  ~Stream();  // drains the queue, joins the worker; never throws
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Enqueues `task`; returns at once.
  void submit(std::function<void()> task);
  // An event that completes when every task submitted so far has run.
  Event record();
  // Makes every task submitted after this call wait until `event` completes (cudaStreamWaitEvent).
  void wait(const Event& event);
  // Blocks until the queue is empty; rethrows the stream's first error, if any.
  void synchronize();
  const std::string& name() const { return name_; }

 private:
  struct Task {
    std::function<void()> body;
    bool runs_after_failure = false;  // event markers complete even on a failed stream
  };
  void enqueue(Task task);
  void run();

  std::string name_;
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
