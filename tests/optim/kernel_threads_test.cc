// The CPU optimizer kernels across thread counts: bitwise the same results for 1..4 threads (and
// the same as the scalar references for Adam and SGD) at odd sizes; the fused 16-bit parameter
// copy bitwise equal to converting afterwards (special values included); the thread-count rule
// (ZERO_CPU_OPTIMIZER_THREADS, the CPU binding) and the workers kept on the bound CPUs.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/engine/optimizer.h"
#include "zero/optim/kernels.h"
#include "zero/optim/optimizers.h"

namespace zero::optim {
namespace {

// Sizes: tails (1, 22, 1023), one block of Lamb's sums and a bit, and sizes where 2, 3 and 4
// threads each get a chunk (>= kMinElementsPerThread each) with a ragged last chunk.
constexpr std::size_t kSizes[] = {
    1, 22, 1023, 4097, 2 * kMinElementsPerThread + 7, 4 * kMinElementsPerThread + 4099};

std::vector<float> values(std::size_t count, double phase, double scale = 1.0) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(scale * std::sin(0.731 * static_cast<double>(i) + phase));
  return out;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(values[i]);
  return out;
}

// The first index where two arrays differ (their size when none does): a short failure message.
template <typename T>
std::size_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return i;
  return a.size();
}

#define EXPECT_SAME_BITS(a, b)                                                  \
  do {                                                                          \
    const auto bits_a = bits_of(a), bits_b = bits_of(b);                        \
    EXPECT_EQ(first_difference(bits_a, bits_b), bits_a.size()) << #a " vs " #b; \
  } while (0)

struct AdamRun {
  std::vector<float> p, m, v;
};

// Three AdamW (or Adam) steps with `threads` threads; `threads` 0 runs the scalar reference.
AdamRun run_adam(std::size_t n, bool adam_w_mode, int threads) {
  AdamHyperparams hyper;
  hyper.lr = 1e-2;
  hyper.weight_decay = 0.1;
  hyper.adam_w_mode = adam_w_mode;
  hyper.grad_scale = 0.5;
  hyper.threads = threads;
  AdamRun run{values(n, 0.1), std::vector<float>(n, 0.0f), std::vector<float>(n, 0.0f)};
  for (int step = 1; step <= 3; ++step) {
    hyper.step = step;
    const std::vector<float> g = values(n, 0.3 * step, 2.0);
    if (threads == 0)
      adam_step_reference(run.p.data(), g.data(), run.m.data(), run.v.data(), n, hyper);
    else
      adam_step(run.p.data(), g.data(), run.m.data(), run.v.data(), n, hyper);
  }
  return run;
}

TEST(KernelThreads, AdamBitwiseForAnyThreadCountAndAsTheReference) {
  for (std::size_t n : kSizes) {
    for (bool adam_w_mode : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " adam_w_mode " << adam_w_mode);
      const AdamRun reference = run_adam(n, adam_w_mode, 0);
      for (int threads = 1; threads <= 4; ++threads) {
        SCOPED_TRACE(::testing::Message() << "threads " << threads);
        const AdamRun run = run_adam(n, adam_w_mode, threads);
        EXPECT_SAME_BITS(run.p, reference.p);
        EXPECT_SAME_BITS(run.m, reference.m);
        EXPECT_SAME_BITS(run.v, reference.v);
      }
    }
  }
}

TEST(KernelThreads, SgdBitwiseForAnyThreadCountAndAsTheReference) {
  for (std::size_t n : kSizes) {
    for (double momentum : {0.0, 0.9}) {
      for (bool nesterov : {false, true}) {
        if (nesterov && momentum == 0.0) continue;
        SgdHyperparams hyper;
        hyper.momentum = momentum;
        hyper.nesterov = nesterov;
        hyper.dampening = nesterov ? 0.0 : 0.1;
        hyper.weight_decay = 0.01;
        std::vector<float> rp = values(n, 0.2), rbuffer(n, 0.0f);
        for (int step = 1; step <= 2; ++step) {
          hyper.first_step = step == 1;
          const std::vector<float> g = values(n, 0.5 * step);
          sgd_step_reference(rp.data(), g.data(), rbuffer.data(), n, hyper);
        }
        for (int threads = 1; threads <= 4; ++threads) {
          SCOPED_TRACE(::testing::Message() << "n " << n << " momentum " << momentum << " nesterov "
                                            << nesterov << " threads " << threads);
          hyper.threads = threads;
          std::vector<float> p = values(n, 0.2), buffer(n, 0.0f);
          for (int step = 1; step <= 2; ++step) {
            hyper.first_step = step == 1;
            const std::vector<float> g = values(n, 0.5 * step);
            sgd_step(p.data(), g.data(), buffer.data(), n, hyper);
          }
          EXPECT_SAME_BITS(p, rp);
          EXPECT_SAME_BITS(buffer, rbuffer);
        }
      }
    }
  }
}

