// Row-major single-precision GEMM for the GPT-2 CPU kernels: OpenBLAS sgemm when built with it,
// Eigen's own GEMM otherwise.
#include <sstream>

#include "zero/core/error.h"
#include "zero/gpt2/layers_cpu.h"

#ifdef ZERO_GPT2_WITH_OPENBLAS
#include <cblas.h>
#else
#include <Eigen/Core>
#endif

namespace zero::gpt2::cpu {

void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc) {
  if (M == 0 || N == 0) return;
#ifdef ZERO_GPT2_WITH_OPENBLAS
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
#else
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
  Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> c(C, M, N, Eigen::OuterStride<>(ldc));
  ConstMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  ConstMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  if (beta == 0.0f) c.setZero();
  else if (beta != 1.0f) c *= beta;
  if (trans_a && trans_b) c.noalias() += alpha * a.transpose() * b.transpose();
  else if (trans_a) c.noalias() += alpha * a.transpose() * b;
  else if (trans_b) c.noalias() += alpha * a * b.transpose();
  else c.noalias() += alpha * a * b;
#endif
}

std::string gemm_backend() {
  std::ostringstream text;
#ifdef ZERO_GPT2_WITH_OPENBLAS
  text << "OpenBLAS (" << openblas_get_config() << "; core " << openblas_get_corename() << ", "
       << openblas_get_num_threads() << " threads)";
#else
  text << "Eigen " << EIGEN_WORLD_VERSION << "." << EIGEN_MAJOR_VERSION << "." << EIGEN_MINOR_VERSION
       << " (own GEMM, " << Eigen::nbThreads() << " threads)";
#endif
  return text.str();
}

}  // namespace zero::gpt2::cpu
