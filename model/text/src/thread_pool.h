// Threads that live as long as the process, for work split over a few threads (encode_batch).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zero::text::detail {

// run(n, work) calls work(0..n-1), index 0 on the calling thread and the others on workers, and
// returns when every call has. Workers are started on first need and kept (never joined: the pool
// is never destroyed, since a worker may outlive main's statics). Concurrent runs take turns.
class ThreadPool {
 public:
  // This process's pool. A child of fork() (a DataLoader worker, multiprocessing) has none of its
  // parent's workers, fork copying only the calling thread, and may hold the parent's mutexes
  // copied locked: it gets a pool of its own, the parent's copy left as it is (never destroyed:
  // its std::thread objects would terminate the process).
  static ThreadPool& instance() {
    static std::atomic<ThreadPool*> current{nullptr};
    ThreadPool* pool = current.load(std::memory_order_acquire);
    while (pool == nullptr || pool->pid_ != ::getpid()) {
      auto* fresh = new ThreadPool;
      if (current.compare_exchange_strong(pool, fresh, std::memory_order_acq_rel)) return *fresh;
      delete fresh;  // another thread installed one first: `pool` is that one now
    }
    return *pool;
  }

  // `work` must not throw (catch inside it).
  void run(int num_threads, const std::function<void(int)>& work) {
    std::unique_lock run_lock(run_mutex_);
    {
      std::lock_guard lock(mutex_);
      while (static_cast<int>(workers_.size()) < num_threads - 1) {
        const int index = static_cast<int>(workers_.size()) + 1;
        workers_.emplace_back([this, index] { loop(index); });
      }
      work_ = &work;
      active_ = num_threads;
      pending_ = num_threads - 1;
      ++generation_;
    }
    wake_.notify_all();
    work(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    work_ = nullptr;
  }

 private:
  void loop(int index) {
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* work = nullptr;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= active_) continue;
        work = work_;
      }
      (*work)(index);
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  const pid_t pid_ = ::getpid();
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* work_ = nullptr;
  int active_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace zero::text::detail