TEST(KernelThreads, LambBitwiseForAnyThreadCount) {
  for (std::size_t n : kSizes) {
    LambHyperparams hyper;
    hyper.weight_decay = 0.01;
    std::vector<float> p1, m1, v1;
    SumsOfSquares sums1;
    for (int threads = 1; threads <= 4; ++threads) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " threads " << threads);
      hyper.threads = threads;
      std::vector<float> p = values(n, 0.4), m(n, 0.0f), v(n, 0.0f);
      SumsOfSquares sums;
      for (int step = 1; step <= 2; ++step) {
        hyper.step = step;
        const std::vector<float> g = values(n, 0.7 * step);
        sums = lamb_moments(p.data(), g.data(), m.data(), v.data(), n, hyper);
        lamb_apply(p.data(), m.data(), v.data(), n, hyper,
                   lamb_trust_ratio(sums.params, sums.update, hyper));
      }
      if (threads == 1) {
        p1 = p, m1 = m, v1 = v, sums1 = sums;
        continue;
      }
      EXPECT_EQ(std::bit_cast<std::uint64_t>(sums.params),
                std::bit_cast<std::uint64_t>(sums1.params));
      EXPECT_EQ(std::bit_cast<std::uint64_t>(sums.update),
                std::bit_cast<std::uint64_t>(sums1.update));
      EXPECT_SAME_BITS(p, p1);
      EXPECT_SAME_BITS(m, m1);
      EXPECT_SAME_BITS(v, v1);
    }
  }
}

std::vector<std::uint16_t> converted(const std::vector<float>& values, DType dtype) {
  std::vector<std::uint16_t> out(values.size());
  convert(values.data(), DType::kFloat32, out.data(), dtype, values.size());
  return out;
}

TEST(KernelThreads, FusedHalfCopyEqualsConvertingAfterwards) {
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (std::size_t n : kSizes) {
      for (int threads = 1; threads <= 4; ++threads) {
        SCOPED_TRACE(::testing::Message()
                     << name_of(dtype) << " n " << n << " threads " << threads);
        const std::vector<float> g = values(n, 0.3, 2.0);
        // Adam: the fp32 results as the unfused kernel's, the 16-bit copy as convert()'s.
        AdamHyperparams adam;
        adam.lr = 1e-2;
        adam.weight_decay = 0.1;
        adam.threads = threads;
        std::vector<float> p = values(n, 0.1, 3e4), m(n, 0.0f), v(n, 0.0f);
        std::vector<float> up = p, um = m, uv = v;
        std::vector<std::uint16_t> half(n, 0xdeadu);
        adam_step(p.data(), g.data(), m.data(), v.data(), n, adam, half.data(), dtype);
        adam_step(up.data(), g.data(), um.data(), uv.data(), n, adam);
        EXPECT_SAME_BITS(p, up);
        EXPECT_SAME_BITS(m, um);
        EXPECT_SAME_BITS(v, uv);
        EXPECT_EQ(first_difference(half, converted(p, dtype)), n);
        // SGD with momentum and Lamb's apply pass.
        SgdHyperparams sgd;
        sgd.momentum = 0.9;
        sgd.threads = threads;
        std::vector<float> buffer(n, 0.0f);
        sgd_step(p.data(), g.data(), buffer.data(), n, sgd, half.data(), dtype);
        EXPECT_EQ(first_difference(half, converted(p, dtype)), n);
        LambHyperparams lamb;
        lamb.threads = threads;
        lamb_apply(p.data(), m.data(), v.data(), n, lamb, 0.5, half.data(), dtype);
        EXPECT_EQ(first_difference(half, converted(p, dtype)), n);
      }
    }
  }
}

