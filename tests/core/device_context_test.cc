// The device layer's CPU and planning backends: operations, event ordering, buffer lifetimes,
// Optimizer::step_on's default (the CPU kernels on a CPU context's stream, nothing in a plan, a
// refusal elsewhere), and what a planning context records.
#include "zero/core/device_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../common/forwarding_context.h"
#include "device_context_checks.h"
#include "zero/core/error.h"
#include "zero/core/optimizer.h"

namespace zero::testing {
namespace {

TEST(CpuDeviceContext, OperationsMatchTheReferenceArithmetic) {
  auto context = make_cpu_context(StreamStress{});
  EXPECT_EQ(context->backend(), "cpu");
  EXPECT_TRUE(context->model_runs_on_host());
  check_device_operations(*context);
}

TEST(CpuDeviceContext, OperationsUnderStress) {
  auto context =
      make_cpu_context(StreamStress{.seed = 11, .max_delay = std::chrono::microseconds(300)});
  check_device_operations(*context);
  check_event_ordering(*context);
}

TEST(CpuDeviceContext, EventsOrderTheStreams) {
  auto context = make_cpu_context(StreamStress{});
  check_event_ordering(*context);
}

TEST(CpuDeviceContext, ReleaseAfterKeepsABufferUntilTheStreamHasRun) {
  auto context = make_cpu_context(StreamStress{});
  Stream& stream = context->compute_stream();
  std::atomic<bool> go{false};
  stream.submit([&] {
    while (!go) std::this_thread::yield();
  });
  auto buffer = std::make_shared<Buffer>(
      context->allocator(MemorySpace::kDevice).allocate(4096, MemoryCategory::kGrads));
  context->release_after(stream, std::move(buffer));
  const auto held = [&] {
    return context->ledger().entry(MemorySpace::kDevice, MemoryCategory::kGrads).current_bytes;
  };
  EXPECT_EQ(held(), 4096);  // the stream has not reached the release yet
  go = true;
  stream.synchronize();
  EXPECT_EQ(held(), 0);
}

// params -= lr · grad_scale · grads, recording the thread it ran on.
class ScaledSgd final : public Optimizer {
 public:
  std::string_view name() const override { return "scaled_sgd"; }
  int states_per_element() const override { return 0; }
  std::vector<std::string> state_names() const override { return {}; }
  double lr() const override { return 0.5; }
  double beta1() const override { return 0.0; }
  void step(std::span<ShardChunk> chunks, const OptimizerStep& step) override {
    thread = std::this_thread::get_id();
    for (ShardChunk& chunk : chunks)
      for (std::size_t i = 0; i < chunk.num_elements; ++i)
        chunk.params[i] -= static_cast<float>(step.lr * step.grad_scale) * chunk.grads[i];
  }
  std::thread::id thread;
};

// A CPU context that says it is cuda:0, so a step on it must be refused without a device.
class CudaLabelledContext final : public ForwardingContext {
 public:
  CudaLabelledContext() : ForwardingContext(make_cpu_context(StreamStress{})) {}
  std::string_view backend() const override { return "cuda"; }
  Device device() const override { return Device::cuda(0); }
};

TEST(OptimizerStepOn, RunsOnACpuStreamNotInAPlanAndRefusesOtherDevices) {
  std::vector<float> params = {1.0f, 2.0f}, grads = {4.0f, -8.0f};
  std::vector<ShardChunk> chunks(1);
  chunks[0].params = params.data();
  chunks[0].grads = grads.data();
  chunks[0].num_elements = 2;
  OptimizerStep step;
  step.lr = 0.5;
  step.grad_scale = 0.25;
  ScaledSgd optimizer;
  auto planning = make_planning_context();
  optimizer.step_on(*planning, planning->compute_stream(), chunks, step);
  EXPECT_EQ(params[0], 1.0f) << "a plan computes nothing";
  auto context = make_cpu_context(StreamStress{});
  optimizer.step_on(*context, context->compute_stream(), chunks, step);
  context->compute_stream().synchronize();
  EXPECT_EQ(params[0], 0.5f);
  EXPECT_EQ(params[1], 3.0f);
  EXPECT_NE(optimizer.thread, std::this_thread::get_id());
  CudaLabelledContext cuda;
  try {
    optimizer.step_on(cuda, cuda.compute_stream(), chunks, step);
    FAIL() << "expected zero::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'scaled_sgd' has CPU kernels only"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(params[0], 0.5f);
}

TEST(PlanningDeviceContext, RecordsWithoutMemoryAndComputesNothing) {
  auto context = make_planning_context();
  EXPECT_EQ(context->backend(), "planning");
  EXPECT_TRUE(context->planning());
  for (MemorySpace space : {MemorySpace::kDevice, MemorySpace::kHostPinned, MemorySpace::kHost}) {
    Buffer buffer = context->allocator(space).allocate(1 << 20, MemoryCategory::kParams);
    EXPECT_EQ(buffer.data(), nullptr);
    EXPECT_TRUE(buffer.allocated());
    EXPECT_EQ(context->ledger().entry(space, MemoryCategory::kParams).current_bytes, 1 << 20);
    context->fill(context->compute_stream(), buffer.data(), DType::kFloat32, 1 << 18, 1.0f);
  }
  // Host tasks run in stream order, at once.
  int order = 0;
  context->compute_stream().submit([&] { order = order * 10 + 1; });
  context->copy_stream().submit([&] { order = order * 10 + 2; });
  EXPECT_EQ(order, 12);
  EXPECT_THROW(context->allocator(MemorySpace::kNvme), Error);
}

TEST(DeviceContext, CudaContextNeedsAVisibleDevice) {
  EXPECT_THROW(make_cuda_context(cuda_device_count()), Error);
}

}  // namespace
}  // namespace zero::testing
