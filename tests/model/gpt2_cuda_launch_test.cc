// Every CUDA kernel's launch at real shapes (GPT-2 124M and 1.5B, B = 16, T = 1024; the Llama
// family's at Llama 3.1 8B and 3.2 1B), computed by the launch-configuration functions the
// launchers call (layers_body.h, llama_body.h, rows_body.h,
// elementwise_body.h, optimizer_body.h), within an H100's limits: block at most 1024 threads and
// (1024, 1024, 64), grid at most (2³¹ - 1, 65535, 65535), static shared memory at most 48 KiB (only
// the tiled attention opts in to more: dynamic, at most 227 KiB, with room for its blocks per SM),
// whole warps where a body shuffles, and a grid that covers the work of every kernel that is not
// a grid-stride loop. And the optimizer's vector loads: for the shard chunks the engine hands the
// CUDA step (GPT-2's unit layouts, worlds 1 to 64, shard alignment 16 elements, device bases
// 256-byte aligned as cudaMalloc's), every array is aligned for the 4-wide path.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attention_flash_body.h"
#include "elementwise_body.h"
#include "layers_body.h"
#include "llama_body.h"
#include "optimizer_body.h"
#include "rows_body.h"
#include "zero/core/flat_buffer.h"
#include "zero/gpt2/config.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using kernels::LaunchConfig;

// H100 (sm_90) limits, cudaDeviceProp's names.
constexpr std::uint64_t kMaxThreadsPerBlock = 1024;
constexpr kernels::KernelDim kMaxBlockDim{1024, 1024, 64};
constexpr kernels::KernelDim kMaxGridSize{2147483647u, 65535, 65535};
constexpr std::size_t kSharedMemoryPerBlock = 48 * 1024;  // without cudaFuncSetAttribute opt-in

struct Launch {
  std::string name;
  LaunchConfig config;
  std::size_t static_shared_bytes = 0;
  bool shuffles = false;        // the body uses warp primitives
  std::uint64_t covers = 0;     // work items the grid must reach (0: a grid-stride loop)
  std::uint64_t per_block = 0;  // work items per block (0: one per thread)
};

void check(const Launch& launch) {
  SCOPED_TRACE(launch.name);
  const LaunchConfig& c = launch.config;
  EXPECT_LE(c.block.count(), kMaxThreadsPerBlock);
  EXPECT_GE(c.block.count(), 1u);
  EXPECT_LE(c.block.x, kMaxBlockDim.x);
  EXPECT_LE(c.block.y, kMaxBlockDim.y);
  EXPECT_LE(c.block.z, kMaxBlockDim.z);
  EXPECT_GE(c.grid.x, 1u);
  EXPECT_LE(c.grid.x, kMaxGridSize.x);
  EXPECT_LE(c.grid.y, kMaxGridSize.y);
  EXPECT_LE(c.grid.z, kMaxGridSize.z);
  EXPECT_LE(launch.static_shared_bytes + c.dynamic_shared_bytes, kSharedMemoryPerBlock);
  if (launch.shuffles) {
    EXPECT_EQ(c.block.count() % kernels::kWarpSize, 0u) << "a shuffling body needs whole warps";
  }
  if (launch.covers > 0) {
    const std::uint64_t per_block = launch.per_block > 0 ? launch.per_block : c.block.count();
    EXPECT_GE(c.grid.count() * per_block, launch.covers) << "the grid drops work";
  }
}

