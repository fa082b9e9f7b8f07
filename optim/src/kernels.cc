// Optimizer kernels: one OpenMP region over contiguous chunks, each chunk run by a function the
// compiler clones for AVX-512, AVX2 and plain x86-64 (vector main loop, scalar tail), picked at
// load time. Scalar references beside them are the test oracles. This file compiles with
// -ffp-contract=off (optim/CMakeLists.txt): no multiply-add is fused, so the vector body, the
// scalar tail and the references round alike and the results do not depend on the clone, the
// chunking or the thread count.
#include "zero/optim/kernels.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coefficients.h"
#include "zero/core/error.h"

namespace zero::optim {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
// ISA levels rather than arch= clones: a clone keeps the default arch, so the default-target
// helpers its body calls (std::sqrt, std::bit_cast, the always-inline bodies) inline into it
// and the loop vectorises (GCC does not inline across different arch= settings). Not under
// ThreadSanitizer: the clones' resolver runs while the dynamic loader relocates the program,
// before TSan's runtime is up, and its instrumentation crashed every program that links
// zero::optim (SIGSEGV in lamb_apply_chunk's resolver).
#define ZERO_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define ZERO_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define ZERO_SIMD_CLONES
#define ZERO_ALWAYS_INLINE inline
#endif

// Thread chunks start on multiples of 16 elements (64 bytes): on cache-line boundaries when the
// shard starts on one (allocator buffers are 64-byte aligned), so no two threads share a line.
constexpr std::size_t kChunkAlign = 16;

// Moves the calling thread into `allowed` when it runs outside it (an OpenMP worker started
// before bind_cores_to_rank narrowed the process, or one OMP_PROC_BIND placed elsewhere). Each
// worker checks once per distinct `allowed`; a refusal leaves it where it is (the results do not
// depend on where a thread runs, only the speed does).
void keep_within(const cpu_set_t& allowed) {
  thread_local cpu_set_t checked;
  thread_local bool has_checked = false;
  if (has_checked && CPU_EQUAL(&checked, &allowed)) return;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) == 0) {
    cpu_set_t inside;
    CPU_AND(&inside, &mine, &allowed);
    if (!CPU_EQUAL(&inside, &mine)) sched_setaffinity(0, sizeof allowed, &allowed);
  }
  checked = allowed;
  has_checked = true;
}

int threads_for(int requested) { return requested > 0 ? requested : cpu_optimizer_threads(); }

