// GPT2Compute on the CUDA device context against GPT2Compute on the CPU one (the oracle): the
// same tiny GPT-2, tokens and dropout keys; loss, logits and every unit's gradients compared.
// The model goes through the kernel seam (kernels.h: make_kernels picks the CUDA kernels), its
// activations in the context's ledger, tokens uploaded through pinned memory, the loss read back
// once. Label cuda: skips without a device. Tolerances, relative to the largest magnitude of each
// tensor: fp32 1e-3 (GPU sums run in other orders, cuBLASLt's GELU epilogue has its own tanh;
// TF32 off), bf16 parameters 5e-2 (the GPU rounds activations to bf16 in every GEMM; the CPU
// does so only with native bf16 kernels). Each compared tensor's error is printed beside its bound
// ("measured: ...", tests/common/measured.h) for the GPU log. The CUDA Kernels' row operations
// (widen_rows, accumulate_rows, copy_rows) equal the CPU Kernels' bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "../common/measured.h"
#include "../common/random_inputs.h"
#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/core/stream.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/sampling.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

using zero::testing::print_measured;
using zero::testing::random_vector;

class GPT2ComputeCudaTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cuda_ = make_cuda_context(0);
  }
  void expect_matches_the_cpu_compute(const GPT2Config& config);
  void expect_activations_as_planned(const GPT2Config& config, std::int64_t B, std::int64_t T,
                                     DType dtype);
  MemoryLedger ledger_;
  HostAllocator host_{ledger_};
  std::unique_ptr<DeviceContext> cpu_ = make_cpu_context();
  std::unique_ptr<DeviceContext> cuda_;
};

// Max |actual - expected| over max |expected| (a floor of 1e-6 for all-zero tensors).
double relative_error(const std::vector<float>& actual, const std::vector<float>& expected) {
  double difference = 0.0, magnitude = 1e-6;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    difference = std::max(difference, std::abs(double(actual[i]) - double(expected[i])));
    magnitude = std::max(magnitude, std::abs(double(expected[i])));
  }
  return difference / magnitude;
}

// relative_error(actual, expected) under `bound`, the error printed beside the bound.
void expect_error_below(const std::vector<float>& actual, const std::vector<float>& expected,
                        double bound, const std::string& what) {
  const double error = relative_error(actual, expected);
  print_measured(what, error, bound);
  EXPECT_LT(error, bound) << what;
}

// Whether the CUDA kernels run cuDNN's attention on heads of C / NH channels for the tests' B 3,
// T 11 with `dtype` parameters: bf16, and this build plans cuDNN's workspace for those heads.
bool cuda_attention_uses_cudnn(DType dtype, std::int64_t C, std::int64_t NH) {
  return dtype == DType::kBFloat16 &&
         attention_layout(DeviceKind::kCuda, 3, 11, C, NH, DType::kBFloat16)
                 .library_workspace_bytes > 0;
}

// `values` (fp32, host) converted to `dtype` and back, as the device holds them.
std::vector<std::uint16_t> to_16(const float* values, std::size_t count, DType dtype) {
  std::vector<std::uint16_t> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = dtype == DType::kBFloat16 ? to_bf16(values[i]).bits : to_fp16(values[i]).bits;
  return out;
}

// The device's activations in the ledger: the planned layout (padded to 16 elements) and the
// uploaded inputs (3·N ints).
void GPT2ComputeCudaTest::expect_activations_as_planned(const GPT2Config& config, std::int64_t B,
                                                        std::int64_t T, DType dtype) {
  const ActivationPlan plan =
      GPT2Compute::plan(config, B, T, {.param_dtype = dtype, .device = DeviceKind::kCuda});
  const std::int64_t planned =
      static_cast<std::int64_t>(plan.total_bytes() - plan.workspace_bytes) + 3 * B * T * 4;
  const std::int64_t activations =
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kActivations).current_bytes;
  EXPECT_GE(activations, planned);
  EXPECT_LT(activations, planned + 64);
}

