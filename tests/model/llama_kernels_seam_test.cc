// The Llama family's kernels through the model's kernel seam (kernels.h) on the CPU backend, in
// host mode (on the calling thread) and asynchronous mode (tasks of the compute stream, the CUDA
// path's ordering), bit for bit the CPU kernels' results (llama_seam_checks.h); a bias given to
// RMSNorm and a rotation past its table refused at the call. The same checks run on a CUDA context
// in llama_cuda_test (label cuda).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "llama_seam_checks.h"
#include "zero/core/cpu_context.h"

namespace zero::gpt2 {
namespace {

CpuContextOptions mode(bool asynchronous) {
  CpuContextOptions options;
  options.asynchronous = asynchronous;
  return options;
}

class LlamaKernelsSeam : public ::testing::TestWithParam<bool> {
 protected:
  std::unique_ptr<DeviceContext> context_ = make_cpu_context(mode(GetParam()));
};

std::string mode_name(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "Asynchronous" : "OnTheHost";
}

TEST_P(LlamaKernelsSeam, RmsNormThroughTheNormCallsIsTheCpuKernels) {
  testing::expect_seam_rmsnorm(*context_, 0.0);
}
TEST_P(LlamaKernelsSeam, RopeTableAndRotationsAreTheCpuKernels) {
  testing::expect_seam_rope(*context_, 0.0);
}
TEST_P(LlamaKernelsSeam, SwigluIsTheCpuKernels) { testing::expect_seam_swiglu(*context_, 0.0); }

INSTANTIATE_TEST_SUITE_P(Modes, LlamaKernelsSeam, ::testing::Values(false, true), mode_name);

}  // namespace
}  // namespace zero::gpt2