// Calls body(begin, end) on disjoint chunks covering [0, count), one per thread; every chunk
// but the last starts and ends on a multiple of `align` elements. Which thread computes an
// element never changes what is computed.
template <typename Body>
void for_chunks(std::size_t count, int max_threads, std::size_t align, Body&& body) {
  const int threads = static_cast<int>(
      std::min<std::size_t>(static_cast<std::size_t>(std::max(1, max_threads)),
                            std::max<std::size_t>(1, count / kMinElementsPerThread)));
  if (threads <= 1) {
    body(std::size_t{0}, count);
    return;
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const bool bound = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
#pragma omp parallel num_threads(threads)
  {
    const auto thread = static_cast<std::size_t>(omp_get_thread_num());
    const auto team = static_cast<std::size_t>(omp_get_num_threads());
    if (bound && thread != 0) keep_within(allowed);
    std::size_t per = (count + team - 1) / team;
    per = (per + align - 1) / align * align;
    const std::size_t begin = std::min(count, thread * per);
    const std::size_t end = std::min(count, begin + per);
    if (begin < end) body(begin, end);
  }
}

// The 16-bit copy a fused kernel writes beside the fp32 parameters.
enum class Half { kNone, kBFloat16, kFloat16 };

// zero::to_bf16 and zero::to_fp16 (zero/core/dtype.h) without branches, so they vectorise;
// bitwise the same for every input (the optimizer test checks special values and a sweep).
ZERO_ALWAYS_INLINE std::uint16_t bf16_bits(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t quiet_nan = (bits >> 16) | 0x0040u;
  return static_cast<std::uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

ZERO_ALWAYS_INLINE std::uint16_t fp16_bits(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  // Below 2^-14: add 0.5 so the FPU rounds the mantissa to the subnormal grid, nearest even.
  const std::uint32_t subnormal =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(magnitude) + 0.5f) - 0x3f000000u;
  // Normal: rebias the exponent (127 -> 15), round 13 dropped mantissa bits to nearest even.
  const std::uint32_t normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
  std::uint32_t out = magnitude < 0x38800000u ? subnormal : normal;
  out = magnitude >= 0x47800000u ? 0x7c00u : out;  // >= 65536: inf
  out = magnitude > 0x7f800000u ? 0x7e00u : out;   // NaN
  return static_cast<std::uint16_t>(sign | out);
}

template <Half H>
ZERO_ALWAYS_INLINE void store_half(std::uint16_t* __restrict half, std::size_t i, float value) {
  if constexpr (H == Half::kBFloat16) half[i] = bf16_bits(value);
  if constexpr (H == Half::kFloat16) half[i] = fp16_bits(value);
}

Half half_of(DType dtype, const char* kernel) {
  switch (dtype) {
    case DType::kBFloat16: return Half::kBFloat16;
    case DType::kFloat16: return Half::kFloat16;
    case DType::kFloat32: break;
  }
  ZERO_THROW(kernel, ": the fused 16-bit parameter copy must be bf16 or fp16, not ",
             name_of(dtype));
}

int half_index(Half half) { return static_cast<int>(half); }

// The body every Adam clone inlines; adam_step_reference does the same operations in order.
template <bool kAdamW, Half H>
ZERO_ALWAYS_INLINE void adam_body(float* __restrict params, const float* __restrict grads,
                                  float* __restrict m, float* __restrict v,
                                  std::uint16_t* __restrict half, std::size_t count,
                                  AdamCoefficients c) {
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] * c.grad_scale;
    if constexpr (!kAdamW) g = g + c.l2 * params[i];
    const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps;
    float p = params[i];
    if constexpr (kAdamW) p = p * c.decay;
    p = p - c.step_size * (mi / denom);
    params[i] = p;
    store_half<H>(half, i, p);
  }
}

using AdamChunk = void (*)(float*, const float*, float*, float*, std::uint16_t*, std::size_t,
                           AdamCoefficients);

#define ZERO_ADAM_CHUNK(name, adam_w, half_kind)                                      \
  ZERO_SIMD_CLONES void name(float* __restrict params, const float* __restrict grads, \
                             float* __restrict m, float* __restrict v,                \
                             std::uint16_t* __restrict half, std::size_t count,       \
                             AdamCoefficients c) {                                    \
    adam_body<adam_w, half_kind>(params, grads, m, v, half, count, c);                \
  }
ZERO_ADAM_CHUNK(adam_l2_chunk, false, Half::kNone)
ZERO_ADAM_CHUNK(adam_l2_bf16_chunk, false, Half::kBFloat16)
ZERO_ADAM_CHUNK(adam_l2_fp16_chunk, false, Half::kFloat16)
ZERO_ADAM_CHUNK(adamw_chunk, true, Half::kNone)
ZERO_ADAM_CHUNK(adamw_bf16_chunk, true, Half::kBFloat16)
ZERO_ADAM_CHUNK(adamw_fp16_chunk, true, Half::kFloat16)
#undef ZERO_ADAM_CHUNK

void run_adam(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
              std::size_t count, const AdamHyperparams& hyper, std::uint16_t* half, Half kind) {
  static constexpr AdamChunk kChunks[2][3] = {
      {adam_l2_chunk, adam_l2_bf16_chunk, adam_l2_fp16_chunk},
      {adamw_chunk, adamw_bf16_chunk, adamw_fp16_chunk}};
  const AdamChunk chunk = kChunks[hyper.adam_w_mode ? 1 : 0][half_index(kind)];
  const AdamCoefficients c = adam_coefficients(hyper);
  for_chunks(count, threads_for(hyper.threads), kChunkAlign,
             [&](std::size_t begin, std::size_t end) {
               chunk(params + begin, grads + begin, exp_avg + begin, exp_avg_sq + begin,
                     half == nullptr ? nullptr : half + begin, end - begin, c);
             });
}

template <Half H>
ZERO_ALWAYS_INLINE void sgd_plain_body(float* __restrict params, const float* __restrict grads,
                                       std::uint16_t* __restrict half, std::size_t count,
                                       SgdCoefficients c) {
  for (std::size_t i = 0; i < count; ++i) {
    const float p = params[i] - c.lr * (grads[i] * c.grad_scale + c.weight_decay * params[i]);
    params[i] = p;
    store_half<H>(half, i, p);
  }
}

