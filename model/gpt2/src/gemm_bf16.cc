// 16-bit GEMMs and conversions for the GPT-2 CPU kernels: bf16 × bf16 → fp32 through oneDNN's
// matmul (one primitive per shape, cached), or widened to fp32 when the build has no oneDNN;
// fp32 × (bf16 | fp16) by widening the 16-bit operand slice by slice.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <vector>

#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"

#ifdef ZERO_GPT2_WITH_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace zero::gpt2::cpu {
namespace {

// zero::to_bf16, inlined so that the conversion loops vectorise.
inline std::uint16_t bf16_bits(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
inline float bf16_value(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

constexpr std::int64_t kConvertChunk = 1 << 14;

#ifdef ZERO_GPT2_WITH_DNNL
class DnnlGemm {
 public:
  DnnlGemm() : engine_(dnnl::engine::kind::cpu, 0) {}

  void run(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
           const BFloat16* A, std::int64_t lda, const BFloat16* B, std::int64_t ldb,
           bool accumulate, float* C, std::int64_t ldc) {
    const Key key{trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate};
    const Entry* entry;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = cache_.find(key);
      if (found == cache_.end()) found = cache_.emplace(key, make(key)).first;
      entry = &found->second;
    }
    dnnl::memory a(entry->a, engine_, const_cast<BFloat16*>(A));
    dnnl::memory b(entry->b, engine_, const_cast<BFloat16*>(B));
    dnnl::memory c(entry->c, engine_, C);
    // A stream and a scratchpad per calling thread: ranks of a thread communicator run the same
    // primitive concurrently, which oneDNN allows only with user-managed scratchpads.
    thread_local dnnl::stream stream(engine_);
    thread_local std::vector<char> scratch;
    if (scratch.size() < entry->scratchpad.get_size()) scratch.resize(entry->scratchpad.get_size());
    dnnl::memory pad(entry->scratchpad, engine_, scratch.data());
    entry->matmul.execute(
        stream,
        {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, pad}});
    stream.wait();
  }

  // Implementation names of the primitives made so far ("brg:avx512_core_amx_bf16").
  std::set<std::string> kernels() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::set<std::string> names;
    for (const auto& [key, entry] : cache_) names.insert(entry.impl);
    return names;
  }

  // Whether this CPU gets a jitted (not reference) bf16 matmul.
  std::string probe() {
    const Entry entry = make(Key{false, false, 64, 64, 64, 64, 64, 64, false});
    return entry.impl;
  }

 private:
  using Key = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                         std::int64_t, std::int64_t, bool>;
  struct Entry {
    dnnl::memory::desc a, b, c, scratchpad;
    dnnl::matmul matmul;
    std::string impl;
  };

