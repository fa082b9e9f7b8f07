// Streams and events, the ordering interface of every device backend: a stream runs the work
// submitted to it in submission order; an event marks a point in a stream that the host or another
// stream can wait for (cudaStream_t / cudaEvent_t on a GPU, a worker thread on the CPU, an
// in-order recorder when planning). The engine orders all its device work with these.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace zero {

// A backend's event: complete once every task submitted to its stream before it was recorded has
// run. query() never blocks; synchronize() blocks the calling host thread and rethrows the error
// of the stream's first failed task when the stream failed before reaching the event.
class EventImpl {
 public:
  virtual ~EventImpl() = default;
  virtual bool query() const = 0;
  virtual void synchronize() const = 0;
};

// Shared, copyable handle to a backend event. Default-constructed events count as complete.
class Event {
 public:
  Event() = default;
  explicit Event(std::shared_ptr<const EventImpl> impl) : impl_(std::move(impl)) {}
  bool query() const { return impl_ == nullptr || impl_->query(); }
  void synchronize() const {
    if (impl_) impl_->synchronize();
  }
  // The backend's event, for a backend that recognises its own (a CUDA stream waiting on a CUDA
  // event); nullptr for a default event.
  const EventImpl* impl() const { return impl_.get(); }

 private:
  std::shared_ptr<const EventImpl> impl_;
};

// An ordered queue of work on one backend. Errors are sticky, as on CUDA: once a task fails,
// later tasks are skipped and synchronize() (and events recorded after the failure) rethrow the
// first error. Backends' device operations (DeviceContext) are submitted to a Stream.
class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Enqueues a host function that runs in stream order (cudaLaunchHostFunc); returns at once.
  virtual void submit(std::function<void()> task) = 0;
  // An event that completes when every task submitted so far has run.
  virtual Event record() = 0;
  // Makes every task submitted after this call wait until `event` completes (cudaStreamWaitEvent).
  // Any backend's event is accepted; a foreign one is waited for from the stream's side.
  virtual void wait(const Event& event) = 0;
  // Blocks until everything submitted has run; rethrows the stream's first error, if any.
  virtual void synchronize() = 0;
  virtual const std::string& name() const = 0;
  // The stream that runs this one's work: itself, or for a decorator (the NCCL communicator's,
  // which adds its failure to synchronize()) the stream it wraps, so a backend finds its own
  // native stream (a cudaStream_t) behind any wrapper.
  virtual Stream& underlying() { return *this; }

 protected:
  Stream() = default;
};

}  // namespace zero