template <Half H, bool kFirst, bool kNesterov>
ZERO_ALWAYS_INLINE void sgd_momentum_loop(float* __restrict params, const float* __restrict grads,
                                          float* __restrict buffer, std::uint16_t* __restrict half,
                                          std::size_t count, SgdCoefficients c) {
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale + c.weight_decay * params[i];
    float b = g;
    if constexpr (!kFirst) b = c.momentum * buffer[i] + c.one_minus_dampening * g;
    buffer[i] = b;
    float p = params[i];
    if constexpr (kNesterov) p = p - c.lr * (g + c.momentum * b);
    if constexpr (!kNesterov) p = p - c.lr * b;
    params[i] = p;
    store_half<H>(half, i, p);
  }
}

template <Half H>
ZERO_ALWAYS_INLINE void sgd_momentum_body(float* __restrict params, const float* __restrict grads,
                                          float* __restrict buffer, std::uint16_t* __restrict half,
                                          std::size_t count, SgdCoefficients c, bool first,
                                          bool nesterov) {
  if (first && nesterov) sgd_momentum_loop<H, true, true>(params, grads, buffer, half, count, c);
  if (first && !nesterov) sgd_momentum_loop<H, true, false>(params, grads, buffer, half, count, c);
  if (!first && nesterov) sgd_momentum_loop<H, false, true>(params, grads, buffer, half, count, c);
  if (!first && !nesterov)
    sgd_momentum_loop<H, false, false>(params, grads, buffer, half, count, c);
}

using SgdChunk = void (*)(float*, const float*, float*, std::uint16_t*, std::size_t,
                          SgdCoefficients, bool, bool);

#define ZERO_SGD_CHUNKS(suffix, half_kind)                                                         \
  ZERO_SIMD_CLONES void sgd_plain##suffix(float* __restrict params, const float* __restrict grads, \
                                          float*, std::uint16_t* __restrict half,                  \
                                          std::size_t count, SgdCoefficients c, bool, bool) {      \
    sgd_plain_body<half_kind>(params, grads, half, count, c);                                      \
  }                                                                                                \
  ZERO_SIMD_CLONES void sgd_momentum##suffix(                                                      \
      float* __restrict params, const float* __restrict grads, float* __restrict buffer,           \
      std::uint16_t* __restrict half, std::size_t count, SgdCoefficients c, bool first,            \
      bool nesterov) {                                                                             \
    sgd_momentum_body<half_kind>(params, grads, buffer, half, count, c, first, nesterov);          \
  }
ZERO_SGD_CHUNKS(_chunk, Half::kNone)
ZERO_SGD_CHUNKS(_bf16_chunk, Half::kBFloat16)
ZERO_SGD_CHUNKS(_fp16_chunk, Half::kFloat16)
#undef ZERO_SGD_CHUNKS

void run_sgd(float* params, const float* grads, float* momentum_buffer, std::size_t count,
             const SgdHyperparams& h, std::uint16_t* half, Half kind) {
  static constexpr SgdChunk kChunks[2][3] = {
      {sgd_plain_chunk, sgd_plain_bf16_chunk, sgd_plain_fp16_chunk},
      {sgd_momentum_chunk, sgd_momentum_bf16_chunk, sgd_momentum_fp16_chunk}};
  const bool momentum = h.momentum != 0.0;
  ZERO_CHECK(!momentum || momentum_buffer != nullptr || count == 0, "sgd_step: momentum ",
             h.momentum, " needs a momentum buffer");
  const SgdChunk chunk = kChunks[momentum ? 1 : 0][half_index(kind)];
  const SgdCoefficients c = sgd_coefficients(h);
  for_chunks(count, threads_for(h.threads), kChunkAlign, [&](std::size_t begin, std::size_t end) {
    chunk(params + begin, grads + begin, momentum ? momentum_buffer + begin : nullptr,
          half == nullptr ? nullptr : half + begin, end - begin, c, h.first_step, h.nesterov);
  });
}

