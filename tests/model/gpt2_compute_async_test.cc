// GPT2Compute's off-host path on the CPU: the CPU backend's asynchronous mode (model_runs_on_host()
// false), so the CPU kernels are tasks of the compute stream and the model
// takes the path the CUDA backend takes (inputs uploaded through pinned memory on the stream,
// losses copied back and awaited by loss(), the inputs' reuse ordered by an event). The same
// kernels run in the same order, so losses, logits and gradients equal the host path's bit for
// bit, under stream stress (random delays before each task) too. bf16 runs take bf16 parameters
// and gradients (the embeddings' rows widened and added by host row index).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "../common/tiny_gpt2.h"
#include "zero/core/allocator.h"
#include "zero/core/cpu_context.h"
#include "zero/core/cpu_stream.h"
#include "zero/core/device_context.h"
#include "zero/core/error.h"
#include "zero/core/memory_ledger.h"
#include "zero/gpt2/classifier.h"
#include "zero/gpt2/compute.h"
#include "zero/gpt2/kernels.h"
#include "zero/gpt2/model.h"
#include "zero/gpt2/units.h"

namespace zero::gpt2 {
namespace {

// The CPU backend with the model's kernels on its compute stream (the CUDA path's ordering).
std::unique_ptr<DeviceContext> make_async_context(std::uint64_t stress_seed) {
  auto context = make_cpu_context(
      {.stress = {stress_seed, std::chrono::microseconds(50)}, .asynchronous = true});
  EXPECT_FALSE(context->model_runs_on_host());
  return context;
}

struct StepResult {
  std::vector<float> losses;              // per micro-step
  std::vector<std::vector<float>> grads;  // per unit, after all micro-steps
  std::vector<float> dlogits;             // of the last micro-step
};

// Three micro-steps over the same GPT2Compute (the inputs' buffers reused), gradients
// accumulated; reads results only through the public API (stream synchronised at the end).
StepResult run_steps(DeviceContext& context, GPT2Model& model, DType dtype) {
  const GPT2Config& config = model.config();
  const std::int64_t B = 3, T = 11, N = B * T;
  model.zero_grads();
  GPT2Compute compute(config, B, T, context, {.param_dtype = dtype});
  std::vector<std::vector<std::uint16_t>> params16(model.num_units());
  auto p = [&](int u) -> ConstUnitData {
    if (dtype == DType::kFloat32) return {model.param_data(u), dtype};
    return {params16[u].data(), dtype};
  };
  for (int u = 0; u < model.num_units(); ++u) {
    const std::size_t count = model.params(u).layout().num_elements();
    params16[u].resize(count);
    for (std::size_t i = 0; i < count; ++i) params16[u][i] = to_bf16(model.param_data(u)[i]).bits;
  }
  // 16-bit runs accumulate into 16-bit gradients (the staged fp32 rows are added by row index).
  std::vector<std::vector<std::uint16_t>> grads16(model.num_units());
  for (int u = 0; u < model.num_units(); ++u)
    grads16[u].assign(model.grads(u).layout().num_elements(), 0);
  auto g = [&](int u) -> UnitData {
    if (dtype == DType::kFloat32) return {model.grad_data(u), DType::kFloat32};
    return {grads16[u].data(), dtype};
  };
  StepResult result;
  for (int micro = 0; micro < 3; ++micro) {
    const auto tokens = sequence(N, config.vocab_size, 1 + micro);
    const auto targets = sequence(N, config.vocab_size, 5 + micro);
    compute.set_inputs(tokens, targets,
                       {.seed = 9, .step = 3, .sample_offset = 0, .training = true});
    compute.forward_embeddings(p(embeddings_unit()));
    for (int l = 0; l < config.n_layer; ++l) compute.forward_block(l, p(block_unit(l)));
    compute.forward_head(p(final_norm_unit(config)), p(embeddings_unit()));
    compute.backward_head(p(final_norm_unit(config)), p(embeddings_unit()),
                          g(final_norm_unit(config)), g(embeddings_unit()));
    for (int l = config.n_layer - 1; l >= 0; --l)
      compute.backward_block(l, p(block_unit(l)), g(block_unit(l)));
    compute.backward_embeddings(p(embeddings_unit()), g(embeddings_unit()));
    result.losses.push_back(compute.loss());
  }
  compute.stream().synchronize();
  result.dlogits.assign(compute.logits(), compute.logits() + N * config.padded_vocab_size());
  for (int u = 0; u < model.num_units(); ++u) {
    if (dtype == DType::kFloat32) {
      result.grads.emplace_back(model.grad_data(u),
                                model.grad_data(u) + model.grads(u).layout().num_elements());
    } else {
      std::vector<float> widened;
      for (std::uint16_t bits : grads16[u]) widened.push_back(to_float(BFloat16{bits}));
      result.grads.push_back(std::move(widened));
    }
  }
  return result;
}

class GPT2ComputeOffHostTest : public ::testing::TestWithParam<DType> {};

TEST_P(GPT2ComputeOffHostTest, EqualsTheHostPathBitwiseUnderStreamStress) {
  const DType dtype = GetParam();
  const GPT2Config config = tiny_config();
  MemoryLedger ledger;
  HostAllocator host(ledger);
  GPT2Model model(config, host);
  model.init(5);
  const std::unique_ptr<DeviceContext> on_host = make_cpu_context(CpuContextOptions{});
  const StepResult expected = run_steps(*on_host, model, dtype);
  for (std::uint64_t seed : {0, 7}) {
    const std::unique_ptr<DeviceContext> off_host = make_async_context(seed);
    const StepResult got = run_steps(*off_host, model, dtype);
    const std::string what = "stress seed " + std::to_string(seed);
    EXPECT_EQ(got.losses, expected.losses) << what;
    EXPECT_EQ(got.dlogits, expected.dlogits) << what;
    for (std::size_t u = 0; u < expected.grads.size(); ++u)
      EXPECT_EQ(got.grads[u], expected.grads[u]) << what << " unit " << u;
    // The upload and read-back buffers are the context's pinned memory, in its ledger.
    EXPECT_GT(
        off_host->ledger().entry(MemorySpace::kHostPinned, MemoryCategory::kActivations).peak_bytes,
        0);
  }
}

INSTANTIATE_TEST_SUITE_P(ParameterDtypes, GPT2ComputeOffHostTest,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16),
                         [](const auto& test) { return std::string(name_of(test.param)); });

TEST(ClassifierHeadOffHost, EqualsTheHostPathBitwise) {
  const GPT2Config config = tiny_config();
  ClassifierConfig head_config;
  head_config.num_labels = 3;
  head_config.pad_token_id = 0;
  MemoryLedger ledger;
  HostAllocator host(ledger);
  GPT2Model model(config, host);
  model.init(5);
  const std::int64_t B = 4, T = 9, C = config.n_embd, K = head_config.num_labels;
  std::vector<float> score(static_cast<std::size_t>(K * C));
  init_score_range(config, 3, {0, score.size()}, score.data());
  const auto tokens = sequence(B * T, config.vocab_size, 2);
  const std::vector<int> labels = {2, 0, -100, 1};
  struct Result {
    float loss;
    std::vector<float> logits, dscore, dnorm;
    std::vector<int> predictions;
  };
  auto run = [&](DeviceContext& context) {
    model.zero_grads();
    GPT2Compute body(config, B, T, context);
    ClassifierHead head(config, head_config, B, T, context.allocator(MemorySpace::kDevice));
    std::vector<float> dscore(score.size(), 0.0f);
    const int norm = final_norm_unit(config);
    body.set_inputs(tokens, {});
    body.forward_embeddings(model.param_data(embeddings_unit()));
    for (int l = 0; l < config.n_layer; ++l) body.forward_block(l, model.param_data(block_unit(l)));
    head.forward(body, tokens, labels, model.param_data(norm), score.data());
    head.backward(body, model.param_data(norm), score.data(), model.grad_data(norm), dscore.data());
    for (int l = config.n_layer - 1; l >= 0; --l)
      body.backward_block(l, model.param_data(block_unit(l)), model.grad_data(block_unit(l)));
    body.stream().synchronize();
    Result result{head.loss(), {}, dscore, {}, head.predictions()};
    result.logits.assign(head.logits(), head.logits() + B * K);
    result.dnorm.assign(model.grad_data(norm), model.grad_data(norm) + 2 * C);
    return result;
  };
  const std::unique_ptr<DeviceContext> on_host = make_cpu_context(CpuContextOptions{});
  const Result expected = run(*on_host);
  const std::unique_ptr<DeviceContext> off_host = make_async_context(11);
  const Result got = run(*off_host);
  EXPECT_EQ(got.loss, expected.loss);
  EXPECT_EQ(got.logits, expected.logits);
  EXPECT_EQ(got.predictions, expected.predictions);
  EXPECT_EQ(got.dscore, expected.dscore);
  EXPECT_EQ(got.dnorm, expected.dnorm);
}

// The CPU kernels take fp32 activations only; a 16-bit one (the CUDA kernels' gemm_input_dtype)
// is refused at the call, naming it, in asynchronous mode too (not later, as the stream's error).
TEST(CpuKernelsOffHost, RefuseSixteenBitGemmActivationsAtTheCall) {
  const std::unique_ptr<DeviceContext> context =
      make_cpu_context({.stress = {}, .asynchronous = true});
  const std::unique_ptr<Kernels> kernels = make_kernels(*context);
  std::vector<float> out(8 * 8), weight(8 * 8), inp(8 * 8);
  std::vector<std::uint16_t> half(8 * 8);
  const GemmScratch scratch{};
  Stream& stream = context->compute_stream();
  LinearForward forward{out.data(),
                        nullptr,
                        {half.data(), DType::kBFloat16},
                        {weight.data(), DType::kFloat32},
                        nullptr,
                        8,
                        8,
                        8,
                        nullptr,
                        WeightLayout::kInOut};
  try {
    kernels->linear_forward(stream, forward, scratch);
    ADD_FAILURE() << "a bf16 input was taken";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("GPT-2 CPU linear_forward (inp)"), std::string::npos)
        << error.what();
  }
  forward.inp = inp.data();
  forward.out = {half.data(), DType::kBFloat16};
  EXPECT_THROW(kernels->linear_forward(stream, forward, scratch), Error);
  LinearBackward backward;
  backward.inp = {half.data(), DType::kBFloat16};
  EXPECT_THROW(kernels->linear_backward(stream, backward, scratch), Error);
  stream.synchronize();  // nothing was queued: no error waits on the stream
}

}  // namespace
}  // namespace zero::gpt2