TEST(KernelThreads, FusedHalfCopyRoundsSpecialValuesAsConvert) {
  // SGD with lr 0 keeps finite params exactly, so the fused copy sees these values as they are:
  // signed zeros, fp16 subnormals and the edges of its range, bf16 and fp16 ties, FLT_MAX, fp32
  // subnormals; then a sweep of bit patterns over every finite exponent.
  std::vector<float> specials = {
      0.0f,          -0.0f,         1.0f,          -1.0f,          65504.0f,      65519.99f,
      65520.0f,      -65520.0f,     65536.0f,      6.1035156e-5f,  6.0975552e-5f, 5.9604645e-8f,
      2.9802322e-8f, 2.9802326e-8f, 1e-9f,         -3.5762787e-7f, 1.00390625f,   1.01171875f,
      1.0009766f,    1.0029297f,    3.4028235e38f, -3.4028235e38f, 1e-40f,        -1e-45f};
  for (std::uint32_t i = 0; i < 4096; ++i) {
    const std::uint32_t bits = (i * 2654435761u) & 0xffffffffu;
    if ((bits & 0x7f800000u) == 0x7f800000u) continue;  // finite only here
    specials.push_back(std::bit_cast<float>(bits));
  }
  const std::size_t n = specials.size();
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    SCOPED_TRACE(name_of(dtype));
    std::vector<float> p = specials;
    const std::vector<float> g(n, 0.0f);
    std::vector<std::uint16_t> half(n, 0);
    SgdHyperparams sgd;
    sgd.lr = 0.0;
    sgd.threads = 1;
    sgd_step(p.data(), g.data(), nullptr, n, sgd, half.data(), dtype);
    EXPECT_SAME_BITS(p, specials);
    EXPECT_EQ(first_difference(half, converted(specials, dtype)), n);
    // Infinities and NaNs (both signs) reach the params through the gradients.
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> q(6, 1.0f);
    const std::vector<float> bad = {inf, -inf, nan, -nan, 1.0f, -1.0f};
    std::vector<std::uint16_t> bad_half(6, 0);
    sgd.lr = 1.0;
    sgd_step(q.data(), bad.data(), nullptr, 6, sgd, bad_half.data(), dtype);
    ASSERT_TRUE(std::isinf(q[0]) && std::isinf(q[1]) && std::isnan(q[2]) && std::isnan(q[3]));
    EXPECT_EQ(first_difference(bad_half, converted(q, dtype)), 6u);
  }
}