  Entry make(const Key& key) const {
    const auto [trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate] = key;
    using dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    Entry entry;
    entry.a = dnnl::memory::desc({M, K}, dt::bf16, trans_a ? dims{1, lda} : dims{lda, 1});
    entry.b = dnnl::memory::desc({K, N}, dt::bf16, trans_b ? dims{1, ldb} : dims{ldb, 1});
    entry.c = dnnl::memory::desc({M, N}, dt::f32, dims{ldc, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(entry.a, entry.b, entry.c), attr,
                                          engine_);
    entry.impl = pd.impl_info_str();
    entry.scratchpad = pd.scratchpad_desc();
    entry.matmul = dnnl::matmul(pd);
    return entry;
  }

  dnnl::engine engine_;
  std::mutex mutex_;
  std::map<Key, Entry> cache_;
};

DnnlGemm& dnnl_gemm() {
  static DnnlGemm instance;
  return instance;
}
#endif

struct Bf16Choice {
  bool native = false;
  std::string why;  // why not native, or the probe's kernel
};

Bf16Choice choose_bf16() {
  Bf16Choice choice;
  const char* forced = std::getenv("ZERO_GEMM_BF16_BACKEND");
  const std::string_view name = forced != nullptr ? forced : "";
  ZERO_CHECK(name.empty() || name == "onednn" || name == "widen", "ZERO_GEMM_BF16_BACKEND='", name,
             "': expected onednn or widen");
#ifdef ZERO_GPT2_WITH_DNNL
  if (name == "widen") {
    choice.why = "ZERO_GEMM_BF16_BACKEND=widen";
    return choice;
  }
  try {
    choice.why = dnnl_gemm().probe();
  } catch (const dnnl::error& error) {
    ZERO_CHECK(name.empty(), "ZERO_GEMM_BF16_BACKEND=onednn: oneDNN has no bf16 matmul here (",
               error.what(), ")");
    choice.why = std::string("oneDNN has no bf16 matmul on this CPU: ") + error.what();
    return choice;
  }
  // oneDNN's reference matmul is scalar C++: far slower than widening to an fp32 BLAS.
  if (choice.why.starts_with("ref") && name.empty()) {
    choice.why = "oneDNN offers only its reference bf16 matmul on this CPU (" + choice.why + ")";
    return choice;
  }
  choice.native = true;
#else
  ZERO_CHECK(name != "onednn",
             "ZERO_GEMM_BF16_BACKEND=onednn: this build has no oneDNN "
             "(install libdnnl-dev and reconfigure)");
  choice.why = "this build has no oneDNN (libdnnl-dev)";
#endif
  return choice;
}

const Bf16Choice& bf16_choice() {
  static const Bf16Choice choice = choose_bf16();
  return choice;
}

// Widens rows × cols elements of a row-major 16-bit matrix with row stride ld into a dense fp32
// (rows, cols) matrix.
void widen_matrix(float* out, const void* in, DType dtype, std::int64_t rows, std::int64_t cols,
                  std::int64_t ld) {
#pragma omp parallel for schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    const char* base = static_cast<const char*>(in) + row * ld * std::int64_t(size_of(dtype));
    float* to = out + row * cols;
    if (dtype == DType::kBFloat16) {
      const auto* from = reinterpret_cast<const std::uint16_t*>(base);
      for (std::int64_t c = 0; c < cols; ++c) to[c] = bf16_value(from[c]);
    } else if (dtype == DType::kFloat16) {
      const auto* from = reinterpret_cast<const Float16*>(base);
      for (std::int64_t c = 0; c < cols; ++c) to[c] = to_float(from[c]);
    } else {
      const auto* from = reinterpret_cast<const float*>(base);
      std::copy(from, from + cols, to);
    }
  }
}

}  // namespace

void gemm_bf16(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
               const BFloat16* A, std::int64_t lda, const BFloat16* B, std::int64_t ldb, float beta,
               float* C, std::int64_t ldc) {
  ZERO_CHECK(beta == 0.0f || beta == 1.0f, "gemm_bf16: beta must be 0 or 1, got ", beta);
  ZERO_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm_bf16: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (beta == 0.0f)
      for (std::int64_t row = 0; row < M; ++row) std::fill(C + row * ldc, C + row * ldc + N, 0.0f);
    return;
  }
#ifdef ZERO_GPT2_WITH_DNNL
  if (bf16_choice().native) {
    dnnl_gemm().run(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta != 0.0f, C, ldc);
    return;
  }
#endif
  // Widened: op(A) stored (M, K) or (K, M), op(B) stored (K, N) or (N, K).
  const std::int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const std::int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  std::vector<float> a(static_cast<std::size_t>(a_rows * a_cols));
  std::vector<float> b(static_cast<std::size_t>(b_rows * b_cols));
  widen_matrix(a.data(), A, DType::kBFloat16, a_rows, a_cols, lda);
  widen_matrix(b.data(), B, DType::kBFloat16, b_rows, b_cols, ldb);
  gemm(trans_a, trans_b, M, N, K, 1.0f, a.data(), a_cols, b.data(), b_cols, beta, C, ldc);
}

bool gemm_bf16_native() { return bf16_choice().native; }

std::string gemm_bf16_backend() {
  std::ostringstream text;
  const Bf16Choice& choice = bf16_choice();
#ifdef ZERO_GPT2_WITH_DNNL
  const dnnl_version_t* version = dnnl_version();
  if (choice.native) {
    text << "oneDNN " << version->major << "." << version->minor << "." << version->patch
         << " matmul (kernels: ";
    std::set<std::string> seen = dnnl_gemm().kernels();
    if (seen.empty()) seen.insert(choice.why);  // the probe's kernel until a GEMM ran
    bool first = true;
    for (const std::string& kernel : seen) {
      text << (first ? "" : ", ") << kernel;
      first = false;
    }
    text << "; " << omp_get_max_threads() << " OpenMP threads)";
    return text.str();
  }
#endif
  text << "widened to fp32 and run by the fp32 GEMM (" << choice.why << ")";
  return text.str();
}

