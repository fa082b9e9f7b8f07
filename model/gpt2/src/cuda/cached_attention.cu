// Generation's attention over a KV cache on CUDA: a wrapper over cached_attention_body.h, which
// the CPU emulation test (llama_cuda_emulation_test) runs.
#include "cached_attention_body.h"
#include "layers_cuda.h"
#include "zero/core/cuda_check.h"

namespace zero::gpt2::cuda {
namespace {

using kernels::DeviceThread;

__global__ void cached_attention_kernel(CachedAttention call) {
  cached_attention_body(DeviceThread{}, call);
}

}  // namespace

void cached_attention_forward(const CachedAttention& call, cudaStream_t stream) {
  if (call.Q * call.NH == 0) return;
  kernels::launch_kernel(cached_attention_kernel, cached_attention_launch(call.Q, call.NH), stream,
                         call);
  ZERO_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zero::gpt2::cuda
