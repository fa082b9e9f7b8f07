// Checkpoints of states in device memory the host cannot address (a GPU's), checked on the CPU:
// a context whose device allocations are mprotect'ed pages while guarded (any host read or write
// of them is a SIGSEGV), reachable only through the context's own operations (copy, convert, ...),
// which lift the guard around their work on the stream. Saving, gather_master and resuming under
// the guard must stage every value through pinned host pieces, and give the bytes, masters and
// continued run of the same engine on the plain CPU context.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "../common/forwarding_context.h"
#include "../engine/offload_modes.h"
#include "checkpoint_test_util.h"
#include "zero/core/cpu_context.h"
#include "zero/engine/state_policy.h"
#include "zero/factory/engine_factory.h"

namespace zero::testing {
namespace {

// Device memory in whole pages of its own, PROT_NONE while guarded and no operation is running.
class GuardedDeviceAllocator final : public Allocator {
 public:
  explicit GuardedDeviceAllocator(MemoryLedger& ledger)
      : Allocator(MemorySpace::kDevice, ledger, /*caching=*/false) {}
  ~GuardedDeviceAllocator() override { release_cached(); }

  void set_guard(bool on) {
    std::lock_guard lock(mutex_);
    guarded_ = on;
    protect_all();
  }
  // An operation of the context runs (on a stream): the device may touch its memory.
  void open() {
    std::lock_guard lock(mutex_);
    if (open_++ == 0) protect_all();
  }
  void close() {
    std::lock_guard lock(mutex_);
    if (--open_ == 0) protect_all();
  }

 protected:
  void* raw_allocate(std::size_t size_bytes) override {
    const std::size_t bytes = mapped_size(size_bytes);
    void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return nullptr;
    std::lock_guard lock(mutex_);
    blocks_[data] = bytes;
    if (guarded_ && open_ == 0) ::mprotect(data, bytes, PROT_NONE);
    return data;
  }
  void raw_free(void* data) noexcept override {
    std::lock_guard lock(mutex_);
    const auto found = blocks_.find(data);
    if (found == blocks_.end()) return;
    ::munmap(data, found->second);
    blocks_.erase(found);
  }

 private:
  static std::size_t mapped_size(std::size_t size_bytes) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<std::size_t>(size_bytes, 1) + page - 1) / page * page;
  }
  void protect_all() {  // mutex_ held
    const int protection = guarded_ && open_ == 0 ? PROT_NONE : PROT_READ | PROT_WRITE;
    for (const auto& [data, bytes] : blocks_) ::mprotect(data, bytes, protection);
  }
  std::mutex mutex_;
  std::map<void*, std::size_t> blocks_;
  bool guarded_ = false;
  int open_ = 0;
};

// The CPU backend (host mode) whose device space is a GuardedDeviceAllocator the host does not
// address (host_addressable(kDevice) is false, as on CUDA). Each operation lifts the guard on its
// stream for the time it runs.
class GuardedDeviceContext final : public ForwardingContext {
 public:
  GuardedDeviceContext()
      : ForwardingContext(make_cpu_context(CpuContextOptions{})), device_(inner().ledger()) {}
  ~GuardedDeviceContext() override {
    try {
      compute_stream().synchronize();
      copy_stream().synchronize();
    } catch (...) {
    }
  }
  void guard(bool on) { device_.set_guard(on); }

