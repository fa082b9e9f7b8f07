// The host logic of the GPT-2 CUDA kernels, tested without a device: the column-major problem
// gemm() hands cuBLASLt (executed here by a plain column-major GEMM, against cpu::gemm for every
// transpose and padded leading dimensions) and encoder_backward's grouping of rows by token.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <set>
#include <vector>

#include "../common/random_inputs.h"
#include "attention_cudnn.h"
#include "layers_cuda.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/layers_cpu.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using testing::random_vector;

// D = op(first) · op(second) in cuBLAS's column-major terms, as cublasLtMatmul would run it.
void run_column_major(const cuda::LtProblem& p, const float* first, const float* second, float beta,
                      float* output) {
  const std::int64_t m = p.output_rows, n = p.output_cols;
  const std::int64_t k = p.first_transposed ? p.first_rows : p.first_cols;
  ASSERT_EQ(k, p.second_transposed ? p.second_cols : p.second_rows);
  ASSERT_EQ(m, p.first_transposed ? p.first_cols : p.first_rows);
  ASSERT_EQ(n, p.second_transposed ? p.second_rows : p.second_cols);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (std::int64_t l = 0; l < k; ++l) {
        const float a = p.first_transposed ? first[l + i * p.first_ld] : first[i + l * p.first_ld];
        const float b =
            p.second_transposed ? second[j + l * p.second_ld] : second[l + j * p.second_ld];
        sum += a * b;
      }
      float& d = output[i + j * p.output_ld];
      d = sum + beta * d;
    }
}

TEST(Gpt2CudaHost, GemmProblemIsTheRowMajorProduct) {
  const std::int64_t M = 7, N = 5, K = 3, pad = 2;  // leading dimensions padded past the shape
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(std::string("trans_a ") + (trans_a ? "T" : "N") + " trans_b " +
                   (trans_b ? "T" : "N"));
      const std::int64_t lda = (trans_a ? M : K) + pad, ldb = (trans_b ? K : N) + pad,
                         ldc = N + pad;
      const auto A = random_vector((trans_a ? K : M) * lda, 1);
      const auto B = random_vector((trans_b ? N : K) * ldb, 2);
      auto expected = random_vector(M * ldc, 3);
      auto actual = expected;
      cpu::gemm(trans_a, trans_b, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 1.0f,
                expected.data(), ldc);
      run_column_major(cuda::lt_problem(trans_a, trans_b, M, N, K, lda, ldb, ldc), B.data(),
                       A.data(), 1.0f, actual.data());
      for (std::int64_t i = 0; i < M * ldc; ++i)
        ASSERT_NEAR(actual[i], expected[i], 1e-5 * (1.0 + std::fabs(expected[i]))) << i;
    }
  }
}

TEST(Gpt2CudaHost, TokenBucketsGroupRowsInOrder) {
  const std::vector<int> tokens = {5, 3, 5, 0, 3, 3, 9, 5};
  const cuda::TokenBuckets grouped = cuda::token_buckets(tokens.data(), tokens.size());
  // tokens 0, 3, 5, 9; rows [3], [1, 4, 5], [0, 2, 7], [6].
  EXPECT_EQ(grouped.buckets, 4);
  EXPECT_EQ(grouped.table, (std::vector<int>{0, 3, 5, 9, 0, 1, 4, 7, 8, 3, 1, 4, 5, 0, 2, 7, 6}));
  EXPECT_TRUE(cuda::token_buckets(tokens.data(), 0).table == std::vector<int>{0});
  const std::vector<int> negative = {1, -1};
  EXPECT_THROW(cuda::token_buckets(negative.data(), 2), Error);
}

// The activation layout (attention_layout, kernels.h) sizes att and datt by what CUDA's kernels
// keep: it must name the tiled kernels exactly where attention_forward takes them, else the
// tiled kernels' B·NH·T floats or the plain ones' B·NH·T·T overrun a buffer sized for the other.
TEST(Gpt2CudaHost, AttentionLayoutNamesTheKernelsTheDeviceRuns) {
  const std::int64_t B = 2, T = 5;
  for (std::int64_t HS = 1; HS <= 2 * kCudaTiledAttentionMaxHeadSize; ++HS) {
    const std::int64_t NH = 3, C = NH * HS;
    const AttentionLayout layout = attention_layout(DeviceKind::kCuda, B, T, C, NH);
    const bool tiled = cuda::attention_is_tiled(HS);
    EXPECT_EQ(layout.saved_per_row, tiled ? NH : NH * T) << "HS " << HS;
    EXPECT_EQ(layout.scratch, tiled ? B * NH * T : B * NH * T * T) << "HS " << HS;
    const AttentionLayout cpu = attention_layout(DeviceKind::kCpu, B, T, C, NH);
    EXPECT_EQ(cpu.saved_per_row, 16);  // flash_attention_*'s NH log-sum-exps, in 16 floats
    EXPECT_EQ(cpu.scratch, 0);
    // The per-thread blocks of scores, planned in the workspace for this process's threads.
    EXPECT_EQ(cpu.library_workspace_bytes,
              cpu::flash_attention_blocks_bytes(T, false, omp_get_max_threads()));
  }
  EXPECT_TRUE(cuda::attention_is_tiled(64));  // GPT-2's heads
  EXPECT_THROW(attention_layout(DeviceKind::kCuda, B, T, 10, 3), Error);
}