// The CUDA compute of `config` against the CPU one: loss, logits, every gradient; the activations
// in the ledger as GPT2Compute::plan planned them (qkv and atty in attention_io_dtype).
void GPT2ComputeCudaTest::expect_matches_the_cpu_compute(const GPT2Config& config) {
  const DType dtype = GetParam();
  const std::int64_t B = 3, T = 11, N = B * T, Vp = config.padded_vocab_size();
  GPT2Model model(config, host_);
  model.init(5);
  const auto tokens = sequence(N, config.vocab_size, 1),
             targets = sequence(N, config.vocab_size, 2);
  const DropoutKey key{.seed = 9, .step = 3, .sample_offset = 0, .training = true};
  const ComputeOptions options{.param_dtype = dtype};

  // The oracle: the CPU compute over the same parameters in the same dtype.
  std::vector<std::vector<std::uint16_t>> params16(model.num_units());
  std::vector<std::vector<float>> grads_cpu(model.num_units());
  GPT2Compute cpu(config, B, T, *cpu_, host_, options);
  // Parameters and gradients on the device, in `dtype` and fp32 respectively.
  Allocator& device = cuda_->allocator(MemorySpace::kDevice);
  Stream& stream = cuda_->compute_stream();
  std::vector<Buffer> params(model.num_units()), grads(model.num_units());
  for (int u = 0; u < model.num_units(); ++u) {
    const std::size_t count = model.params(u).layout().num_elements();
    grads_cpu[u].assign(count, 0.0f);
    params[u] = device.allocate(count * size_of(dtype), MemoryCategory::kParams);
    grads[u] = device.allocate(count * sizeof(float), MemoryCategory::kGrads);
    if (dtype == DType::kFloat32) {
      cuda_->copy(stream, model.param_data(u), params[u].data(), count * sizeof(float));
    } else {
      params16[u] = to_16(model.param_data(u), count, dtype);
      cuda_->copy(stream, params16[u].data(), params[u].data(), count * 2);
    }
    cuda_->fill(stream, grads[u].data(), DType::kFloat32, count, 0.0f);
  }
  auto p = [&](int u) -> ConstUnitData {
    if (dtype == DType::kFloat32) return {model.param_data(u), dtype};
    return {params16[u].data(), dtype};
  };
  // The forward's logits, read before the backward (which may overwrite them with dlogits).
  auto read_logits = [&](GPT2Compute& compute, std::vector<float>& logits) {
    logits.resize(static_cast<std::size_t>(N * Vp));
    if (compute.runs_on_host()) {
      std::copy(compute.logits(), compute.logits() + N * Vp, logits.begin());
      return;
    }
    // CUDA with bf16 parameters keeps bf16 logits (logits_dtype): widened here.
    const DType stored_dtype = compute.logits_dtype();
    std::vector<std::uint16_t> stored(stored_dtype == DType::kFloat32 ? 0 : logits.size());
    void* host =
        stored_dtype == DType::kFloat32 ? static_cast<void*>(logits.data()) : stored.data();
    cuda_->copy(stream, compute.logits_data(), host, logits.size() * size_of(stored_dtype));
    stream.synchronize();
    if (stored_dtype != DType::kFloat32)
      convert(stored.data(), stored_dtype, logits.data(), DType::kFloat32, logits.size());
  };
  auto run = [&](GPT2Compute& compute, auto param, auto grad, std::vector<float>& logits) {
    compute.set_inputs(tokens, targets, key);
    compute.forward_embeddings(param(embeddings_unit()));
    for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, param(block_unit(l)));
    const int norm = final_norm_unit(config), head = head_unit(config);
    compute.forward_head(param(norm), param(head));
    const float loss = compute.loss();
    read_logits(compute, logits);
    compute.backward_head(param(norm), param(head), grad(norm), grad(head));
    for (int l = config.n_layer - 1; l >= 0; --l)
      compute.backward_block(l, param(block_unit(l)), grad(block_unit(l)));
    compute.backward_embeddings(param(embeddings_unit()), grad(embeddings_unit()));
    return loss;
  };
  std::vector<float> cpu_logits, logits;
  const float cpu_loss = run(
      cpu, p,
      [&](int u) -> UnitData {
        return {grads_cpu[u].data(), DType::kFloat32};
      },
      cpu_logits);

  GPT2Compute gpu(config, B, T, *cuda_, options);
  EXPECT_EQ(gpu.kernels().backend(), "cuda");
  EXPECT_FALSE(gpu.runs_on_host());
  EXPECT_EQ(gpu.logits_dtype(), dtype == DType::kBFloat16 ? DType::kBFloat16 : DType::kFloat32);
  if (gpu.logits_dtype() != DType::kFloat32) {
    EXPECT_THROW(gpu.logits(), Error);
  }
  expect_activations_as_planned(config, B, T, dtype);
  const std::int64_t resident_workspace =  // GPT2Compute's own; the kernels' scratch comes on top
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).current_bytes;
  const float gpu_loss = run(
      gpu,
      [&](int u) -> ConstUnitData {
        return {params[u].data(), dtype};
      },
      [&](int u) -> UnitData {
        return {grads[u].data(), DType::kFloat32};
      },
      logits);
  const double tolerance = dtype == DType::kFloat32 ? 1e-3 : 5e-2;
  print_measured("loss", std::abs(gpu_loss - cpu_loss) / std::abs(cpu_loss), tolerance);
  EXPECT_NEAR(gpu_loss, cpu_loss, tolerance * std::abs(cpu_loss));
  EXPECT_EQ(gpu.num_counted_targets(), cpu.num_counted_targets());
  // The backward's device scratch (gradient partial sums, the token table) came from the
  // context's allocator, so it is in the ledger, and all of it was released.
  stream.synchronize();
  const LedgerEntry workspace =
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace);
  EXPECT_GT(workspace.peak_bytes, resident_workspace);
  EXPECT_EQ(workspace.current_bytes, resident_workspace);

  // The logits as the forward left them (dlogits are checked through the embedding's gradient:
  // with 16-bit parameters the CUDA backward never writes fp32 dlogits).
  expect_error_below(logits, cpu_logits, tolerance, "logits");
  for (int u = 0; u < model.num_units(); ++u) {
    std::vector<float> grad(grads_cpu[u].size());
    cuda_->copy(stream, grads[u].data(), grad.data(), grad.size() * sizeof(float));
    stream.synchronize();
    expect_error_below(grad, grads_cpu[u], tolerance, "unit " + model.units()[u].name);
  }
}