TEST(KernelThreads, FusedHalfCopyRefusesFp32AndNull) {
  std::vector<float> p(4, 1.0f), g(4, 1.0f), m(4, 0.0f), v(4, 0.0f);
  std::vector<float> out(4);
  try {
    adam_step(p.data(), g.data(), m.data(), v.data(), 4, AdamHyperparams{}, out.data(),
              DType::kFloat32);
    FAIL() << "fp32 accepted as the 16-bit copy";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("bf16 or fp16, not fp32"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(
      sgd_step(p.data(), g.data(), nullptr, 4, SgdHyperparams{}, nullptr, DType::kBFloat16), Error);
}

TEST(KernelThreads, OptimizerStepFillsTheChunksHalfCopy) {
  for (config::OptimizerType type :
       {config::OptimizerType::kAdamW, config::OptimizerType::kSgd, config::OptimizerType::kLamb}) {
    config::OptimizerConfig options;
    options.type = type;
    options.momentum = 0.9;
    std::unique_ptr<Optimizer> optimizer = make_optimizer(options);
    SCOPED_TRACE(std::string(optimizer->name()));
    const std::size_t n = 1000;
    const auto states = static_cast<std::size_t>(optimizer->states_per_element());
    std::vector<float> p = values(n, 0.1), g = values(n, 0.9), state(states * n, 0.0f);
    std::vector<float> up = p, ustate = state;
    std::vector<std::uint16_t> half(n, 0);
    ShardChunk fused{p.data(), g.data(), state.data(), n, {{0, 600, 0}, {600, 400, 1}}};
    fused.params_16bit = half.data();
    fused.params_16bit_dtype = DType::kFloat16;
    ShardChunk plain{up.data(), g.data(), ustate.data(), n, {{0, 600, 0}, {600, 400, 1}}};
    OptimizerStep step;
    step.lr = 1e-2;
    step.beta1 = 0.9;
    step.num_tensors = 2;
    optimizer->step(std::span<ShardChunk>(&fused, 1), step);
    optimizer->step(std::span<ShardChunk>(&plain, 1), step);
    EXPECT_SAME_BITS(p, up);
    EXPECT_SAME_BITS(state, ustate);
    EXPECT_EQ(first_difference(half, converted(p, DType::kFloat16)), n);
  }
}

// Sets or unsets an environment variable for one scope.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnvironment() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(KernelThreads, ThreadCountRule) {
  EXPECT_EQ(resolve_cpu_optimizer_threads(nullptr, 8, 2), 2);   // bound to 2 CPUs
  EXPECT_EQ(resolve_cpu_optimizer_threads(nullptr, 1, 16), 1);  // OMP_NUM_THREADS=1
  EXPECT_EQ(resolve_cpu_optimizer_threads(nullptr, 4, 0), 4);   // affinity unknown
  EXPECT_EQ(resolve_cpu_optimizer_threads("", 4, 2), 2);        // empty is unset
  EXPECT_EQ(resolve_cpu_optimizer_threads("3", 8, 2), 3);       // the variable wins
  for (const char* bad : {"0", "-2", "two", "2x", " 2"}) {
    try {
      resolve_cpu_optimizer_threads(bad, 4, 4);
      FAIL() << "accepted ZERO_CPU_OPTIMIZER_THREADS=" << bad;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find("ZERO_CPU_OPTIMIZER_THREADS=\"" + std::string(bad)),
                std::string::npos)
          << error.what();
    }
  }
  {
    ScopedEnvironment env("ZERO_CPU_OPTIMIZER_THREADS", "3");
    EXPECT_EQ(cpu_optimizer_threads(), 3);
  }
  {
    ScopedEnvironment env("ZERO_CPU_OPTIMIZER_THREADS", "lots");
    EXPECT_THROW(cpu_optimizer_threads(), Error);
    std::vector<float> p(4), g(4), m(4), v(4);
    EXPECT_THROW(adam_step(p.data(), g.data(), m.data(), v.data(), 4, AdamHyperparams{}), Error);
  }
  ScopedEnvironment env("ZERO_CPU_OPTIMIZER_THREADS", nullptr);
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  EXPECT_EQ(cpu_optimizer_threads(), std::min(omp_get_max_threads(), CPU_COUNT(&allowed)));
}

// The optimizer's workers stay on the calling thread's CPUs when the binding narrows after
// OpenMP started them (libgomp reuses one pool of workers per calling thread, so a parallel
// region after the step runs on the workers the step used).
TEST(KernelThreads, WorkersStayOnTheBoundCpus) {
  cpu_set_t original;
  ASSERT_EQ(sched_getaffinity(0, sizeof original, &original), 0);
  if (CPU_COUNT(&original) < 2) GTEST_SKIP() << "needs 2 CPUs to narrow the binding";
  const std::size_t n = 4 * kMinElementsPerThread;
  std::vector<float> p(n, 1.0f), g(n, 0.5f), m(n, 0.0f), v(n, 0.0f);
  AdamHyperparams hyper;
  hyper.threads = 2;
  adam_step(p.data(), g.data(), m.data(), v.data(), n, hyper);  // workers start on all CPUs
  int cpu = 0;
  while (!CPU_ISSET(cpu, &original)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // as bind_cores_to_rank does
  {
    ScopedEnvironment env("ZERO_CPU_OPTIMIZER_THREADS", nullptr);
    EXPECT_EQ(cpu_optimizer_threads(), 1);
  }
  adam_step(p.data(), g.data(), m.data(), v.data(), n, hyper);  // 2 threads asked for
  int outside = 0;
#pragma omp parallel num_threads(2) reduction(+ : outside)
  {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    sched_getaffinity(0, sizeof mine, &mine);
    cpu_set_t both;
    CPU_AND(&both, &mine, &one);
    if (!CPU_EQUAL(&both, &mine)) outside += 1;
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof original, &original), 0);
  EXPECT_EQ(outside, 0);
}

}  // namespace
}  // namespace zero::optim