// The workspace cuDNN's attention keeps is planned where the CUDA kernels run it (bf16, a head of
// a multiple of 8 channels up to 256, a build with cuDNN's attention): at GPT-2 124M's shape the
// 51,118,336 bytes cuDNN 9.19 asked for on an H100 (run 1916's log), nowhere else.
TEST(Gpt2CudaHost, AttentionLayoutPlansCudnnsWorkspace) {
  const AttentionLayout gpt2 =
      attention_layout(DeviceKind::kCuda, 16, 1024, 768, 12, DType::kBFloat16);
  EXPECT_EQ(gpt2.library_workspace_bytes, cuda::cudnn_attention_built() ? 51118336 : 0);
  EXPECT_EQ(gpt2.saved_per_row, 12);  // the same layout as the tiled kernels'
  EXPECT_EQ(attention_layout(DeviceKind::kCuda, 16, 1024, 768, 12).library_workspace_bytes, 0);
  EXPECT_EQ(attention_layout(DeviceKind::kCuda, 16, 1024, 768, 12, DType::kFloat16)
                .library_workspace_bytes,
            0);
  // The CPU's: its per-thread blocks, with bf16 ones where its products run on the bf16 GEMM.
  EXPECT_EQ(
      attention_layout(DeviceKind::kCpu, 16, 1024, 768, 12, DType::kBFloat16)
          .library_workspace_bytes,
      cpu::flash_attention_blocks_bytes(1024, cpu::gemm_bf16_native(), omp_get_max_threads()));
  EXPECT_EQ(
      attention_layout(DeviceKind::kCuda, 2, 8, 36, 3, DType::kBFloat16).library_workspace_bytes,
      0);  // heads of 12 channels: the tiled kernels
}

// qkv and atty are bf16 exactly where cuDNN's SDPA runs the attention on bf16 operands (CUDA, bf16
// parameters, a build with it, heads of a multiple of 8 up to 256, no attention dropout, not
// ZERO_ATTENTION=tiled): there the GEMM writes, cuDNN reads and writes, and the GEMM reads them.
TEST(Gpt2CudaHost, AttentionIoDtypeIsBf16WhereCudnnRunsTheAttention) {
  const DType cudnn = cuda::cudnn_attention_built() ? DType::kBFloat16 : DType::kFloat32;
  const DeviceKind gpu = DeviceKind::kCuda;
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 768, 12, 0.0), cudnn);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 2 * 256, 2, 0.0), cudnn);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 2 * 264, 2, 0.0), DType::kFloat32);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 36, 3, 0.0), DType::kFloat32);  // HS 12
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 768, 12, 0.1), DType::kFloat32);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kFloat32, 768, 12, 0.0), DType::kFloat32);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kFloat16, 768, 12, 0.0), DType::kFloat32);
  EXPECT_EQ(attention_io_dtype(DeviceKind::kCpu, DType::kBFloat16, 768, 12, 0.0), DType::kFloat32);
  setenv("ZERO_ATTENTION", "tiled", 1);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 768, 12, 0.0), DType::kFloat32);
  setenv("ZERO_ATTENTION", "cudnn", 1);
  EXPECT_EQ(attention_io_dtype(gpu, DType::kBFloat16, 768, 12, 0.0), cudnn);
  unsetenv("ZERO_ATTENTION");
}

// The plan follows the layout's dtypes: at GPT-2 124M, B 16, T 1024 on CUDA with bf16 parameters
// and no attention dropout, each block keeps qkv (N, 3C) and atty (N, C) in bf16, N·4C·2 bytes
// (100,663,296) less than in fp32 (what attn_pdrop 0.1 keeps: the tiled kernels'), and under
// activation checkpointing the one shared block's set is that much smaller.
TEST(Gpt2CudaHost, PlannedActivationsKeepQkvAndAttyInBf16WhereCudnnRunsTheAttention) {
  GPT2Config cudnn_config = GPT2Config::gpt2_124m(), tiled_config = cudnn_config;
  cudnn_config.attn_pdrop = 0.0;
  tiled_config.attn_pdrop = 0.1;
  const std::int64_t B = 16, T = 1024, N = B * T, C = cudnn_config.n_embd;
  const std::size_t saved = cuda::cudnn_attention_built() ? std::size_t(N * 4 * C * 2) : 0;
  if (cuda::cudnn_attention_built()) {
    EXPECT_EQ(saved, 100663296u);
  }
  for (bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "activation checkpointing" : "every block kept");
    const ComputeOptions options{.activation_checkpointing = checkpointing,
                                 .param_dtype = DType::kBFloat16,
                                 .device = DeviceKind::kCuda};
    const ActivationPlan cudnn = GPT2Compute::plan(cudnn_config, B, T, options);
    const ActivationPlan tiled = GPT2Compute::plan(tiled_config, B, T, options);
    for (int layer = 0; layer < cudnn_config.n_layer; ++layer)
      EXPECT_EQ(tiled.kept_bytes[block_unit(layer)] - cudnn.kept_bytes[block_unit(layer)],
                checkpointing ? 0 : saved);
    EXPECT_EQ(tiled.recompute_bytes - cudnn.recompute_bytes, checkpointing ? saved : 0);
    EXPECT_EQ(tiled.workspace_bytes, cudnn.workspace_bytes);
    EXPECT_EQ(tiled.total_bytes() - cudnn.total_bytes(),
              checkpointing ? saved : saved * std::size_t(cudnn_config.n_layer));
  }
}

}  // namespace
}  // namespace zero::gpt2
