// Row-major single-precision GEMM for the GPT-2 CPU kernels: OpenBLAS sgemm or Eigen's own GEMM,
// chosen once per process (see gemm_backend_kind in layers_cpu.h).
// GCC 12 reports false maybe-uninitialized warnings inside Eigen's AVX-512 packet math.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string_view>

#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"

#ifdef ZERO_GPT2_WITH_OPENBLAS
#include <cblas.h>
#endif

namespace zero::gpt2::cpu {
namespace {

#ifdef ZERO_GPT2_WITH_OPENBLAS
// OpenBLAS cores without AVX2 kernels: what DYNAMIC_ARCH falls back to on a CPU it does not
// recognise (0.3.21 reports "Prescott" on family 6 model 207), about 10x slower than SkylakeX.
bool openblas_core_is_generic() {
  const std::string_view core = openblas_get_corename();
  for (std::string_view weak :
       {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine",
        "Northwood", "Banias", "Generic", "generic", "Unknown"})
    if (core == weak) return true;
  return false;
}
#endif

GemmBackend choose_backend() {
  const char* forced = std::getenv("ZERO_GEMM_BACKEND");
  if (forced != nullptr && *forced != '\0') {
    const std::string_view name = forced;
#ifdef ZERO_GPT2_WITH_OPENBLAS
    if (name == "openblas") return GemmBackend::kOpenBlas;
    constexpr const char* kAccepted = "eigen or openblas";
#else
    constexpr const char* kAccepted = "eigen (this build has no OpenBLAS)";
#endif
    ZERO_CHECK(name == "eigen", "ZERO_GEMM_BACKEND='", name, "': expected ", kAccepted);
    return GemmBackend::kEigen;
  }
#ifdef ZERO_GPT2_WITH_OPENBLAS
  if (openblas_core_is_generic() && __builtin_cpu_supports("avx2")) return GemmBackend::kEigen;
  // One thread pool for everything: OpenBLAS runs single-threaded inside our OpenMP split, so
  // its spinning workers never compete with OpenMP's on a loaded machine.
  openblas_set_num_threads(1);
  return GemmBackend::kOpenBlas;
#else
  return GemmBackend::kEigen;
#endif
}

void eigen_gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                float beta, float* C, std::int64_t ldc) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
  Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
  ConstMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  ConstMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  if (beta == 0.0f)
    c.setZero();
  else if (beta != 1.0f)
    c *= beta;
  if (trans_a && trans_b)
    c.noalias() += alpha * a.transpose() * b.transpose();
  else if (trans_a)
    c.noalias() += alpha * a.transpose() * b;
  else if (trans_b)
    c.noalias() += alpha * a * b.transpose();
  else
    c.noalias() += alpha * a * b;
}

#ifdef ZERO_GPT2_WITH_OPENBLAS
void openblas_gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                   float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                   float beta, float* C, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(M), static_cast<blasint>(N),
              static_cast<blasint>(K), alpha, A, static_cast<blasint>(lda), B,
              static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
}

// Splits C into blocks of columns (or rows, when C is taller than wide), a few per OpenMP thread
// and handed out dynamically, each a single-threaded sgemm: on a shared machine a descheduled
// thread then delays the product by one block, not by half of it. Small products run whole.
void split_openblas_gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                         float alpha, const float* A, std::int64_t lda, const float* B,
                         std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  constexpr double kMinParallelFlops = 4e6;
  constexpr std::int64_t kAlign = 64;
  constexpr int kBlocksPerThread = 4;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || 2.0 * double(M) * double(N) * double(K) < kMinParallelFlops) {
    openblas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const bool split_rows = M > N;
  const std::int64_t extent = split_rows ? M : N;
  const std::int64_t wanted = threads * kBlocksPerThread;
  const std::int64_t chunk =
      std::max<std::int64_t>(kAlign, (extent + wanted - 1) / wanted / kAlign * kAlign);
  const std::int64_t blocks = (extent + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t block = 0; block < blocks; ++block) {
    const std::int64_t begin = block * chunk, end = std::min(extent, begin + chunk);
    if (split_rows)
      openblas_gemm(trans_a, trans_b, end - begin, N, K, alpha,
                    trans_a ? A + begin : A + begin * lda, lda, B, ldb, beta, C + begin * ldc, ldc);
    else
      openblas_gemm(trans_a, trans_b, M, end - begin, K, alpha, A, lda,
                    trans_b ? B + begin * ldb : B + begin, ldb, beta, C + begin, ldc);
  }
}
#endif

}  // namespace

GemmBackend gemm_backend_kind() {
  static const GemmBackend backend = choose_backend();
  return backend;
}

void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc) {
  if (M == 0 || N == 0) return;
#ifdef ZERO_GPT2_WITH_OPENBLAS
  if (gemm_backend_kind() == GemmBackend::kOpenBlas) {
    split_openblas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#endif
  eigen_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

std::string gemm_backend() {
  std::ostringstream text;
  if (gemm_backend_kind() == GemmBackend::kEigen) {
    text << "Eigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "."
         << EIGEN_MINOR_VERSION << " own GEMM (" << Eigen::nbThreads() << " threads)";
#ifdef ZERO_GPT2_WITH_OPENBLAS
    text << "; OpenBLAS available with core " << openblas_get_corename()
         << (openblas_core_is_generic()
                 ? " (generic kernels: CPU not recognised; set OPENBLAS_CORETYPE)"
                 : "");
#endif
    return text.str();
  }
#ifdef ZERO_GPT2_WITH_OPENBLAS
  text << "OpenBLAS (" << openblas_get_config() << "; core " << openblas_get_corename()
       << ", single-threaded calls split over " << omp_get_max_threads() << " OpenMP threads)";
#endif
  return text.str();
}

}  // namespace zero::gpt2::cpu
