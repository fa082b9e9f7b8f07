// GPT2Compute on the CUDA device context against GPT2Compute on the CPU one (the oracle): the
// same tiny GPT-2, tokens and dropout keys; loss, logits and every unit's gradients compared.
// The model goes through the kernel seam (kernels.h: make_kernels picks the CUDA kernels), its
// activations in the context's ledger, tokens uploaded through pinned memory, the loss read back
// once. Label cuda: skips without a device. Tolerances, relative to the largest magnitude of each
// tensor: fp32 1e-3 (GPU sums run in other orders, cuBLASLt's GELU epilogue has its own tanh;
// TF32 off), bf16 parameters 5e-2 (the GPU rounds activations to bf16 in every GEMM; the CPU
// does so only with native bf16 kernels).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/device.h"
#include "zero/core/device_context.h"
#include "zero/core/dtype.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

class GPT2ComputeCudaTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    cuda_ = make_cuda_context(0);
  }
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

// `values` (fp32, host) converted to `dtype` and back, as the device holds them.
std::vector<std::uint16_t> to_16(const float* values, std::size_t count, DType dtype) {
  std::vector<std::uint16_t> out(count);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = dtype == DType::kBFloat16 ? to_bf16(values[i]).bits : to_fp16(values[i]).bits;
  return out;
}

TEST_P(GPT2ComputeCudaTest, MatchesTheCpuComputeOnLossLogitsAndGradients) {
  const DType dtype = GetParam();
  const GPT2Config config = tiny_config();
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
  auto run = [&](GPT2Compute& compute, auto param, auto grad) {
    compute.set_inputs(tokens, targets, key);
    compute.forward_embeddings(param(embeddings_unit()));
    for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, param(block_unit(l)));
    compute.forward_head(param(final_norm_unit(config)), param(embeddings_unit()));
    const float loss = compute.loss();
    compute.backward_head(param(final_norm_unit(config)), param(embeddings_unit()),
                          grad(final_norm_unit(config)), grad(embeddings_unit()));
    for (int l = config.n_layer - 1; l >= 0; --l)
      compute.backward_block(l, param(block_unit(l)), grad(block_unit(l)));
    compute.backward_embeddings(param(embeddings_unit()), grad(embeddings_unit()));
    return loss;
  };
  const float cpu_loss = run(cpu, p, [&](int u) -> UnitData {
    return {grads_cpu[u].data(), DType::kFloat32};
  });
  const std::vector<float> cpu_logits(cpu.logits(), cpu.logits() + N * Vp);

  GPT2Compute gpu(config, B, T, *cuda_, options);
  EXPECT_EQ(gpu.kernels().backend(), "cuda");
  EXPECT_FALSE(gpu.runs_on_host());
  EXPECT_GT(cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kActivations).current_bytes,
            0);
  const std::int64_t resident_workspace =  // GPT2Compute's own; the kernels' scratch comes on top
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace).current_bytes;
  const float gpu_loss = run(
      gpu,
      [&](int u) -> ConstUnitData {
        return {params[u].data(), dtype};
      },
      [&](int u) -> UnitData {
        return {grads[u].data(), DType::kFloat32};
      });
  const double tolerance = dtype == DType::kFloat32 ? 1e-3 : 5e-2;
  EXPECT_NEAR(gpu_loss, cpu_loss, tolerance * std::abs(cpu_loss));
  EXPECT_EQ(gpu.num_counted_targets(), cpu.num_counted_targets());
  // The backward's device scratch (gradient partial sums, the token table) came from the
  // context's allocator, so it is in the ledger, and all of it was released.
  stream.synchronize();
  const LedgerEntry workspace =
      cuda_->ledger().entry(MemorySpace::kDevice, MemoryCategory::kWorkspace);
  EXPECT_GT(workspace.peak_bytes, resident_workspace);
  EXPECT_EQ(workspace.current_bytes, resident_workspace);

  std::vector<float> logits(static_cast<std::size_t>(N * Vp));
  // backward_head overwrote the logits with dlogits on both: compare those.
  cuda_->copy(stream, gpu.logits(), logits.data(), logits.size() * sizeof(float));
  stream.synchronize();
  EXPECT_LT(relative_error(logits, cpu_logits), tolerance) << "dlogits";
  for (int u = 0; u < model.num_units(); ++u) {
    std::vector<float> grad(grads_cpu[u].size());
    cuda_->copy(stream, grads[u].data(), grad.data(), grad.size() * sizeof(float));
    stream.synchronize();
    EXPECT_LT(relative_error(grad, grads_cpu[u]), tolerance) << "unit " << model.units()[u].name;
  }
}

INSTANTIATE_TEST_SUITE_P(ParameterDtypes, GPT2ComputeCudaTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const auto& test) { return std::string(name_of(test.param)); });

}  // namespace
}  // namespace zero::gpt2
