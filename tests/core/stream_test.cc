// CPU streams and events: ordering, cross-stream waits, sticky errors.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "zero/core/cpu_stream.h"
#include "zero/core/error.h"

namespace zero {
namespace {

TEST(CpuStream, RunsTasksInSubmissionOrder) {
  CpuStream stream("test");
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) stream.submit([&order, i] { order.push_back(i); });
  stream.synchronize();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(CpuStream, EventsMarkPointsAndOrderOtherStreams) {
  CpuStream producer("producer"), consumer("consumer");
  std::atomic<int> value{0};
  producer.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 42;
  });
  Event produced = producer.record();
  EXPECT_FALSE(produced.query());
  consumer.wait(produced);
  int seen = -1;
  consumer.submit([&] { seen = value.load(); });
  consumer.synchronize();
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(produced.query());
  EXPECT_TRUE(Event().query());  // a default event is complete
}

TEST(CpuStream, ErrorsAreStickyAndReachEvents) {
  CpuStream stream("failing");
  int ran = 0;
  stream.submit([] { ZERO_THROW("boom"); });
  stream.submit([&] { ++ran; });
  Event after = stream.record();
  EXPECT_THROW(after.synchronize(), Error);
  EXPECT_THROW(stream.synchronize(), Error);
  EXPECT_EQ(ran, 0);
  // A stream waiting on a failed event fails too.
  CpuStream other("other");
  other.wait(after);
  EXPECT_THROW(other.synchronize(), Error);
}

TEST(CpuStream, DestructorDrainsQueue) {
  std::atomic<int> count{0};
  {
    CpuStream stream("drain");
    for (int i = 0; i < 10; ++i) stream.submit([&] { ++count; });
  }
  EXPECT_EQ(count.load(), 10);
}

}  // namespace
}  // namespace zero