std::vector<Launch> gpt2_launches(const GPT2Config& config, std::int64_t B, std::int64_t T) {
  const std::int64_t C = config.n_embd, NH = config.n_head, H = config.hidden_size();
  const std::int64_t Vp = config.padded_vocab_size(), N = B * T;
  const auto u = [](std::int64_t value) { return static_cast<std::uint64_t>(value); };
  std::vector<Launch> launches = {
      {"encoder_forward", cuda::elementwise_launch(N * C), 0, false, u(N * C)},
      // At most one bucket per row: N·C work items.
      {"encoder_wte_backward", cuda::elementwise_launch(N * C), 0, false, u(N * C)},
      {"encoder_wpe_backward", cuda::elementwise_launch(T * C), 0, false, u(T * C)},
      // Embedding rows (rows_body.h): at most every row of the padded vocabulary.
      {"widen_rows and accumulate_rows", cuda::rows_launch(Vp, C), 0, false, u(Vp * C)},
      {"copy_rows", cuda::rows_launch(B, C), 0, false, u(B * C)},
      {"layernorm_forward", cuda::row_warp_launch(N), 0, true, u(N), cuda::kRowsPerBlock},
      {"layernorm_backward_input", cuda::row_warp_launch(N), 0, true, u(N), cuda::kRowsPerBlock},
      {"residual_dropout", cuda::elementwise_launch(N * C), 0, false, u(N * C)},
      {"gelu", cuda::elementwise_launch(N * H), 0, false, u(N * H)},
      {"crossentropy", cuda::row_block_launch(N), sizeof(cuda::CrossentropyShared), true, u(N), 1},
      {"attention_forward", cuda::row_warp_launch(B * NH * T), 0, true, u(B * NH * T),
       cuda::kRowsPerBlock},
      {"attention_dqkv", cuda::elementwise_launch(N * C), 0, false, u(N * C)},
      // The tiled backward's row terms D = dout · out: a warp per (b, t, h).
      {"attention_delta", cuda::flash_delta_launch(B, T, NH), 0, true, u(B * T * NH),
       cuda::kRowsPerBlock},
  };
  // Column sums of every parameter gradient's bias / layer norm: OC columns over N rows.
  for (std::int64_t OC : {C, 3 * C, H, Vp}) {
    const LaunchConfig partials = cuda::column_partials_launch(N, OC);
    launches.push_back({"column_partials OC " + std::to_string(OC), partials,
                        sizeof(cuda::ColumnPartialsShared<2>), false, 0});
    EXPECT_GE(std::uint64_t{partials.grid.x} * cuda::kColumnLanes, u(OC));
    EXPECT_GE(std::uint64_t{partials.grid.y} * cuda::kRowChunk, u(N));
    launches.push_back(
        {"add_partials OC " + std::to_string(OC), cuda::elementwise_launch(OC), 0, false, u(OC)});
  }
  // The engine's elementwise operations and optimizer passes over a whole model's parameters.
  std::size_t params = 0;
  for (const UnitSpec& unit : gpt2_units(config)) params += unit.num_elements();
  for (bool vectorized : {false, true}) {
    launches.push_back({"optimizer", zero::optim::cuda::optimizer_launch(params, vectorized),
                        sizeof(zero::optim::cuda::LambSumsShared), false, 0});
  }
  launches.push_back({"elementwise and convert", kernels::grid_stride_launch(params),
                      sizeof(kernels::SquaresShared), false, 0});
  return launches;
}

GPT2Config gpt2_124m() { return GPT2Config{}; }
GPT2Config gpt2_1558m() {
  GPT2Config config;
  config.n_embd = 1600, config.n_layer = 48, config.n_head = 25;
  return config;
}

TEST(Gpt2CudaLaunch, EveryKernelFitsAnH100AtRealShapes) {
  for (const GPT2Config& config : {gpt2_124m(), gpt2_1558m()}) {
    SCOPED_TRACE(::testing::Message() << "C " << config.n_embd << " L " << config.n_layer);
    for (const Launch& launch : gpt2_launches(config, 16, 1024)) check(launch);
  }
}