// One block (at most kSumBlockElements): the moments, and Σp², Σu² as kSumLanes partial sums
// (element i into lane i % kSumLanes, in element order) added lane by lane at the end. The order
// is the source's, so every clone and thread count gives the same sums, and the lanes are
// independent chains the compiler can keep in vector registers.
constexpr std::size_t kSumLanes = 8;

ZERO_SIMD_CLONES
void lamb_moments_block(const float* __restrict params, const float* __restrict grads,
                        float* __restrict m, float* __restrict v, std::size_t count,
                        LambCoefficients c, double* params_sum, double* update_sum) {
  double sp[kSumLanes] = {}, su[kSumLanes] = {};
  const auto element = [&](std::size_t i, std::size_t lane) {
    const float g = grads[i] * c.grad_scale;
    const float mi = c.beta1 * m[i] + c.one_minus_beta1 * g;
    const float vi = c.beta2 * v[i] + c.one_minus_beta2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float u = mi / (std::sqrt(vi) + c.eps) + c.weight_decay * params[i];
    sp[lane] += static_cast<double>(params[i]) * params[i];
    su[lane] += static_cast<double>(u) * u;
  };
  const std::size_t whole = count / kSumLanes * kSumLanes;
  for (std::size_t i = 0; i < whole; i += kSumLanes)
    for (std::size_t lane = 0; lane < kSumLanes; ++lane) element(i + lane, lane);
  for (std::size_t i = whole; i < count; ++i) element(i, i - whole);
  double total_p = 0.0, total_u = 0.0;
  for (std::size_t lane = 0; lane < kSumLanes; ++lane) total_p += sp[lane], total_u += su[lane];
  *params_sum = total_p;
  *update_sum = total_u;
}

template <Half H>
ZERO_ALWAYS_INLINE void lamb_apply_body(float* __restrict params, const float* __restrict m,
                                        const float* __restrict v, std::uint16_t* __restrict half,
                                        std::size_t count, float eps, float weight_decay,
                                        float step) {
  for (std::size_t i = 0; i < count; ++i) {
    const float u = m[i] / (std::sqrt(v[i]) + eps) + weight_decay * params[i];
    const float p = params[i] - step * u;
    params[i] = p;
    store_half<H>(half, i, p);
  }
}

using LambApplyChunk = void (*)(float*, const float*, const float*, std::uint16_t*, std::size_t,
                                float, float, float);

#define ZERO_LAMB_APPLY_CHUNK(name, half_kind)                                               \
  ZERO_SIMD_CLONES void name(float* __restrict params, const float* __restrict m,            \
                             const float* __restrict v, std::uint16_t* __restrict half,      \
                             std::size_t count, float eps, float weight_decay, float step) { \
    lamb_apply_body<half_kind>(params, m, v, half, count, eps, weight_decay, step);          \
  }
ZERO_LAMB_APPLY_CHUNK(lamb_apply_chunk, Half::kNone)
ZERO_LAMB_APPLY_CHUNK(lamb_apply_bf16_chunk, Half::kBFloat16)
ZERO_LAMB_APPLY_CHUNK(lamb_apply_fp16_chunk, Half::kFloat16)
#undef ZERO_LAMB_APPLY_CHUNK

void run_lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                    const LambHyperparams& hyper, double trust_ratio, std::uint16_t* half,
                    Half kind) {
  static constexpr LambApplyChunk kChunks[3] = {lamb_apply_chunk, lamb_apply_bf16_chunk,
                                                lamb_apply_fp16_chunk};
  const LambApplyChunk chunk = kChunks[half_index(kind)];
  const auto step = static_cast<float>(lamb_step_size(hyper) * trust_ratio);
  const auto eps = static_cast<float>(hyper.eps);
  const auto decay = static_cast<float>(hyper.weight_decay);
  for_chunks(count, threads_for(hyper.threads), kChunkAlign,
             [&](std::size_t begin, std::size_t end) {
               chunk(params + begin, exp_avg + begin, exp_avg_sq + begin,
                     half == nullptr ? nullptr : half + begin, end - begin, eps, decay, step);
             });
}

}  // namespace