void gemm_widen_b(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                  const float* A, std::int64_t lda, const void* B, DType b_dtype, std::int64_t ldb,
                  float beta, float* C, std::int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (b_dtype == DType::kFloat32) {
    gemm(trans_a, trans_b, M, N, K, 1.0f, A, lda, static_cast<const float*>(B), ldb, beta, C, ldc);
    return;
  }
  constexpr std::int64_t kSliceElements = std::int64_t(1) << 21;  // 8 MB of fp32
  const std::int64_t element = std::int64_t(size_of(b_dtype));
  const auto* bytes = static_cast<const char*>(B);
  if (trans_b) {
    // B stored (N, K): slices of rows of B are slices of columns of C.
    const std::int64_t rows =
        std::max<std::int64_t>(1, kSliceElements / std::max<std::int64_t>(K, 1));
    std::vector<float> slice(static_cast<std::size_t>(std::min(rows, N) * K));
    for (std::int64_t n0 = 0; n0 < N; n0 += rows) {
      const std::int64_t count = std::min(rows, N - n0);
      widen_matrix(slice.data(), bytes + n0 * ldb * element, b_dtype, count, K, ldb);
      gemm(trans_a, true, M, count, K, 1.0f, A, lda, slice.data(), K, beta, C + n0, ldc);
    }
    return;
  }
  // B stored (K, N): slices of rows of B are slices of the summation; beta applies once.
  const std::int64_t rows = std::max<std::int64_t>(1, kSliceElements / N);
  std::vector<float> slice(
      static_cast<std::size_t>(std::min(rows, std::max<std::int64_t>(K, 1)) * N));
  if (K == 0) {
    gemm(trans_a, false, M, N, 0, 1.0f, A, lda, slice.data(), N, beta, C, ldc);
    return;
  }
  for (std::int64_t k0 = 0; k0 < K; k0 += rows) {
    const std::int64_t count = std::min(rows, K - k0);
    widen_matrix(slice.data(), bytes + k0 * ldb * element, b_dtype, count, N, ldb);
    gemm(trans_a, false, M, N, count, 1.0f, trans_a ? A + k0 * lda : A + k0, lda, slice.data(), N,
         k0 == 0 ? beta : 1.0f, C, ldc);
  }
}

void to_bf16(BFloat16* out, const float* in, std::int64_t n) {
  auto* bits = reinterpret_cast<std::uint16_t*>(out);
  const std::int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t end = std::min(n, (chunk + 1) * kConvertChunk);
    for (std::int64_t i = chunk * kConvertChunk; i < end; ++i) bits[i] = bf16_bits(in[i]);
  }
}

void widen(float* out, const void* in, DType dtype, std::int64_t n) {
  const std::int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kConvertChunk, end = std::min(n, begin + kConvertChunk);
    if (dtype == DType::kBFloat16) {
      const auto* bits = static_cast<const std::uint16_t*>(in);
      for (std::int64_t i = begin; i < end; ++i) out[i] = bf16_value(bits[i]);
    } else if (dtype == DType::kFloat16) {
      const auto* halves = static_cast<const Float16*>(in);
      for (std::int64_t i = begin; i < end; ++i) out[i] = to_float(halves[i]);
    } else {
      const auto* floats = static_cast<const float*>(in);
      std::copy(floats + begin, floats + end, out + begin);
    }
  }
}

void accumulate(void* out, DType dtype, const float* in, std::int64_t n) {
  const std::int64_t chunks = (n + kConvertChunk - 1) / kConvertChunk;
#pragma omp parallel for schedule(static)
  for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t begin = chunk * kConvertChunk, end = std::min(n, begin + kConvertChunk);
    if (dtype == DType::kBFloat16) {
      auto* bits = static_cast<std::uint16_t*>(out);
      for (std::int64_t i = begin; i < end; ++i) bits[i] = bf16_bits(bf16_value(bits[i]) + in[i]);
    } else if (dtype == DType::kFloat16) {
      auto* halves = static_cast<Float16*>(out);
      for (std::int64_t i = begin; i < end; ++i) halves[i] = to_fp16(to_float(halves[i]) + in[i]);
    } else {
      auto* floats = static_cast<float*>(out);
      for (std::int64_t i = begin; i < end; ++i) floats[i] += in[i];
    }
  }
}

}  // namespace zero::gpt2::cpu