// GPT2Config's dropout (attn_pdrop 0.1): the tiled fp32 attention, qkv and atty fp32.
TEST_P(GPT2ComputeCudaTest, MatchesTheCpuComputeOnLossLogitsAndGradients) {
  expect_matches_the_cpu_compute(tiny_config());
}

// The Llama family (tiny_llama_config: a Qwen2 with 4 query heads on 2 key/value heads, RoPE,
// SwiGLU, q/k/v biases, an untied head): RMSNorm, nn.Linear's [out, in] weights in the GEMMs,
// RoPE, repeat_kv and SwiGLU on the CUDA kernels against the CPU compute.
TEST_P(GPT2ComputeCudaTest, LlamaFamilyMatchesTheCpuCompute) {
  expect_matches_the_cpu_compute(tiny_llama_config());
}

// The Llama family with ZERO_CUDNN_NATIVE_GQA=1 and heads of 8 channels (which cuDNN takes): with
// bf16 parameters the attention runs on cuDNN without repeating k and v (the kernels say so on
// stderr), the CPU repeating them, within the same bounds; with fp32 parameters the switch
// changes nothing.
TEST_P(GPT2ComputeCudaTest, LlamaFamilyWithNativeGroupedQueryAttentionMatchesTheCpuCompute) {
  struct NativeGroupedQueryAttention {
    NativeGroupedQueryAttention() { setenv("ZERO_CUDNN_NATIVE_GQA", "1", 1); }
    ~NativeGroupedQueryAttention() { unsetenv("ZERO_CUDNN_NATIVE_GQA"); }
  } native;
  ::testing::internal::CaptureStderr();
  expect_matches_the_cpu_compute(tiny_llama_config({.n_embd = 32, .n_head = 4}));
  const std::string said = ::testing::internal::GetCapturedStderr();
  const bool cudnn = cuda_attention_uses_cudnn(GetParam(), 32, 4);
  EXPECT_EQ(said.find("on cuDNN without repeating k and v") != std::string::npos, cudnn) << said;
}