// The Llama family's (llama_body.h): RMSNorm's row passes and dweight's column sums, the rotary
// pairs of the q and k heads, SwiGLU, at Llama 3.1 8B's and 3.2 1B's shapes (GQA: 32 query and 8
// key/value heads), B 16 × T 1024 and one sequence of 8192.
TEST(Gpt2CudaLaunch, EveryLlamaKernelFitsAnH100AtRealShapes) {
  struct LlamaShape {
    std::int64_t C, H, NH, NKV, HS;
  };
  const auto u = [](std::int64_t value) { return static_cast<std::uint64_t>(value); };
  for (const LlamaShape& m :
       {LlamaShape{4096, 14336, 32, 8, 128}, LlamaShape{2048, 8192, 32, 8, 64}})
    for (const auto& [B, T] : {std::pair<std::int64_t, std::int64_t>{16, 1024}, {1, 8192}}) {
      SCOPED_TRACE(::testing::Message() << "C " << m.C << " B " << B << " T " << T);
      const std::int64_t N = B * T, pairs = N * (m.NH + m.NKV) * (m.HS / 2);
      const Launch launches[] = {
          {"rmsnorm_forward", cuda::row_warp_launch(N), 0, true, u(N), cuda::kRowsPerBlock},
          {"rmsnorm_backward_input", cuda::row_warp_launch(N), 0, true, u(N), cuda::kRowsPerBlock},
          {"rmsnorm dweight partials", cuda::column_partials_launch(N, m.C),
           sizeof(cuda::ColumnPartialsShared<cuda::RmsnormTerms::kOutputs>), false, 0},
          {"rope", cuda::elementwise_launch(pairs), 0, false, u(pairs)},
          {"swiglu", cuda::elementwise_launch(N * m.H), 0, false, u(N * m.H)},
      };
      for (const Launch& launch : launches) check(launch);
    }
}

// A launch past the hardware's limits is caught (the check above is not vacuous).
TEST(Gpt2CudaLaunch, TheLimitsCatchAnOversizedLaunch) {
  // 2^26 rows: 2^18 row chunks in grid.y.
  const Launch rows{"rows", cuda::column_partials_launch(std::int64_t{1} << 26, 768), 0, false, 0};
  EXPECT_NONFATAL_FAILURE(check(rows), "kMaxGridSize.y");
  const Launch shared{"shared", kernels::linear_launch(1, 256), 64 * 1024, false, 0};
  EXPECT_NONFATAL_FAILURE(check(shared), "kSharedMemoryPerBlock");
  const Launch capped{"capped", cuda::elementwise_launch(std::int64_t{1} << 40), 0, false,
                      std::uint64_t{1} << 40};
  EXPECT_NONFATAL_FAILURE(check(capped), "the grid drops work");
}

// The tiled attention (attention_flash.cu) opts in to dynamic shared memory past 48 KiB: at most
// an H100's 227 KiB per block, and for heads up to 64 two blocks per SM (its launch bounds) within
// the SM's 228 KiB, 1 KiB reserved per block.
template <int HP>
void check_tiled_attention(std::int64_t B, std::int64_t T, std::int64_t NH) {
  using Shared = cuda::FlashShared<HP>;
  constexpr std::size_t kOptInPerBlock = 227 * 1024, kPerSM = 228 * 1024, kReserved = 1024;
  for (int floats : {Shared::kForward, Shared::kKeys, Shared::kQueries}) {
    const LaunchConfig config = cuda::flash_launch(B, T, NH, floats);
    SCOPED_TRACE(::testing::Message() << "HP " << HP << " floats " << floats);
    Launch launch{"tiled attention", config, 0, true, 0};
    launch.config.dynamic_shared_bytes = 0;  // checked against the opt-in limit below
    check(launch);
    EXPECT_LE(config.dynamic_shared_bytes, kOptInPerBlock);
    if (HP <= 64) {
      EXPECT_LE(2 * (config.dynamic_shared_bytes + kReserved), kPerSM);
    }
    EXPECT_GE(std::uint64_t{config.grid.x} * cuda::kFlashTile, static_cast<std::uint64_t>(T));
    EXPECT_EQ(config.grid.y, static_cast<unsigned>(B * NH));
  }
}

TEST(Gpt2CudaLaunch, TiledAttentionFitsAnH100AtRealShapes) {
  for (const GPT2Config& config : {gpt2_124m(), gpt2_1558m()}) {
    ASSERT_EQ(cuda::flash_head_bucket(config.n_embd / config.n_head), 64);
    check_tiled_attention<64>(16, 1024, config.n_head);
  }
  check_tiled_attention<16>(16, 1024, 64);
  check_tiled_attention<32>(16, 1024, 32);
  check_tiled_attention<128>(16, 1024, 25);
}