  bool host_addressable(MemorySpace space) const override {
    return space != MemorySpace::kDevice && ForwardingContext::host_addressable(space);
  }
  Allocator& allocator(MemorySpace space) override {
    return space == MemorySpace::kDevice ? device_ : ForwardingContext::allocator(space);
  }
  void fill(Stream& stream, void* destination, DType dtype, std::size_t count,
            float value) override {
    lifted(stream, [&] { ForwardingContext::fill(stream, destination, dtype, count, value); });
  }
  void copy(Stream& stream, const void* source, void* destination,
            std::size_t size_bytes) override {
    lifted(stream, [&] { ForwardingContext::copy(stream, source, destination, size_bytes); });
  }
  void convert(Stream& stream, const void* source, DType source_dtype, void* destination,
               DType destination_dtype, std::size_t count) override {
    lifted(stream, [&] {
      ForwardingContext::convert(stream, source, source_dtype, destination, destination_dtype,
                                 count);
    });
  }
  void scale(Stream& stream, const void* source, DType source_dtype, void* destination,
             DType destination_dtype, std::size_t count, float alpha) override {
    lifted(stream, [&] {
      ForwardingContext::scale(stream, source, source_dtype, destination, destination_dtype, count,
                               alpha);
    });
  }
  void axpy(Stream& stream, const void* x, DType x_dtype, void* y, DType y_dtype, std::size_t count,
            float alpha) override {
    lifted(stream, [&] { ForwardingContext::axpy(stream, x, x_dtype, y, y_dtype, count, alpha); });
  }
  void sum_of_squares(Stream& stream, const void* x, DType dtype, std::size_t count,
                      SquaresResult* result) override {
    lifted(stream, [&] { ForwardingContext::sum_of_squares(stream, x, dtype, count, result); });
  }
  void optimizer_step(Stream& stream, Optimizer& optimizer, std::span<ShardChunk> chunks,
                      const OptimizerStep& step) override {
    lifted(stream, [&] { ForwardingContext::optimizer_step(stream, optimizer, chunks, step); });
  }

 private:
  template <typename Operation>
  void lifted(Stream& stream, Operation operation) {
    stream.submit([this] { device_.open(); });
    operation();
    stream.submit([this] { device_.close(); });
  }
  GuardedDeviceAllocator device_;
};

// One rank (world 1, the local communicator over the context) on the plain CPU context or the
// guarded one; members in construction order, destroyed engine first.
struct Rank {
  explicit Rank(const EngineOptions& options, bool guarded) {
    if (guarded) {
      auto context = std::make_unique<GuardedDeviceContext>();
      guarded_context = context.get();
      owned = std::move(context);
    } else {
      owned = make_cpu_context(CpuContextOptions{});
    }
    comm = make_local_communicator(CommOptions::from_environment(), owned.get());
    engine = make_engine(options, *comm, {.context = owned.get()});
    engine->set_shard_piece_elements(128);  // every unit but the head in several pieces
    model.register_units(*engine);
    engine->initialize();
  }
  void guard(bool on) const {
    if (guarded_context != nullptr) guarded_context->guard(on);
  }
  std::unique_ptr<DeviceContext> owned;
  GuardedDeviceContext* guarded_context = nullptr;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Engine> engine;
  TinyStack model;
};

struct Saved {
  std::vector<std::vector<float>> masters;  // gather_master per unit (16-bit runs)
  std::vector<std::vector<float>> params;   // after 3 more steps
};

// 3 steps, a checkpoint root/checkpoint-3 and the masters under the guard, 3 more steps.
Saved train_and_save(const EngineOptions& options, bool guarded, const fs::path& root) {
  Rank rank(options, guarded);
  Engine& engine = *rank.engine;
  train_range(engine, rank.model, *rank.comm, 0, 3);
  Saved saved;
  rank.guard(true);
  checkpoint::CheckpointSave save(*rank.comm, root, "checkpoint-3");
  save.write_engine(engine);
  save.commit();
  if (state_policy(options).master_weights) {
    for (UnitId u = 0; u < static_cast<UnitId>(engine.num_units()); ++u) {
      const Buffer master = engine.gather_master(u);  // host memory the test reads
      const float* values = master.data_as<float>();
      saved.masters.emplace_back(values, values + engine.layout(u).num_elements());
    }
  }
  rank.guard(false);
  train_range(engine, rank.model, *rank.comm, 3, 3);
  saved.params = gathered_parameters(engine);
  return saved;
}