// No attention dropout: with bf16 parameters cuDNN's SDPA runs the attention (heads of 8 channels)
// and qkv and atty are bf16 (attention_io_dtype), written by the qkv GEMM and cuDNN, read by cuDNN
// and the projection's GEMM without a rounding pass.
TEST_P(GPT2ComputeCudaTest, MatchesTheCpuComputeWithoutAttentionDropout) {
  GPT2Config config = tiny_config();
  config.attn_pdrop = 0.0;
  EXPECT_EQ(attention_io_dtype(DeviceKind::kCuda, GetParam(), config.n_embd, config.n_head, 0.0),
            cuda_attention_uses_cudnn(GetParam(), config.n_embd, config.n_head) ? DType::kBFloat16
                                                                                : DType::kFloat32);
  expect_matches_the_cpu_compute(config);
}

// zero generate's path (sampling.h): the parameters copied to the GPU once, in fp32 or bf16
// (pinned staging, the device not host-addressable), each token's logits read back. The logits
// within the tolerances above of the CPU's over the same parameter dtype; greedy fp32 tokens the
// same (at init 31 the top two logits of each of the 5 steps differ by 39-56 % of the largest
// magnitude on the CPU, far above the tolerance).
TEST_P(GPT2ComputeCudaTest, NextTokenLogitsAndGreedyGenerationMatchTheCpu) {
  const DType dtype = GetParam();
  const GPT2Config config = tiny_config();
  GPT2Model model(config, host_);
  model.init(31);
  const std::vector<int> prompt = {3, 1, 4, 1, 5, 9, 2};
  NextTokenLogits on_cpu(model, *cpu_, 12, dtype), on_gpu(model, *cuda_, 12, dtype);
  expect_error_below(on_gpu(prompt), on_cpu(prompt), dtype == DType::kFloat32 ? 1e-3 : 5e-2,
                     "next-token logits");
  EXPECT_GT(cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kParams).peak_bytes, 0);
  if (dtype == DType::kFloat32) {
    EXPECT_EQ(generate(model, *cuda_, prompt, 5, {}, {}, dtype),
              generate(model, *cpu_, prompt, 5, {}, {}, dtype));
  }
}

INSTANTIATE_TEST_SUITE_P(ParameterDtypes, GPT2ComputeCudaTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const auto& test) { return std::string(name_of(test.param)); });

// The row operations' tests, over fp32, bf16 and fp16 tables.
class GPT2KernelRowsCudaTest : public GPT2ComputeCudaTest {
 protected:
  // `bytes` of host data on the device (the context's allocator, copied on the compute stream).
  Buffer upload(const void* data, std::size_t bytes) {
    Buffer buffer = cuda_->allocator(MemorySpace::kDevice).allocate(bytes, MemoryCategory::kParams);
    cuda_->copy(cuda_->compute_stream(), data, buffer.data(), bytes);
    return buffer;
  }
  void expect_rows_match(std::int64_t V, std::int64_t U, std::int64_t C);
  // `bytes` of device data read back once the compute stream has run.
  std::vector<unsigned char> download(const void* data, std::size_t bytes) {
    std::vector<unsigned char> host(bytes);
    cuda_->copy(cuda_->compute_stream(), data, host.data(), bytes);
    cuda_->compute_stream().synchronize();
    return host;
  }
};

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
  std::vector<unsigned char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// One launch per operation (CudaKernels), against the CPU Kernels: U of a table's V rows of C, in
