// Collective checks shared by the thread-communicator and MPI tests: every op × dtype × size,
// out of place and in place, against a serial reference computed from every rank's inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zero/comm/communicator.h"
#include "zero/core/error.h"

namespace zero::testing {

inline constexpr std::size_t kCollectiveSizes[] = {1, 22, 1023, std::size_t{1} << 20};
inline constexpr DType kDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
inline constexpr ReduceOp kReduceOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// Small integers, exact in every dtype, with sums exact too: the reference is exact and any
// reduction order gives the same bits.
inline float input_value(int rank, std::size_t index) {
  return static_cast<float>(static_cast<int>((rank * 7 + index * 3) % 17) - 8);
}

// A buffer of `count` elements of `dtype` holding input_value(rank, offset + i).
inline std::vector<char> make_input(int rank, std::size_t count, DType dtype,
                                    std::size_t offset = 0) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = input_value(rank, offset + i);
  std::vector<char> buffer(count * size_of(dtype));
  convert(values.data(), DType::kFloat32, buffer.data(), dtype, count);
  return buffer;
}

inline std::vector<float> to_floats(const void* data, DType dtype, std::size_t count) {
  std::vector<float> values(count);
  convert(data, dtype, values.data(), DType::kFloat32, count);
  return values;
}

// Reference reduction of element `index` over ranks, rounded once to `dtype`. input_value depends
// on the index only through index mod 17, so the reference is a 17-entry table per call.
class ReferenceReduction {
 public:
  ReferenceReduction(int world, ReduceOp op, DType dtype) {
    for (std::size_t i = 0; i < kPeriod; ++i) {
      float accumulator = input_value(0, i);
      for (int r = 1; r < world; ++r) {
        const float x = input_value(r, i);
        accumulator = op == ReduceOp::kMax ? std::max(accumulator, x) : accumulator + x;
      }
      if (op == ReduceOp::kAvg) accumulator /= static_cast<float>(world);
      std::vector<char> narrow(size_of(dtype));
      convert(&accumulator, DType::kFloat32, narrow.data(), dtype, 1);
      convert(narrow.data(), dtype, &table_[i], DType::kFloat32, 1);
    }
  }
  float operator()(std::size_t index) const { return table_[index % kPeriod]; }

 private:
  static constexpr std::size_t kPeriod = 17;
  float table_[kPeriod];
};

// Counts mismatches (and reports the first) rather than failing per element on 1M-element buffers.
inline void expect_values(const std::vector<float>& actual, auto expected_at,
                          const std::string& what) {
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const float expected = expected_at(i);
    if (actual[i] != expected) {
      if (mismatches == 0)
        ADD_FAILURE() << what << ": element " << i << " is " << actual[i] << ", expected "
                      << expected;
      ++mismatches;
    }
  }
  EXPECT_EQ(mismatches, 0u) << what;
}

inline std::string describe(const Communicator& comm, std::string_view op, DType dtype,
                            std::size_t count, std::string_view extra = {}) {
  return std::string(op) + " " + std::string(name_of(dtype)) + " count=" + std::to_string(count) +
         " " + std::string(extra) + " rank " + std::to_string(comm.rank()) + "/" +
         std::to_string(comm.world_size());
}

inline void check_all_reduce(Communicator& comm, std::size_t count, DType dtype, ReduceOp op,
                             bool in_place) {
  const int world = comm.world_size(), rank = comm.rank();
  std::vector<char> send = make_input(rank, count, dtype);
  std::vector<char> recv(send.size());
  comm.all_reduce(send.data(), in_place ? send.data() : recv.data(), count, dtype, op);
  comm.synchronize();
  const auto result = to_floats(in_place ? send.data() : recv.data(), dtype, count);
  const ReferenceReduction reference(world, op, dtype);
  expect_values(
      result, [&](std::size_t i) { return reference(i); },
      describe(comm, "all_reduce", dtype, count,
               std::string(name_of(op)) + (in_place ? " in place" : "")));
}

inline void check_reduce_scatter(Communicator& comm, std::size_t count, DType dtype, ReduceOp op,
                                 bool in_place) {
  const int world = comm.world_size(), rank = comm.rank();
  std::vector<char> send = make_input(rank, count * world, dtype);
  std::vector<char> recv(count * size_of(dtype));
  void* output = in_place ? send.data() + rank * count * size_of(dtype) : recv.data();
  comm.reduce_scatter(send.data(), output, count, dtype, op);
  comm.synchronize();
  const auto result = to_floats(output, dtype, count);
  const ReferenceReduction reference(world, op, dtype);
  expect_values(
      result, [&](std::size_t i) { return reference(rank * count + i); },
      describe(comm, "reduce_scatter", dtype, count,
               std::string(name_of(op)) + (in_place ? " in place" : "")));
}

