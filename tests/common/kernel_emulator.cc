// The fiber scheduler behind kernel_emulator.h: one block at a time, each thread a ucontext fiber
// with its own stack, phases separated by warp shuffles, warp barriers and block barriers.
#include "kernel_emulator.h"

#include <ucontext.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zero/core/error.h"

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
        shared_(std::max<std::size_t>(shared_bytes, 1) + 64) {
    for (Fiber& fiber : fibers_) fiber.stack = std::make_unique_for_overwrite<char[]>(kStackBytes);
  }

  void run_block(KernelDim block_index) {
    block_index_ = block_index;
    std::memset(shared_.data(), 0xFF, shared_.size());
    const KernelDim dim = config_.block;
    for (unsigned linear = 0; linear < count_; ++linear) {
      Fiber& fiber = fibers_[linear];
      fiber.state = State::kReady;
      fiber.thread.run_ = this;
      fiber.thread.linear_ = linear;
      fiber.thread.block_index_ = block_index;
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
    while (true) {
      for (unsigned k = 0; k < count_; ++k) {
        const unsigned linear = order_ == Order::kForward ? k : count_ - 1 - k;
        if (fibers_[linear].state != State::kReady) continue;
        swapcontext(&scheduler_, &fibers_[linear].context);
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
    swapcontext(&fiber.context, &scheduler_);
    return fiber.result;
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
  };

  static void entry(unsigned high, unsigned low, unsigned linear) {
    auto* run = reinterpret_cast<BlockRun*>((static_cast<std::uintptr_t>(high) << 32) | low);
    Fiber& fiber = run->fibers_[linear];
    try {
      run->body_(fiber.thread, run->shared_data());
    } catch (...) {  // rethrown by the scheduler, off the fiber's stack
      run->error_ = std::current_exception();
    }
    fiber.state = State::kDone;
  }

  void* shared_data() {
    // Aligned for any Shared type.
    auto address = reinterpret_cast<std::uintptr_t>(shared_.data());
    return shared_.data() + ((64 - address % 64) % 64);
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
    for (Fiber& fiber : fibers_) fiber.state = State::kReady;
    return true;
  }

  const LaunchConfig& config_;
  const Order order_;
  const std::function<void(EmulatedThread&, void*)>& body_;
  const unsigned count_;
  std::vector<Fiber> fibers_;
  std::vector<char> shared_;
  ucontext_t scheduler_{};
  KernelDim block_index_;
  std::exception_ptr error_;
};

std::uint64_t EmulatedThread::exchange(std::uint64_t bits, int lane_mask, std::size_t bytes) const {
  return run_->wait(linear_, State::kShuffle, bits, lane_mask, bytes);
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