// random order. The host row array is overwritten as soon as each call returns (the upload must
// have staged it), and the uploads' buffers are in the ledger and released.
void GPT2KernelRowsCudaTest::expect_rows_match(std::int64_t V, std::int64_t U, std::int64_t C) {
  SCOPED_TRACE(::testing::Message() << "V " << V << " U " << U << " C " << C);
  const DType dtype = GetParam();
  const std::size_t element = size_of(dtype);
  const std::unique_ptr<Kernels> gpu = make_kernels(*cuda_), cpu = make_kernels(*cpu_);
  ASSERT_EQ(gpu->backend(), "cuda");
  Stream& stream = cuda_->compute_stream();
  Stream& host_stream = cpu_->compute_stream();
  std::vector<int> all(static_cast<std::size_t>(V));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), std::mt19937(3));
  const std::vector<int> rows(all.begin(), all.begin() + U);
  std::mt19937 generator(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(V * C)), in(static_cast<std::size_t>(U * C));
  for (float& value : values) value = normal(generator);
  for (float& value : in) value = 0.1f * normal(generator);
  std::vector<unsigned char> table(values.size() * element);
  convert(values.data(), DType::kFloat32, table.data(), dtype, values.size());
  const std::int64_t pinned_before =
      cuda_->ledger().entry(MemorySpace::kHostPinned, MemoryCategory::kWorkspace).current_bytes;
  const std::int64_t device_before =
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).current_bytes;

  Buffer device_table = upload(table.data(), table.size());
  Buffer device_in = upload(in.data(), in.size() * sizeof(float));
  Buffer out = cuda_->allocator(MemorySpace::kDevice)
                   .allocate(in.size() * sizeof(float), MemoryCategory::kActivations);
  stream.synchronize();  // the uploads have read `table`, which the CPU updates below
  std::vector<int> host_rows = rows;
  gpu->widen_rows(stream, out.data_as<float>(), device_table.data(), dtype, host_rows.data(), U, C);
  std::fill(host_rows.begin(), host_rows.end(), 0);
  host_rows = rows;
  gpu->accumulate_rows(stream, device_table.data(), dtype, device_in.data_as<float>(),
                       host_rows.data(), U, C);
  std::fill(host_rows.begin(), host_rows.end(), 0);

  std::vector<float> widened(in.size());
  cpu->widen_rows(host_stream, widened.data(), table.data(), dtype, rows.data(), U, C);
  cpu->accumulate_rows(host_stream, table.data(), dtype, in.data(), rows.data(), U, C);
  host_stream.synchronize();
  EXPECT_TRUE(download(out.data(), out.size_bytes()) == bytes_of(widened)) << "widen_rows";
  EXPECT_TRUE(download(device_table.data(), table.size()) == table) << "accumulate_rows";

  if (dtype == DType::kFloat32) {  // copy_rows: fp32 rows, int64 indices
    std::vector<std::int64_t> wide(rows.begin(), rows.end());
    for (bool scatter : {false, true}) {
      SCOPED_TRACE(scatter ? "copy_rows scatter" : "copy_rows gather");
      const std::size_t out_count = static_cast<std::size_t>(scatter ? V * C : U * C);
      const std::vector<float> source(scatter ? in : values), initial(out_count, -7.0f);
      Buffer device_source = upload(source.data(), source.size() * sizeof(float));
      Buffer copied = upload(initial.data(), out_count * sizeof(float));
      std::vector<std::int64_t> host_wide = wide;
      gpu->copy_rows(stream, copied.data_as<float>(), device_source.data_as<float>(),
                     host_wide.data(), U, C, scatter);
      std::fill(host_wide.begin(), host_wide.end(), 0);
      std::vector<float> expected = initial;
      cpu->copy_rows(host_stream, expected.data(), source.data(), wide.data(), U, C, scatter);
      host_stream.synchronize();
      EXPECT_TRUE(download(copied.data(), copied.size_bytes()) == bytes_of(expected));
    }
  }
  std::vector<int> negative = rows;
  negative[5] = -1;
  EXPECT_THROW(gpu->widen_rows(stream, out.data_as<float>(), device_table.data(), dtype,
                               negative.data(), U, C),
               Error);
  stream.synchronize();
  const LedgerEntry pinned =
      cuda_->ledger().entry(MemorySpace::kHostPinned, MemoryCategory::kWorkspace);
  EXPECT_GT(pinned.peak_bytes, pinned_before);
  EXPECT_EQ(pinned.current_bytes, pinned_before);
  EXPECT_EQ(cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).current_bytes,
            device_before);
}