inline void check_all_gather(Communicator& comm, std::size_t count, DType dtype, bool in_place) {
  const int world = comm.world_size(), rank = comm.rank();
  const std::size_t element = size_of(dtype);
  std::vector<char> recv(world * count * element, 0);
  std::vector<char> send = make_input(rank, count, dtype, rank * count);
  const void* input = send.data();
  if (in_place) {
    std::memcpy(recv.data() + rank * count * element, send.data(), send.size());
    input = recv.data() + rank * count * element;
  }
  comm.all_gather(input, recv.data(), count, dtype);
  comm.synchronize();
  const auto result = to_floats(recv.data(), dtype, world * count);
  expect_values(
      result, [&](std::size_t i) { return input_value(static_cast<int>(i / count), i); },
      describe(comm, "all_gather", dtype, count, in_place ? "in place" : ""));
}

inline void check_broadcast(Communicator& comm, std::size_t count, DType dtype, int root) {
  std::vector<char> send = make_input(comm.rank(), count, dtype);
  std::vector<char> recv(send.size(), 0);
  comm.broadcast(send.data(), recv.data(), count, dtype, root);
  comm.synchronize();
  const auto result = to_floats(recv.data(), dtype, count);
  expect_values(
      result, [&](std::size_t i) { return input_value(root, i); },
      describe(comm, "broadcast", dtype, count, "root " + std::to_string(root)));
}

// Every op × dtype × size × placement. All ranks must call it together.
inline void check_every_collective(Communicator& comm,
                                   std::size_t max_count = std::size_t{1} << 20) {
  for (std::size_t count : kCollectiveSizes) {
    if (count > max_count) continue;
    for (DType dtype : kDTypes) {
      for (ReduceOp op : kReduceOps) {
        for (bool in_place : {false, true}) {
          check_all_reduce(comm, count, dtype, op, in_place);
          check_reduce_scatter(comm, count, dtype, op, in_place);
        }
      }
      check_all_gather(comm, count, dtype, false);
      check_all_gather(comm, count, dtype, true);
      check_broadcast(comm, count, dtype, comm.world_size() - 1);
    }
  }
  comm.barrier();
  comm.synchronize();
}

// Average of pseudo-random floats against a serial double-precision mean (reduction order may
// differ from the serial one, so within 1e-6, not exact).
inline void check_random_float_average(Communicator& comm) {
  constexpr std::size_t kCount = 4097;
  auto values_of = [](int rank) {
    std::vector<float> data(kCount);
    std::uint32_t state = 99u + rank;
    for (float& x : data) {
      state = state * 1664525u + 1013904223u;
      x = static_cast<float>(state >> 8) / (1 << 24) - 0.5f;
    }
    return data;
  };
  std::vector<float> data = values_of(comm.rank());
  comm.all_reduce(data.data(), data.data(), kCount, DType::kFloat32, ReduceOp::kAvg);
  comm.synchronize();
  std::vector<double> expected(kCount, 0.0);
  for (int r = 0; r < comm.world_size(); ++r) {
    const auto theirs = values_of(r);
    for (std::size_t i = 0; i < kCount; ++i)
      expected[i] += theirs[i] / static_cast<double>(comm.world_size());
  }
  for (std::size_t i = 0; i < kCount; ++i) ASSERT_NEAR(data[i], expected[i], 1e-6) << i;
}

inline void check_many_small_collectives_keep_order(Communicator& comm) {
  for (int i = 0; i < 200; ++i) {
    float x = static_cast<float>(comm.rank() + i);
    comm.all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kMax);
    comm.synchronize();
    ASSERT_EQ(x, static_cast<float>(comm.world_size() - 1 + i));
  }
}

// Same op, count and dtype; the last rank's label differs. Every rank of a fresh communicator must
// fail in the call check, before any data moves, with the groups of ranks and their labels; then
// `world` (another communicator) still works.
inline void check_labels_tell_calls_apart(
    const std::function<std::unique_ptr<Communicator>()>& make, Communicator& world) {
  std::unique_ptr<Communicator> comm = make();
  const int last = comm->world_size() - 1;
  float x = 1.0f;
  comm->all_gather(&x, nullptr, 0, DType::kFloat32, "warm-up");
  comm->all_reduce(&x, &x, 1, DType::kFloat32, ReduceOp::kSum,
                   comm->rank() == last ? "gather h.2" : "gather h.1");
  std::string message = "no error";
  try {
    comm->synchronize();
  } catch (const Error& error) {
    message = error.what();
  }
  EXPECT_NE(message.find("ranks disagree on collective #2"), std::string::npos) << message;
  EXPECT_NE(message.find("rank " + std::to_string(last) +
                         " called #2 all_reduce(count=1, fp32, sum) 'gather h.2'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("called #2 all_reduce(count=1, fp32, sum) 'gather h.1'"),
            std::string::npos)
      << message;
  EXPECT_EQ(x, 1.0f);  // the data collective never ran
  check_many_small_collectives_keep_order(world);
}

}  // namespace zero::testing