// Loads `folder` under the guard and trains steps 3..5.
std::vector<std::vector<float>> resume(const EngineOptions& options, bool guarded,
                                       const fs::path& folder) {
  Rank rank(options, guarded);
  rank.guard(true);
  checkpoint::load(*rank.engine, folder);
  rank.guard(false);
  EXPECT_EQ(rank.engine->global_steps(), 3);
  train_range(*rank.engine, rank.model, *rank.comm, 3, 3);
  return gathered_parameters(*rank.engine);
}

std::map<std::string, std::string> files_of(const fs::path& folder) {
  std::map<std::string, std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    std::ifstream in(entry.path(), std::ios::binary);
    files[entry.path().filename().string()] = {std::istreambuf_iterator<char>(in), {}};
  }
  return files;
}

EngineOptions options_for(int stage, Mode mode) {
  EngineOptions options = parity_options(stage, 1);
  apply_offload(options, mode, 1300, 0);  // ratio 0.5: the first sub-groups on the device
  return options;
}

// Resident states (stages 0 and 3), an fp32 master on the device beside host parameters (params
// cpu: gather_master reads it), the device and host parts of a partial offload (ratio 0.5), and
// host states (optimizer cpu, read in place).
class DeviceStates : public ::testing::TestWithParam<std::tuple<int, Mode>> {};

TEST_P(DeviceStates, SaveMastersAndResumeStageThroughPinnedPiecesAsOnTheHost) {
  const auto [stage, mode] = GetParam();
  const EngineOptions options = options_for(stage, mode);
  const fs::path root = scratch("device_states_" + std::to_string(stage) + "_" +
                                std::to_string(static_cast<int>(mode)));
  const Saved host = train_and_save(options, false, root / "host");
  const Saved device = train_and_save(options, true, root / "device");
  EXPECT_EQ(device.params, host.params) << "the save changed the run";
  EXPECT_EQ(device.masters, host.masters);
  if (mode == Mode::kParamsCpu || mode == Mode::kCpuRatio) EXPECT_FALSE(device.masters.empty());
  const auto host_files = files_of(root / "host" / "checkpoint-3");
  const auto device_files = files_of(root / "device" / "checkpoint-3");
  ASSERT_FALSE(host_files.empty());
  EXPECT_EQ(device_files, host_files) << "the shard files differ";

  // The resumed run continues the uninterrupted one bit for bit, from either save.
  EXPECT_EQ(resume(options, true, root / "host" / "checkpoint-3"), host.params);
  EXPECT_EQ(resume(options, true, root / "device" / "checkpoint-3"), host.params);
  fs::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(StagesAndOffload, DeviceStates,
                         ::testing::Values(std::tuple{0, Mode::kNone}, std::tuple{3, Mode::kNone},
                                           std::tuple{3, Mode::kParamsCpu},
                                           std::tuple{3, Mode::kCpuRatio},
                                           std::tuple{2, Mode::kCpu}),
                         [](const auto& instance) {
                           std::string name = "stage" +
                                              std::to_string(std::get<0>(instance.param)) + "_" +
                                              name_of(std::get<1>(instance.param));
                           for (char& c : name)
                             if (std::isalnum(static_cast<unsigned char>(c)) == 0) c = '_';
                           return name;
                         });

// The guard is what makes the test above mean something: under it, the engine's spans are
// device memory, and reading one from the host (as memcpy or pwrite would) kills the process.
TEST(DeviceStatesGuard, AHostReadOfAShardSpanUnderTheGuardDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Rank rank(options_for(3, Mode::kNone), true);
        const std::vector<ShardState> shards = rank.engine->shard_states();
        ASSERT_EQ(shards.front().space, MemorySpace::kDevice);
        rank.guard(true);
        float copy = 0.0f;
        std::memcpy(&copy, shards.front().params.data(), sizeof(float));
        std::fprintf(stderr, "read %g\n", copy);
      },
      "");
}

TEST(DeviceStatesGuard, PiecesMustHoldAnElement) {
  Rank rank(options_for(0, Mode::kNone), false);
  EXPECT_NE(message_of([&] { rank.engine->set_shard_piece_elements(0); }).find("at least one"),
            std::string::npos);
}

}  // namespace
}  // namespace zero::testing