// Odd sizes (C = 70, 257 rows over a block of 256 threads), and GPT-2 124M's C = 768 with the
// U = 4096 distinct tokens of a B 16 × T 1024 batch.
TEST_P(GPT2KernelRowsCudaTest, RowOperationsMatchTheCpuKernelsBitForBit) {
  expect_rows_match(301, 257, 70);
  expect_rows_match(8192, 4096, 768);
}

INSTANTIATE_TEST_SUITE_P(TableDtypes, GPT2KernelRowsCudaTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                         [](const auto& test) { return std::string(name_of(test.param)); });

// The kernel seam's linear backward of a linear whose forward ran the GELU epilogue (fc's: dout
// the gradient of gelu(out), gelu_preactivation the forward's out), over fp32, bf16 and fp16
// parameters, fp32 gradients, at N 300 (past a 256-row chunk), C 40, OC 72 (not a multiple of 32).
class GPT2KernelLinearCudaTest : public GPT2KernelRowsCudaTest {
 protected:
  static constexpr std::int64_t N = 300, C = 40, OC = 72;
  struct Outputs {
    std::vector<float> dinp, dweight, dbias, dout;
  };
  // One CUDA linear_backward on uploads of these values (dweight and dbias += from `dweight_`
  // and `dbias_`), with or without the GELU and the bias; what it wrote, and dout after it.
  Outputs cuda_linear_backward(const std::vector<float>& dout, bool gelu, bool bias);
  std::vector<float> floats(const Buffer& buffer, std::int64_t count) {
    std::vector<float> values(static_cast<std::size_t>(count));
    const auto bytes = download(buffer.data(), values.size() * sizeof(float));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return values;
  }
  Buffer upload(const std::vector<float>& values) {
    return GPT2KernelRowsCudaTest::upload(values.data(), values.size() * sizeof(float));
  }
  std::vector<unsigned char> weight_;  // (C, OC) in the parameters' dtype
  const std::vector<float> inp_ = random_vector(N * C, 13),
                           preactivation_ = random_vector(N * OC, 11, 3.0),
                           dweight_ = random_vector(C * OC, 15), dbias_ = random_vector(OC, 16);
};

GPT2KernelLinearCudaTest::Outputs GPT2KernelLinearCudaTest::cuda_linear_backward(
    const std::vector<float>& dout, bool gelu, bool bias) {
  const std::unique_ptr<Kernels> gpu = make_kernels(*cuda_);
  Buffer weight = GPT2KernelRowsCudaTest::upload(weight_.data(), weight_.size());
  Buffer inp = upload(inp_), d_dout = upload(dout), preactivation = upload(preactivation_),
         dweight = upload(dweight_), dbias = upload(dbias_), dinp = upload(inp_);
  const std::int64_t staged = N * std::max(C, OC);
  Allocator& device = cuda_->allocator(MemorySpace::kDevice);
  Buffer staged_a = device.allocate(staged * 2, MemoryCategory::kWorkspace),
         staged_b = device.allocate(staged * 2, MemoryCategory::kWorkspace);
  GemmScratch scratch;
  scratch.staged_a = staged_a.data();
  scratch.staged_b = staged_b.data();
  scratch.staged_a_elements = scratch.staged_b_elements = staged;
  gpu->linear_backward(cuda_->compute_stream(),
                       {dinp.data_as<float>(),
                        {dweight.data(), DType::kFloat32},
                        bias ? dbias.data_as<float>() : nullptr,
                        d_dout.data_as<float>(),
                        inp.data_as<const float>(),
                        {weight.data(), GetParam()},
                        N,
                        C,
                        OC,
                        gelu ? preactivation.data_as<const float>() : nullptr},
                       scratch);
  return {floats(dinp, N * C), floats(dweight, C * OC), floats(dbias, OC), floats(d_dout, N * OC)};
}

