// The backends of the model's kernel seam (kernels.h), each defined beside its kernels and
// chosen by make_kernels (kernels.cc) alone.
#pragma once

#include <memory>

#include "zero/gpt2/kernels.h"

namespace zero::gpt2 {

// layers_cpu.h's kernels (kernels_cpu.cc): on the calling thread when context.model_runs_on_host()
// (or context.planning()), else as tasks of the stream each call names.
std::unique_ptr<Kernels> make_cpu_kernels(DeviceContext& context);

// src/cuda/'s kernels on the stream's cudaStream_t (cuda/kernels_cuda.cc; builds with CUDA only).
std::unique_ptr<Kernels> make_cuda_kernels(DeviceContext& context);
// `inner` with every call timed by CUDA events and a table on stderr at its end
// (src/cuda/profiled_kernels.cc; make_cuda_kernels uses it under ZERO_KERNEL_PROFILE=1).
std::unique_ptr<Kernels> profile_kernels(std::unique_ptr<Kernels> inner);

// Throws zero::Error naming `what` unless `layout` lies within its rows (head_dim even and
// positive, heads · head_dim ≤ row_stride, sizes and offset not negative) and its positions
// within a table of table_positions (Kernels::rope_forward's contract).
void check_rope(const RopeLayout& layout, std::int64_t table_positions, const char* what);
// Throws zero::Error naming `what` unless 0 < KVH ≤ NH and KVH divides NH (Kernels::repeat_kv_*).
void check_heads(const char* what, std::int64_t NH, std::int64_t KVH);

// Throws zero::Error naming `what` unless `call` lies within its cache: sizes not negative,
// first_position + Q ≤ max_positions, KVH dividing NH, q_stride ≥ NH·HS, and (max_head_size > 0)
// HS ≤ max_head_size (Kernels::cached_attention_forward).
void check_cached_attention(const CachedAttention& call, const char* what,
                            std::int64_t max_head_size = 0);

}  // namespace zero::gpt2