AdamCoefficients adam_coefficients(const AdamHyperparams& h) {
  const double bc1 = h.bias_correction ? 1.0 - std::pow(h.beta1, static_cast<double>(h.step)) : 1.0;
  const double bc2 = h.bias_correction ? 1.0 - std::pow(h.beta2, static_cast<double>(h.step)) : 1.0;
  return {static_cast<float>(h.beta1),
          static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),
          static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),
          static_cast<float>(h.lr / bc1),
          static_cast<float>(1.0 / std::sqrt(bc2)),
          static_cast<float>(h.adam_w_mode ? 1.0 - h.lr * h.weight_decay : 1.0),
          static_cast<float>(h.adam_w_mode ? 0.0 : h.weight_decay),
          static_cast<float>(h.grad_scale)};
}

SgdCoefficients sgd_coefficients(const SgdHyperparams& h) {
  return {static_cast<float>(h.lr),
          static_cast<float>(h.momentum),
          static_cast<float>(1.0 - h.dampening),
          static_cast<float>(h.weight_decay),
          static_cast<float>(h.grad_scale),
          h.momentum != 0.0,
          h.first_step,
          h.nesterov};
}

LambCoefficients lamb_coefficients(const LambHyperparams& h) {
  return {static_cast<float>(h.beta1),     static_cast<float>(1.0 - h.beta1),
          static_cast<float>(h.beta2),     static_cast<float>(1.0 - h.beta2),
          static_cast<float>(h.eps),       static_cast<float>(h.weight_decay),
          static_cast<float>(h.grad_scale)};
}

double lamb_step_size(const LambHyperparams& h) {
  if (!h.bias_correction) return h.lr;
  const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  return h.lr * std::sqrt(bc2) / bc1;
}

int resolve_cpu_optimizer_threads(const char* setting, int openmp_threads, int allowed_cpus) {
  if (setting != nullptr && *setting != '\0') {
    const char* end = setting + std::strlen(setting);
    int threads = 0;
    const auto [last, error] = std::from_chars(setting, end, threads);
    ZERO_CHECK(error == std::errc{} && last == end && threads > 0, "ZERO_CPU_OPTIMIZER_THREADS=\"",
               setting, "\" is not a positive integer (the CPU optimizer's threads per process)");
    return threads;
  }
  const int threads = allowed_cpus > 0 ? std::min(openmp_threads, allowed_cpus) : openmp_threads;
  return std::max(1, threads);
}

int cpu_optimizer_threads() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int cpus = sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 0;
  return resolve_cpu_optimizer_threads(std::getenv("ZERO_CPU_OPTIMIZER_THREADS"),
                                       omp_get_max_threads(), cpus);
}

void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
               std::size_t count, const AdamHyperparams& hyper) {
  run_adam(params, grads, exp_avg, exp_avg_sq, count, hyper, nullptr, Half::kNone);
}

void adam_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
               std::size_t count, const AdamHyperparams& hyper, void* half_params,
               DType half_dtype) {
  const Half kind = half_of(half_dtype, "adam_step");
  ZERO_CHECK(half_params != nullptr || count == 0, "adam_step: the ", name_of(half_dtype),
             " parameter copy is null for ", count, " elements");
  run_adam(params, grads, exp_avg, exp_avg_sq, count, hyper,
           static_cast<std::uint16_t*>(half_params), kind);
}

void adam_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const AdamHyperparams& h) {
  const AdamCoefficients c = adam_coefficients(h);
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] * c.grad_scale;
    if (!h.adam_w_mode) g += c.l2 * params[i];
    exp_avg[i] = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
    exp_avg_sq[i] = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
    const float denom = std::sqrt(exp_avg_sq[i]) * c.inv_sqrt_bc2 + c.eps;
    if (h.adam_w_mode) params[i] *= c.decay;
    params[i] -= c.step_size * (exp_avg[i] / denom);
  }
}

void sgd_step(float* params, const float* grads, float* momentum_buffer, std::size_t count,
              const SgdHyperparams& hyper) {
  run_sgd(params, grads, momentum_buffer, count, hyper, nullptr, Half::kNone);
}

void sgd_step(float* params, const float* grads, float* momentum_buffer, std::size_t count,
              const SgdHyperparams& hyper, void* half_params, DType half_dtype) {
  const Half kind = half_of(half_dtype, "sgd_step");
  ZERO_CHECK(half_params != nullptr || count == 0, "sgd_step: the ", name_of(half_dtype),
             " parameter copy is null for ", count, " elements");
  run_sgd(params, grads, momentum_buffer, count, hyper, static_cast<std::uint16_t*>(half_params),
          kind);
}

