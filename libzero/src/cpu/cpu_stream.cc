// The CPU backend's stream: one worker thread per stream, tasks in order, sticky errors; events;
// the seeded stress delays.
#include "zero/core/cpu_stream.h"

#include <cstdlib>
#include <string_view>

#include "zero/core/cpu_context.h"
#include "zero/core/error.h"

namespace zero {
namespace {

thread_local std::uint64_t host_waits = 0;  // cpu_host_waits_on_this_thread()

class CpuEvent final : public EventImpl {
 public:
  bool query() const override {
    std::lock_guard lock(mutex);
    return done;
  }
  void synchronize() const override {
    ++host_waits;
    std::unique_lock lock(mutex);
    done_changed.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
  }
  void complete(std::exception_ptr failure) {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    done = true;
    done_changed.notify_all();
  }

 private:
  mutable std::mutex mutex;
  mutable std::condition_variable done_changed;
  bool done = false;
  std::exception_ptr error;
};

std::uint64_t parse_unsigned(const char* name, const char* text) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  ZERO_CHECK(end != text && *end == '\0', name, "='", text, "' must be a non-negative integer");
  return value;
}

}  // namespace

std::uint64_t cpu_host_waits_on_this_thread() { return host_waits; }

StreamStress StreamStress::from_environment() {
  StreamStress stress;
  if (const char* seed = std::getenv("ZERO_STREAM_STRESS"); seed != nullptr && *seed != '\0')
    stress.seed = parse_unsigned("ZERO_STREAM_STRESS", seed);
  if (const char* delay = std::getenv("ZERO_STREAM_STRESS_MAX_US"); delay != nullptr && *delay)
    stress.max_delay =
        std::chrono::microseconds(parse_unsigned("ZERO_STREAM_STRESS_MAX_US", delay));
  return stress;
}

CpuStream::CpuStream(std::string name, StreamStress stress)
    : name_(std::move(name)),
      stress_(stress),
      // Each stream its own sequence: the seed mixed with the stream's name.
      random_(stress.seed ^ std::hash<std::string_view>{}(name_)),
      worker_([this] { run(); }) {}

CpuStream::~CpuStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CpuStream::submit(std::function<void()> task) { enqueue({std::move(task), false}); }

void CpuStream::enqueue(Task task) {
  {
    std::lock_guard lock(mutex_);
    ZERO_CHECK(!stopping_, "stream '", name_, "' is shutting down");
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

Event CpuStream::record() {
  auto event = std::make_shared<CpuEvent>();
  enqueue({[event, this] {
             std::exception_ptr error;
             {
               std::lock_guard stream_lock(mutex_);
               error = error_;
             }
             event->complete(error);
           },
           /*runs_after_failure=*/true});
  return Event(event);
}

void CpuStream::wait(const Event& event) {
  if (event.impl() == nullptr) return;  // a default event is complete
  submit([event] { event.synchronize(); });
}

void CpuStream::synchronize() {
  ++host_waits;
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  if (error_) std::rethrow_exception(error_);
}

void CpuStream::run() {
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
    if (stress_.enabled() && stress_.max_delay.count() > 0 && (random_() & 1u) != 0) {
      const auto delay = static_cast<std::int64_t>(
          random_() % static_cast<std::uint64_t>(stress_.max_delay.count() + 1));
      std::this_thread::sleep_for(std::chrono::microseconds(delay));
    }
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