// CUDA: with a bias (16-bit: the one staged pass, gelu_bias_backward_staged) bit for bit the call
// given g = dout ⊙ gelu'(x) without the GELU (the unfused form), g being what the call without a
// bias leaves in dout (there CUDA applies GELU's backward in place, as LinearBackward allows);
// with 16-bit parameters the staged pass leaves dout as it was, with fp32 it holds g. Against the
// CPU Kernels' same call: relative to each tensor's largest magnitude, g 2e-5 (Eigen's tanh
// against tanhf), the rest 1e-4 with fp32 parameters, 5e-2 with 16-bit ones (the CPU may
// multiply by dout unrounded).
TEST_P(GPT2KernelLinearCudaTest, LinearBackwardAppliesGeluWhereItReadsDout) {
  const DType dtype = GetParam();
  const auto weight32 = random_vector(C * OC, 12, 0.5), dout = random_vector(N * OC, 14);
  weight_.resize(weight32.size() * size_of(dtype));
  convert(weight32.data(), DType::kFloat32, weight_.data(), dtype, weight32.size());
  const Outputs no_bias = cuda_linear_backward(dout, /*gelu=*/true, /*bias=*/false);
  const std::vector<float>& g = no_bias.dout;
  const Outputs unfused = cuda_linear_backward(g, /*gelu=*/false, /*bias=*/true);
  const Outputs fused = cuda_linear_backward(dout, /*gelu=*/true, /*bias=*/true);
  EXPECT_EQ(fused.dinp, unfused.dinp);
  EXPECT_EQ(fused.dweight, unfused.dweight);
  EXPECT_EQ(fused.dbias, unfused.dbias);
  EXPECT_EQ(no_bias.dinp, unfused.dinp);
  EXPECT_EQ(no_bias.dweight, unfused.dweight);
  EXPECT_EQ(no_bias.dbias, dbias_);
  EXPECT_EQ(fused.dout, dtype == DType::kFloat32 ? g : dout);

  const std::unique_ptr<Kernels> cpu = make_kernels(*cpu_);
  std::vector<float> dinp(N * C), dweight = dweight_, dbias = dbias_, cpu_dout = dout;
  std::vector<std::uint16_t> staged_a(N * std::max(C, OC)), staged_b(staged_a.size());
  GemmScratch scratch;
  scratch.staged_a = staged_a.data();
  scratch.staged_b = staged_b.data();
  scratch.staged_a_elements = scratch.staged_b_elements =
      static_cast<std::int64_t>(staged_a.size());
  cpu->linear_backward(cpu_->compute_stream(),
                       {dinp.data(),
                        {dweight.data(), DType::kFloat32},
                        dbias.data(),
                        cpu_dout.data(),
                        inp_.data(),
                        {weight_.data(), dtype},
                        N,
                        C,
                        OC,
                        preactivation_.data()},
                       scratch);
  cpu_->compute_stream().synchronize();
  const double tolerance = dtype == DType::kFloat32 ? 1e-4 : 5e-2;
  expect_error_below(g, cpu_dout, 2e-5, "g (the CPU applies it in place too)");
  expect_error_below(fused.dinp, dinp, tolerance, "dinp");
  expect_error_below(fused.dweight, dweight, tolerance, "dweight");
  expect_error_below(fused.dbias, dbias, tolerance, "dbias");
}

INSTANTIATE_TEST_SUITE_P(ParameterDtypes, GPT2KernelLinearCudaTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                         [](const auto& test) { return std::string(name_of(test.param)); });

}  // namespace
}  // namespace zero::gpt2