// The one-pass layer norm backward: a block per chunk of kNormRows rows, whole warps, its warps'
// (dweight, dbias) rows in dynamic shared memory within the opt-in limit (the launcher falls back
// to two passes past the device's limit), and the chunk table's column sums within the grid.
TEST(Gpt2CudaLaunch, LayernormBackwardFitsAnH100AtRealShapes) {
  constexpr std::size_t kOptInPerBlock = 227 * 1024;
  for (const GPT2Config& config : {gpt2_124m(), gpt2_1558m()}) {
    const std::int64_t N = 16 * 1024, C = config.n_embd;
    SCOPED_TRACE(::testing::Message() << "C " << C);
    const LaunchConfig fused = cuda::layernorm_backward_launch(N, C);
    Launch launch{"layernorm_backward",
                  fused,
                  0,
                  true,
                  static_cast<std::uint64_t>(N),
                  static_cast<std::uint64_t>(cuda::kNormRows)};
    launch.config.dynamic_shared_bytes = 0;  // checked against the opt-in limit below
    check(launch);
    EXPECT_EQ(fused.dynamic_shared_bytes, cuda::kNormWarps * 2 * C * sizeof(float));
    EXPECT_LE(fused.dynamic_shared_bytes, kOptInPerBlock);
    EXPECT_EQ(fused.block.count(),
              static_cast<std::uint64_t>(cuda::kNormWarps * kernels::kWarpSize));
    // At least three blocks (12 warps) for each of an H100's 132 SMs: the chunks keep it busy.
    EXPECT_GE(fused.grid.count(), 3u * 132u);
    const std::int64_t chunks = cuda::norm_chunks(N);
    check({"layernorm_backward chunk sums", cuda::column_partials_launch(chunks, 2 * C),
           sizeof(cuda::ColumnPartialsShared<1>), false, 0});
  }
  // GPT-2 up to C = 7,264 takes the one-pass kernel on an H100.
  EXPECT_LE(cuda::layernorm_backward_shared_bytes(7264), kOptInPerBlock);
  EXPECT_GT(cuda::layernorm_backward_shared_bytes(7265), kOptInPerBlock);
}

TEST(Gpt2CudaLaunch, OptimizerArraysOfEveryShardTakeTheVectorPath) {
  constexpr std::size_t kAlignmentElements = 16;    // EngineOptions::alignment_elements
  constexpr std::uintptr_t kBase = 0x7f0000000000;  // 256-byte aligned, as cudaMalloc's
  for (const GPT2Config& config : {gpt2_124m(), gpt2_1558m()}) {
    const std::vector<UnitSpec> units = gpt2_units(config);
    for (int world : {1, 2, 3, 4, 8, 64}) {
      for (const UnitSpec& unit : {units.front(), units[1], units.back()}) {
        SCOPED_TRACE(::testing::Message()
                     << "C " << config.n_embd << " world " << world << " " << unit.name);
        const FlatLayout layout(unit.tensors, world, kAlignmentElements);
        for (int rank = 0; rank < world; ++rank) {
          const ElementRange shard = layout.shard(rank);
          // The shard chunk: params, grads (fp32 or bf16), state = [exp_avg | exp_avg_sq] and
          // the 16-bit copy, each from its own device buffer at the shard's offset.
          zero::optim::cuda::OptimizerArrays a;
          a.params = reinterpret_cast<float*>(kBase) + shard.begin;
          a.state0 = reinterpret_cast<float*>(kBase);
          a.state1 = a.state0 + shard.size();
          a.params_16bit = reinterpret_cast<std::uint16_t*>(kBase) + shard.begin;
          a.count = shard.size();
          for (DType grads : {DType::kFloat32, DType::kBFloat16}) {
            a.grads_dtype = grads;
            a.grads = grads == DType::kFloat32
                          ? static_cast<const void*>(reinterpret_cast<float*>(kBase) + shard.begin)
                          : reinterpret_cast<std::uint16_t*>(kBase) + shard.begin;
            ASSERT_TRUE(zero::optim::cuda::vectorizable(a)) << "rank " << rank;
          }
          // Lamb's passes start at every tensor boundary inside the shard.
          for (const TensorSlot& slot : layout.slots()) {
            if (slot.offset_elements <= shard.begin || slot.offset_elements >= shard.end) continue;
            EXPECT_EQ((slot.offset_elements - shard.begin) % zero::optim::cuda::kVector, 0u)
                << slot.name;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace zero::gpt2
