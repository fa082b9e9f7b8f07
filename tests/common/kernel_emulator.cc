// The fiber scheduler behind kernel_emulator.h: one block at a time, each thread a ucontext fiber
// with its own stack, phases separated by warp shuffles, warp barriers and block barriers; and the
// record of shared-memory accesses that finds races.
#include "kernel_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "zero/core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace zero::kernels::emulation {
namespace {

constexpr std::size_t kStackBytes = 64 * 1024;

enum class State { kReady, kShuffle, kWarpSync, kBarrier, kDone };

const char* state_name(State state) {
  switch (state) {
    case State::kReady: return "running";
    case State::kShuffle: return "shfl_xor";
    case State::kWarpSync: return "__syncwarp";
    case State::kBarrier: return "__syncthreads";
    case State::kDone: return "exited";
  }
  return "?";
}

std::string describe(KernelDim dim) {
  return "(" + std::to_string(dim.x) + ", " + std::to_string(dim.y) + ", " + std::to_string(dim.z) +
         ")";
}

std::string describe_thread(unsigned linear) {
  return "thread " + std::to_string(linear) + " (warp " + std::to_string(linear / kWarpSize) +
         ", lane " + std::to_string(linear % kWarpSize) + ")";
}

// Shared memory of exactly `bytes` (at least 1), aligned for any Shared type: nothing past its end
// is addressable, so AddressSanitizer reports an index one past it.
struct SharedFree {
  void operator()(char* data) const { ::operator delete (data, std::align_val_t{64}); }
};
std::unique_ptr<char[], SharedFree> allocate_shared(std::size_t bytes) {
  return std::unique_ptr<char[], SharedFree>(
      static_cast<char*>(::operator new (std::max<std::size_t>(bytes, 1), std::align_val_t{64})));
}

// AddressSanitizer's fiber annotations around each swapcontext (no-ops in other builds): ASan is
// told which stack the switch enters, so an exception thrown on a fiber and the fake stacks of
// detect_stack_use_after_return stay correct. `fake_stack` null on a fiber's last switch.
void start_switch(void** fake_stack, const void* bottom, std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
#endif
}
void finish_switch(void* fake_stack, const void** bottom, std::size_t* size) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
#endif
}

constexpr std::size_t kWordBytes = 4;

// What the threads of the running block did to one word of shared memory, by phase: block phases
// are counted over the whole grid (a new block and each __syncthreads start one), warp phases per
// warp (each __syncwarp starts one). An access is ordered after an earlier one when a block phase
// lies between them, or when both are lanes of one warp and a warp phase lies between them.
struct WordRecord {
  std::uint32_t write_phase = 0;  // block phase of the last write (0: none yet)
  std::uint32_t write_warp_phase = 0;
  std::uint32_t writer = 0;
  // The reads since that write, in read_phase (0: none): lanes `read_lanes` of warp `read_warp` in
  // its warp phase `read_warp_phase` (earlier phases of that warp are ordered before its next
  // access), or lanes of several warps (other_warps).
  std::uint32_t read_phase = 0;
  std::uint32_t read_warp = 0;
  std::uint32_t read_warp_phase = 0;
  std::uint32_t read_lanes = 0;
  bool other_warps = false;
  std::uint32_t reader = 0, other_reader = 0;  // a reader of read_warp and one of another warp
};

}  // namespace

class BlockRun {
 public:
  BlockRun(const LaunchConfig& config, Order order, std::size_t shared_bytes,
           const std::function<void(EmulatedThread&, void*)>& body)
      : config_(config),
        order_(order),
        body_(body),
        count_(static_cast<unsigned>(config.block.count())),
        fibers_(count_),
        shared_bytes_(shared_bytes),
        shared_(allocate_shared(shared_bytes)),
        words_((shared_bytes + kWordBytes - 1) / kWordBytes),
        warp_phases_((count_ + kWarpSize - 1) / kWarpSize) {
    for (Fiber& fiber : fibers_) fiber.stack = std::make_unique_for_overwrite<char[]>(kStackBytes);
  }