void sgd_step_reference(float* params, const float* grads, float* momentum_buffer,
                        std::size_t count, const SgdHyperparams& h) {
  const auto lr = static_cast<float>(h.lr), mu = static_cast<float>(h.momentum);
  for (std::size_t i = 0; i < count; ++i) {
    float g = grads[i] * static_cast<float>(h.grad_scale) +
              static_cast<float>(h.weight_decay) * params[i];
    if (h.momentum != 0.0) {
      momentum_buffer[i] =
          h.first_step ? g : mu * momentum_buffer[i] + static_cast<float>(1.0 - h.dampening) * g;
      g = h.nesterov ? g + mu * momentum_buffer[i] : momentum_buffer[i];
    }
    params[i] -= lr * g;
  }
}

SumsOfSquares lamb_moments(const float* params, const float* grads, float* exp_avg,
                           float* exp_avg_sq, std::size_t count, const LambHyperparams& hyper) {
  const LambCoefficients c = lamb_coefficients(hyper);
  const std::size_t blocks = (count + kSumBlockElements - 1) / kSumBlockElements;
  std::vector<double> params_sums(blocks, 0.0), update_sums(blocks, 0.0);
  for_chunks(count, threads_for(hyper.threads), kSumBlockElements,
             [&](std::size_t begin, std::size_t end) {
               for (std::size_t at = begin; at < end; at += kSumBlockElements) {
                 const std::size_t block = at / kSumBlockElements;
                 lamb_moments_block(params + at, grads + at, exp_avg + at, exp_avg_sq + at,
                                    std::min(kSumBlockElements, end - at), c, &params_sums[block],
                                    &update_sums[block]);
               }
             });
  SumsOfSquares sums;
  for (std::size_t block = 0; block < blocks; ++block) {  // block order: any thread count
    sums.params += params_sums[block];
    sums.update += update_sums[block];
  }
  return sums;
}

double lamb_trust_ratio(double params_sum_of_squares, double update_sum_of_squares,
                        const LambHyperparams& hyper) {
  const double w_norm = std::sqrt(params_sum_of_squares);
  const double u_norm = std::sqrt(update_sum_of_squares);
  if (w_norm == 0.0 || u_norm == 0.0) return 1.0;
  return std::clamp(w_norm / u_norm, hyper.min_coeff, hyper.max_coeff);
}

void lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                const LambHyperparams& hyper, double trust_ratio) {
  run_lamb_apply(params, exp_avg, exp_avg_sq, count, hyper, trust_ratio, nullptr, Half::kNone);
}

void lamb_apply(float* params, const float* exp_avg, const float* exp_avg_sq, std::size_t count,
                const LambHyperparams& hyper, double trust_ratio, void* half_params,
                DType half_dtype) {
  const Half kind = half_of(half_dtype, "lamb_apply");
  ZERO_CHECK(half_params != nullptr || count == 0, "lamb_apply: the ", name_of(half_dtype),
             " parameter copy is null for ", count, " elements");
  run_lamb_apply(params, exp_avg, exp_avg_sq, count, hyper, trust_ratio,
                 static_cast<std::uint16_t*>(half_params), kind);
}

void lamb_step_reference(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                         std::size_t count, const LambHyperparams& h) {
  const LambCoefficients c = lamb_coefficients(h);
  std::vector<float> update(count);
  double sp = 0.0, su = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    const float g = grads[i] * c.grad_scale;
    exp_avg[i] = c.beta1 * exp_avg[i] + c.one_minus_beta1 * g;
    exp_avg_sq[i] = c.beta2 * exp_avg_sq[i] + c.one_minus_beta2 * g * g;
    update[i] = exp_avg[i] / (std::sqrt(exp_avg_sq[i]) + c.eps) + c.weight_decay * params[i];
    sp += static_cast<double>(params[i]) * params[i];
    su += static_cast<double>(update[i]) * update[i];
  }
  const auto step = static_cast<float>(lamb_step_size(h) * lamb_trust_ratio(sp, su, h));
  for (std::size_t i = 0; i < count; ++i) params[i] -= step * update[i];
}

}  // namespace zero::optim
