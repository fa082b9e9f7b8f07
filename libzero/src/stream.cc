// CPU streams: one worker thread per stream, tasks in order, sticky errors; events.
#include "zero/core/stream.h"

#include "zero/core/error.h"

namespace zero {

struct Event::State {
  std::mutex mutex;
  std::condition_variable done_changed;
  bool done = true;
  std::exception_ptr error;
};

Event::Event() : state_(std::make_shared<State>()) {}

bool Event::query() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

void Event::synchronize() const {
  std::unique_lock lock(state_->mutex);
  state_->done_changed.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

Stream::Stream(std::string name) : name_(std::move(name)), worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Stream::submit(std::function<void()> task) { enqueue({std::move(task), false}); }

void Stream::enqueue(Task task) {
  {
    std::lock_guard lock(mutex_);
    ZERO_CHECK(!stopping_, "stream '", name_, "' is shutting down");
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

Event Stream::record() {
  Event event;
  event.state_->done = false;
  auto state = event.state_;
  enqueue({[state, this] {
             std::lock_guard lock(state->mutex);
             {
               std::lock_guard stream_lock(mutex_);
               state->error = error_;
             }
             state->done = true;
             state->done_changed.notify_all();
           },
           /*runs_after_failure=*/true});
  return event;
}

void Stream::wait(const Event& event) {
  auto state = event.state_;
  submit([state] {
    std::unique_lock lock(state->mutex);
    state->done_changed.wait(lock, [&] { return state->done; });
    if (state->error) std::rethrow_exception(state->error);
  });
}

void Stream::synchronize() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  if (error_) std::rethrow_exception(error_);
}

void Stream::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) {
      if (stopping_) return;
      continue;
    }
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    const bool skip = error_ != nullptr && !task.runs_after_failure;
    lock.unlock();
    std::exception_ptr error;
    if (!skip) {
      try {
        task.body();
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error && !error_) error_ = error;
    busy_ = false;
    if (tasks_.empty()) idle_.notify_all();
  }
}

}  // namespace zero