  void run_block(KernelDim block_index) {
    block_index_ = block_index;
    ++phase_;  // the previous block's accesses are no race
    std::memset(shared_.get(), 0xFF, shared_bytes_);
    for (unsigned linear = 0; linear < count_; ++linear) prepare_fiber(linear);
    while (true) {
      for (unsigned k = 0; k < count_; ++k) {
        const unsigned linear = order_ == Order::kForward ? k : count_ - 1 - k;
        if (fibers_[linear].state != State::kReady) continue;
        void* fake_stack = nullptr;
        start_switch(&fake_stack, fibers_[linear].stack.get(), kStackBytes);
        swapcontext(&scheduler_, &fibers_[linear].context);
        finish_switch(fake_stack, nullptr, nullptr);
        if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
      }
      if (!release_waiting()) return;
    }
  }

  // Called on a fiber: wait at `state` until the scheduler releases the warp or the block.
  std::uint64_t wait(unsigned linear, State state, std::uint64_t bits, int lane_mask,
                     std::size_t bytes) {
    Fiber& fiber = fibers_[linear];
    fiber.state = state;
    fiber.bits = bits;
    fiber.lane_mask = lane_mask;
    fiber.bytes = bytes;
    start_switch(&fiber.fake_stack, scheduler_stack_, scheduler_stack_bytes_);
    swapcontext(&fiber.context, &scheduler_);
    finish_switch(fiber.fake_stack, nullptr, nullptr);
    return fiber.result;
  }

  void check_shared(const void* address) const {
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    const auto base = reinterpret_cast<std::uintptr_t>(shared_.get());
    if (at < base || at > base + shared_bytes_)
      ZERO_THROW("kernel emulation: block ", describe(block_index_),
                 ": a shared-memory view of an address outside the block's ", shared_bytes_,
                 " bytes of shared memory");
  }

  // Thread `linear`'s access of `bytes` at `address`: a race with an earlier access it is not
  // ordered after (WordRecord) is an error naming both threads, as racecheck's hazards.
  void record(unsigned linear, const void* address, std::size_t bytes, bool write) {
    const std::size_t offset =
        reinterpret_cast<std::uintptr_t>(address) - reinterpret_cast<std::uintptr_t>(shared_.get());
    if (offset >= shared_bytes_ || bytes > shared_bytes_ - offset)
      ZERO_THROW("kernel emulation: block ", describe(block_index_), ": ", describe_thread(linear),
                 " accesses ", bytes, " bytes of shared memory at byte ",
                 static_cast<std::ptrdiff_t>(offset), ", past the block's ", shared_bytes_);
    ZERO_CHECK(offset % kWordBytes == 0, "kernel emulation: shared-memory access at byte ", offset,
               " is not aligned to its 4-byte words");
    const std::uint32_t warp = linear / kWarpSize, lane = linear % kWarpSize;
    const std::uint32_t warp_phase = warp_phases_[warp];
    for (std::size_t w = offset / kWordBytes; w < (offset + bytes + kWordBytes - 1) / kWordBytes;
         ++w) {
      WordRecord& word = words_[w];
      const bool written =
          word.write_phase == phase_ && word.writer != linear &&
          !(word.writer / kWarpSize == warp && word.write_warp_phase != warp_phase);
      if (written) race(write ? "write after write" : "read after write", w, linear, word.writer);
      if (!write) {
        add_read(word, linear, warp, lane, warp_phase);
        continue;
      }
      if (word.read_phase == phase_) {
        const std::uint32_t others = word.read_lanes & ~(1u << lane);
        if (word.other_warps || word.read_warp != warp)
          race("write after read", w, linear,
               word.reader / kWarpSize == warp ? word.other_reader : word.reader);
        if (word.read_warp_phase == warp_phase && others != 0)
          race("write after read", w, linear,
               warp * kWarpSize + static_cast<std::uint32_t>(__builtin_ctz(others)));
      }
      word.write_phase = phase_, word.write_warp_phase = warp_phase, word.writer = linear;
      word.read_phase = 0;
    }
  }

 private:
  struct Fiber {
    ucontext_t context{};
    std::unique_ptr<char[]> stack;
    EmulatedThread thread;
    State state = State::kReady;
    std::uint64_t bits = 0, result = 0;
    int lane_mask = 0;
    std::size_t bytes = 0;
    void* fake_stack = nullptr;  // ASan's, while the fiber is switched out
  };

  // Fiber `linear` of the block at block_index_, ready to start. Its own function: getcontext
  // returns twice, which would leave a caller's loop variables open to clobbering.
  void prepare_fiber(unsigned linear) {
    const KernelDim dim = config_.block;
    Fiber& fiber = fibers_[linear];
    fiber.state = State::kReady;
    fiber.thread.run_ = this;
    fiber.thread.linear_ = linear;
    fiber.thread.block_index_ = block_index_;
    fiber.thread.thread_index_ = {linear % dim.x, (linear / dim.x) % dim.y,
                                  linear / (dim.x * dim.y)};
    fiber.thread.block_dim_ = dim;
    fiber.thread.grid_dim_ = config_.grid;
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = fiber.stack.get();
    fiber.context.uc_stack.ss_size = kStackBytes;
    fiber.context.uc_link = &scheduler_;
    const auto self = reinterpret_cast<std::uintptr_t>(this);
    makecontext(&fiber.context, reinterpret_cast<void (*)()>(&BlockRun::entry), 3,
                static_cast<unsigned>(self >> 32), static_cast<unsigned>(self & 0xFFFFFFFFu),
                linear);
  }

  static void entry(unsigned high, unsigned low, unsigned linear) {
    auto* run = reinterpret_cast<BlockRun*>((static_cast<std::uintptr_t>(high) << 32) | low);
    Fiber& fiber = run->fibers_[linear];
    finish_switch(nullptr, &run->scheduler_stack_, &run->scheduler_stack_bytes_);
    try {
      run->body_(fiber.thread, run->shared_data());
    } catch (...) {  // rethrown by the scheduler, off the fiber's stack
      run->error_ = std::current_exception();
    }
    fiber.state = State::kDone;
    start_switch(nullptr, run->scheduler_stack_, run->scheduler_stack_bytes_);  // to uc_link
  }

  void* shared_data() { return shared_.get(); }

  void add_read(WordRecord& word, std::uint32_t linear, std::uint32_t warp, std::uint32_t lane,
                std::uint32_t warp_phase) const {
    if (word.read_phase != phase_) {
      word.read_phase = phase_, word.read_warp = warp, word.read_warp_phase = warp_phase;
      word.read_lanes = 1u << lane, word.other_warps = false, word.reader = linear;
    } else if (word.read_warp != warp) {
      if (!word.other_warps) word.other_reader = linear;
      word.other_warps = true;
    } else if (word.read_warp_phase != warp_phase) {
      word.read_warp_phase = warp_phase, word.read_lanes = 1u << lane, word.reader = linear;
    } else {
      word.read_lanes |= 1u << lane;
    }
  }

  [[noreturn]] void race(const char* hazard, std::size_t word, unsigned linear,
                         unsigned other) const {
    const bool one_warp = linear / kWarpSize == other / kWarpSize;
    ZERO_THROW("kernel emulation: block ", describe(block_index_), ": shared-memory race (", hazard,
               ") at byte ", word * kWordBytes, ": ", describe_thread(linear), " after ",
               describe_thread(other), " with no ",
               one_warp ? "__syncwarp or __syncthreads between (a shuffle orders no memory)"
                        : "__syncthreads between");
  }

  [[noreturn]] void diverged(unsigned warp, const std::string& what) const {
    std::string lanes;
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      const unsigned linear = warp * kWarpSize + lane;
      if (linear < count_) lanes += " " + std::string(state_name(fibers_[linear].state));
    }
    ZERO_THROW("kernel emulation: block ", describe(block_index_), " warp ", warp, ": ", what,
               "; lanes:", lanes);
  }

  // Releases every warp whose lanes all wait at the same warp primitive, else the block's barrier;
  // false when every thread has exited.
  bool release_waiting() {
    bool released = false;
    for (unsigned first = 0; first < count_; first += kWarpSize) {
      const unsigned warp = first / kWarpSize;
      bool any = false;
      for (unsigned linear = first; linear < std::min(count_, first + kWarpSize); ++linear)
        any |=
            fibers_[linear].state == State::kShuffle || fibers_[linear].state == State::kWarpSync;
      if (!any) continue;
      if (first + kWarpSize > count_) diverged(warp, "a warp primitive in a partial warp");
      const Fiber& lead = fibers_[first];
      for (unsigned lane = 0; lane < kWarpSize; ++lane) {
        const Fiber& fiber = fibers_[first + lane];
        if (fiber.state != lead.state)
          diverged(warp, "lanes wait at different primitives (a full-mask primitive needs all 32)");
        if (fiber.lane_mask != lead.lane_mask || fiber.bytes != lead.bytes)
          diverged(warp, "lanes shuffle with different masks or types");
      }
      if (lead.state == State::kShuffle && (lead.lane_mask < 0 || lead.lane_mask >= kWarpSize))
        diverged(warp, "shuffle mask " + std::to_string(lead.lane_mask) + " out of range");
      if (lead.state == State::kWarpSync) ++warp_phases_[warp];
      for (unsigned lane = 0; lane < kWarpSize; ++lane) {
        Fiber& fiber = fibers_[first + lane];
        if (fiber.state == State::kShuffle)
          fiber.result = fibers_[first + (lane ^ static_cast<unsigned>(fiber.lane_mask))].bits;
        fiber.state = State::kReady;
      }
      released = true;
    }
    if (released) return true;
    unsigned done = 0, waiting = 0;
    for (const Fiber& fiber : fibers_) {
      done += fiber.state == State::kDone;
      waiting += fiber.state == State::kBarrier;
    }
    if (done == count_) return false;
    if (done > 0)
      ZERO_THROW("kernel emulation: block ", describe(block_index_), ": ", waiting,
                 " threads wait at __syncthreads after ", done, " threads exited");
    ++phase_;
    for (Fiber& fiber : fibers_) fiber.state = State::kReady;
    return true;
  }

  const LaunchConfig& config_;
  const Order order_;
  const std::function<void(EmulatedThread&, void*)>& body_;
  const unsigned count_;
  std::vector<Fiber> fibers_;
  const std::size_t shared_bytes_;
  std::unique_ptr<char[], SharedFree> shared_;
  std::vector<WordRecord> words_;
  std::vector<std::uint32_t> warp_phases_;
  std::uint32_t phase_ = 0;
  ucontext_t scheduler_{};
  const void* scheduler_stack_ = nullptr;  // the scheduler's stack, for ASan's switches back
  std::size_t scheduler_stack_bytes_ = 0;
  KernelDim block_index_;
  std::exception_ptr error_;
};

std::uint64_t EmulatedThread::exchange(std::uint64_t bits, int lane_mask, std::size_t bytes) const {
  return run_->wait(linear_, State::kShuffle, bits, lane_mask, bytes);
}
void EmulatedThread::check_shared(const void* address) const { run_->check_shared(address); }
void EmulatedThread::record_shared(const void* address, std::size_t bytes, bool write) const {
  run_->record(linear_, address, bytes, write);
}
void EmulatedThread::sync_warp() const { run_->wait(linear_, State::kWarpSync, 0, 0, 0); }
void EmulatedThread::sync_block() const { run_->wait(linear_, State::kBarrier, 0, 0, 0); }

void run_grid(const LaunchConfig& config, Order order, std::size_t shared_bytes,
              const std::function<void(EmulatedThread&, void*)>& body, std::uint64_t max_threads) {
  const std::uint64_t threads = config.grid.count() * config.block.count();
  ZERO_CHECK(config.block.count() > 0 && config.grid.count() > 0,
             "kernel emulation: empty launch, grid ", describe(config.grid), " block ",
             describe(config.block));
  ZERO_CHECK(threads <= max_threads, "kernel emulation: ", threads,
             " threads exceed the emulation's limit of ", max_threads,
             "; test at a smaller shape (grid ", describe(config.grid), ", block ",
             describe(config.block), ")");
  BlockRun run(config, order, shared_bytes + config.dynamic_shared_bytes, body);
  const KernelDim grid = config.grid;
  const std::uint64_t blocks = grid.count();
  for (std::uint64_t k = 0; k < blocks; ++k) {
    const std::uint64_t b = order == Order::kForward ? k : blocks - 1 - k;
    run.run_block({static_cast<unsigned>(b % grid.x), static_cast<unsigned>(b / grid.x % grid.y),
                   static_cast<unsigned>(b / (std::uint64_t{grid.x} * grid.y))});
  }
}

}  // namespace zero::kernels::emulation
